"""agentloop as a user installs it: the clone alone, and each extra alone.

The venvs are built by ``make user-venvs`` (``scripts/user_venvs.sh``), which
``make test`` runs before pytest; tests never run pip. ``.venv-user/`` holds
the clone with no extra, ``.venv-user-extras/EXTRA/`` the clone with one extra.
Each is probed by ``tests/user_install_probe.py`` under ``python -I``, so the
agentloop it imports is the installed one, not this checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agentloop._extras import EXTRA_OF_MODULE
from agentloop.cli import MISSING_EXTRA

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / ".venv-user"
EXTRAS = ROOT / ".venv-user-extras"
PROBE = ROOT / "tests" / "user_install_probe.py"

# The modules each extra's imports are for (every other module imports without extras).
EXTRA_MODULES = {
    "a2a": ("agentloop.a2a._",),
    "agui": ("agentloop.ui._",),
    "cli": ("agentloop.cli._",),
    "dbos": ("agentloop.durable.dbos",),
    "mcp": ("agentloop.mcp",),
    "otel": ("agentloop.observe._otel",),
    "serve": ("agentloop.serve._",),
    "testing": ("agentloop.testing._",),
}
# One module per extra that cannot import without it (the extra is really needed).
NEEDS_EXTRA = {
    "a2a": "agentloop.a2a._app",
    "agui": "agentloop.ui._app",
    "cli": "agentloop.cli._main",
    "dbos": "agentloop.durable.dbos",
    "mcp": "agentloop.mcp",
    "otel": "agentloop.observe._otel",
    "serve": "agentloop.serve._app",
    "testing": "agentloop.testing._strategies",
}


def _in_clone(extra: str) -> str:
    return f"pip install 'agentloop-runtime[{extra}]' (in a clone: pip install '.[{extra}]')"


# What each entry point says in a core install: one line naming the install command.
CORE_ENTRY_POINTS = {
    "cli": "ModuleNotFoundError: No module named 'rich'",
    "postgres": "ModuleNotFoundError: PostgresSessionStore needs psycopg 3: "
    "pip install 'agentloop-runtime[postgres]'",
    "redis": "ModuleNotFoundError: RedisSessionStore needs redis: "
    "pip install 'agentloop-runtime[redis]'",
    "otel": "ImportError: agentloop.observe.OtelObserver needs OpenTelemetry: "
    "pip install 'agentloop-runtime[otel]'",
    "testing": "ImportError: agentloop.testing.transcripts needs hypothesis, which is not "
    "installed; install it with pip install 'agentloop-runtime[testing]' (or pip install "
    "hypothesis)",
    "mcp": "ModuleNotFoundError: agentloop.mcp needs the mcp extra (mcp is not installed): "
    + _in_clone("mcp"),
    "dbos": "ModuleNotFoundError: agentloop.durable.dbos needs the dbos extra (dbos is not "
    "installed): " + _in_clone("dbos"),
    "serve": "ModuleNotFoundError: agentloop serve needs the serve extra (starlette is "
    "missing): pip install 'agentloop-runtime[serve]'",
    "agui": "ModuleNotFoundError: agentloop.ui needs the agui extra (ag_ui is not "
    "installed): " + _in_clone("agui"),
    "a2a": "ModuleNotFoundError: agentloop.a2a needs the a2a extra (a2a is not "
    "installed): " + _in_clone("a2a"),
}


def _declared_extras() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return sorted(name for name in project["optional-dependencies"] if name != "dev")


def _venv(path: Path) -> Path:
    python = path / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"{path.name} is not built: run `make user-venvs` (make test runs it first)")
    return python


def _clean_environment(**extra: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL"))}
    return {**environment, **extra}


def _probe(venv: Path, tmp_path: Path, *flags: str) -> dict[str, object]:
    done = subprocess.run(
        [str(_venv(venv)), "-I", str(PROBE), *flags],
        cwd=tmp_path,
        env=_clean_environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    assert Path(str(report["agentloop"])).is_relative_to(venv)  # the installed copy
    return report


def _extra_of(module: str) -> str | None:
    for extra, prefixes in EXTRA_MODULES.items():
        if module.startswith(prefixes):
            return extra
    return None


def test_every_extra_is_covered_here() -> None:
    assert _declared_extras() == [
        "a2a",
        "agui",
        "cli",
        "dbos",
        "docs",
        "mcp",
        "otel",
        "postgres",
        "redis",
        "serve",
        "testing",
    ]
    assert set(EXTRA_OF_MODULE.values()) == set(_declared_extras()) - {"docs"}


def test_a_core_install_imports_every_module_that_needs_no_extra(tmp_path: Path) -> None:
    report = _probe(CORE, tmp_path, "--turn")
    failed = report["failed"]
    assert isinstance(failed, dict)
    wrong = {
        module: reason
        for module, reason in failed.items()
        if not reason.startswith("missing ")
        or EXTRA_OF_MODULE.get(reason.removeprefix("missing ")) != _extra_of(module)
    }
    assert wrong == {}  # each failure is a module of an extra, missing that extra's import
    assert {module: _extra_of(module) for module in NEEDS_EXTRA.values()} == {
        module: _extra_of(module) for module in NEEDS_EXTRA.values() if module in failed
    }
    assert report["entry_points"] == CORE_ENTRY_POINTS


def test_a_core_install_runs_a_scripted_turn(tmp_path: Path) -> None:
    report = _probe(CORE, tmp_path, "--turn")
    assert report["turn"] == {
        "final_text": "42",
        "kinds": ["user", "assistant", "tool", "assistant"],
        "deltas": ["It is ", "42."],
    }


def test_the_command_without_the_cli_extra_says_what_to_install(tmp_path: Path) -> None:
    _venv(CORE)
    done = subprocess.run(
        [str(CORE / "bin" / "agentloop"), "demo", "--scripted"],
        cwd=tmp_path,
        env=_clean_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, "", MISSING_EXTRA + "\n")


@pytest.mark.parametrize("extra", sorted(set(EXTRA_MODULES) | {"postgres", "redis"}))
def test_each_extra_installed_alone_imports_its_modules(extra: str, tmp_path: Path) -> None:
    report = _probe(EXTRAS / extra, tmp_path)
    failed = report["failed"]
    assert isinstance(failed, dict)
    assert {module: reason for module, reason in failed.items() if _extra_of(module) == extra} == {}
    entry_points = report["entry_points"]
    assert isinstance(entry_points, dict)
    assert entry_points[extra] == "ok"


def test_the_cli_extra_runs_the_scripted_demo(tmp_path: Path) -> None:
    _venv(EXTRAS / "cli")
    done = subprocess.run(
        [
            str(EXTRAS / "cli" / "bin" / "agentloop"),
            "demo",
            "--scripted",
            "--yes",
            "--store",
            "demo.db",
        ],
        cwd=tmp_path,
        env=_clean_environment(AGENTLOOP_CACHE_DIR=str(tmp_path / "cache")),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "session 'demo-scripted' saved in demo.db" in done.stdout.splitlines()
    assert (tmp_path / "demo.db").is_file()


def test_the_installed_command_reports_the_distributions_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    _venv(EXTRAS / "cli")
    done = subprocess.run(
        [str(EXTRAS / "cli" / "bin" / "agentloop"), "--version"],
        cwd=tmp_path,
        env=_clean_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, f"agentloop {version('agentloop-runtime')}\n")


def test_the_docs_extra_has_what_make_docs_runs(tmp_path: Path) -> None:
    python = _venv(EXTRAS / "docs")
    done = subprocess.run(
        [
            str(python),
            "-I",
            "-c",
            "import material, mkdocs, mkdocstrings, mkdocstrings_handlers.python; print('ok')",
        ],
        cwd=tmp_path,
        env=_clean_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")
    assert sys.version_info >= (3, 11)
