"""The same refund agent as a DBOS session: each input is a workflow, each call a step.

The session survives a crash of this process (restart it with the same
executor id and DBOS resumes the run; nothing recorded runs twice). The
approval is answered through a ``DBOSClient``, as another process would,
possibly days later; the second input continues the same session in a new
run. SQLite here; a PostgreSQL URL works the same.

Run: python examples/durable_dbos.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
from dbos import DBOS, DBOSClient
from durable_agent import build_agent, request

import agentloop as al
import agentloop.transcript
from agentloop.durable.dbos import (
    DurableAgent,
    DurableRunResult,
    approve,
    dbos_config,
    pending_approval,
    send_input,
    wait_result,
)
from agentloop.store import SqliteSessionStore


def answer(result: DurableRunResult) -> str:
    """The run's last answer."""
    return result.transcript[-1].parts[0].text  # type: ignore[union-attr]


async def main(folder: Path) -> None:
    client = DBOSClient(system_database_url=f"sqlite:///{folder / 'dbos.sqlite'}")
    try:
        run = await send_input("refunds", "customer-42", request("A-17", 250))
        pending = await pending_approval(client, run, within=30)
        assert pending is not None
        print(f"approval: {pending.summary}")
        await approve(client, run, pending.call_id, al.ApprovalAnswer.approve())
        first = await wait_result(client, run, within=30)
        print(f"answer: {answer(first)}")
        later = await send_input("refunds", "customer-42", request("A-18", 40))  # run 2
        second = await wait_result(client, later, within=30)
        print(f"answer: {answer(second)}")
    finally:
        client.destroy()
    al.transcript.validate_transcript(second.transcript)
    print(f"ledger: {'; '.join((folder / 'ledger.txt').read_text().splitlines())}")
    print(f"runs: {[first.workflow_id, second.workflow_id]}")
    print(f"approvals: {[outcome.status.value for outcome in first.approvals]}")


if __name__ == "__main__":
    folder = Path(tempfile.mkdtemp(prefix="agentloop-dbos-"))
    claims = SqliteSessionStore(folder / "claims.sqlite")  # non-idempotent calls are claimed
    DurableAgent(build_agent(folder / "ledger.txt"), name="refunds", claims=claims)
    # Before launch: every worker needs its own executor_id and a pinned version.
    config = dbos_config(
        "agentloop-refunds",
        f"sqlite:///{folder / 'dbos.sqlite'}",
        executor_id="worker-1",
        application_version="refunds-1",
    )
    DBOS(config=config)
    DBOS.launch()
    try:
        anyio.run(main, folder)
    finally:
        DBOS.destroy()
        anyio.run(claims.aclose)
