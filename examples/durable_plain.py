"""The refund agent with a plain LoopDriver: one process, nothing survives a crash.

Run: python examples/durable_plain.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
from durable_agent import build_agent, request

import agentloop as al


async def main() -> None:
    ledger = Path(tempfile.mkdtemp(prefix="agentloop-plain-")) / "ledger.txt"
    agent = build_agent(ledger, request("A-17", 250))
    driver = await agent.start("refund-A-17")
    while True:
        step = await driver.next()
        if isinstance(step, al.ApprovalRequest):
            print(f"approval: {step.summary}")
            step.approve()  # the human, in this process
        elif isinstance(step, al.Finished):
            break
    transcript = driver.snapshot().transcript
    al.validate_transcript(transcript)
    print(f"answer: {transcript[-1].parts[0].text}")  # type: ignore[union-attr]
    print(f"ledger: {ledger.read_text().strip()}")


if __name__ == "__main__":
    anyio.run(main)
