"""A plain host process: resumes sessions from a SQLite store and prints how they ended.

``python plain_host.py PATH.db BACKEND SESSION...``: for each session,
``Agent.resume(session_id=...)`` with the agent of ``serve_support`` (no serve
code, no audit log), drive it until it blocks, and print one JSON line:
the session id, the driver's state, and the texts of its last two items.
"""

from __future__ import annotations

import json
import sys

import anyio
from serve_support import build_agent

import agentloop as al
from agentloop.store import SqliteSessionStore


async def main(path: str, session_ids: list[str]) -> None:
    async with SqliteSessionStore(path) as store:
        agent = build_agent(store)
        for session_id in session_ids:
            driver = await agent.resume(session_id=session_id)
            step = await driver.run_until_blocked()
            items = driver.snapshot().transcript
            result = next(p for p in items[-2].parts if isinstance(p, al.ToolResultPart))
            print(
                json.dumps(
                    {
                        "session_id": session_id,
                        "step": type(step).__name__,
                        "state": str(driver.state),
                        "result": result.output,
                        "is_error": result.is_error,
                        "answer": items[-1].text_content,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[3:], backend=sys.argv[2])
