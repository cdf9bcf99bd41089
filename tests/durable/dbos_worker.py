"""A DBOS worker process for the crash tests.

Usage: dbos_worker.py SYSTEM_DB_URL EXECUTOR_ID WORKDIR CLAIMS

CLAIMS is a SQLite file path or a PostgreSQL URI for the claims store. The
worker registers the test agent (a turn whose model call failed retryably
is retried once), launches DBOS (recovering this executor's
unfinished workflows), serves the queue ``sessions`` and writes
``WORKDIR/ready-EXECUTOR_ID`` once it is up; SIGTERM stops it cleanly.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from dbos import DBOS
from durable_kit import build_agent, build_nested_agent

from agentloop import TurnRetryPolicy
from agentloop.durable.dbos import DurableAgent, dbos_config
from agentloop.store import PostgresSessionStore, SessionStore, SqliteSessionStore

QUEUE = "sessions"
VERSION = "durable-test-1"


def main() -> None:
    url, executor_id, workdir, claims_target = sys.argv[1:5]
    claims: SessionStore = (
        PostgresSessionStore(claims_target)
        if claims_target.startswith("postgresql")
        else SqliteSessionStore(claims_target)
    )
    retry = TurnRetryPolicy(max_retries=1, initial_delay=0.05)
    DurableAgent(build_agent(Path(workdir)), name="charges", claims=claims, retry=retry)
    DurableAgent(build_nested_agent(Path(workdir)), name="nested", claims=claims)
    DBOS(
        config=dbos_config(
            "agentloop-durable-test", url, executor_id=executor_id, application_version=VERSION
        )
    )
    DBOS.launch()
    DBOS.register_queue(QUEUE, worker_concurrency=2)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    (Path(workdir) / f"ready-{executor_id}").write_text("1")
    stop.wait(120)
    DBOS.destroy()


if __name__ == "__main__":
    main()
