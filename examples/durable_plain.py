"""The refund agent with a plain LoopDriver: one process, nothing survives a crash.

Two inputs in one session: a refund that needs approval, then a small one.

Run: python examples/durable_plain.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
from durable_agent import build_agent, request

import agentloop as al
import agentloop.transcript


async def answer(driver: al.LoopDriver) -> str:
    """Drive one turn to its end; approvals are answered here, by this process."""
    while True:
        step = await driver.next()
        if isinstance(step, al.ApprovalRequest):
            print(f"approval: {step.summary}")
            step.approve()  # the human, in this process
        elif isinstance(step, al.Finished):
            return step.result.final_items[-1].parts[0].text  # type: ignore[union-attr]


async def main() -> None:
    ledger = Path(tempfile.mkdtemp(prefix="agentloop-plain-")) / "ledger.txt"
    driver = await build_agent(ledger).start("customer-42")
    driver.submit_input(request("A-17", 250))
    print(f"answer: {await answer(driver)}")
    driver.submit_input(request("A-18", 40))  # the same session goes on
    print(f"answer: {await answer(driver)}")
    al.transcript.validate_transcript(driver.snapshot().transcript)
    print(f"ledger: {'; '.join(ledger.read_text().splitlines())}")


if __name__ == "__main__":
    anyio.run(main)
