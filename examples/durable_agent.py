"""The agent of the durable examples: the same code runs plain and under DBOS.

A scripted model (no network) refunds an order through the ``refund`` tool,
a side effect written to a ledger file; refunds above 100 need a human's
approval.
"""

from __future__ import annotations

from pathlib import Path

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.tools
from agentloop.testing import Reply, ScriptedModel, call, text, tool_calls


class Refund:
    """Refund an order: not idempotent, so it must never run twice."""

    spec = al.ToolSpec(
        "refund",
        "Refund an order.",
        {
            "type": "object",
            "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}},
            "required": ["order", "amount"],
            "additionalProperties": False,
        },
    )

    def __init__(self, ledger: Path) -> None:
        self.ledger = ledger

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        amount = request.input["amount"]
        return [al.permissions.CustomPermission("payment.refund", f"refund {amount}")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        with self.ledger.open("a") as ledger:
            ledger.write(f"{request.input['order']} refunded {request.input['amount']}\n")
        return f"refunded {request.input['amount']} on {request.input['order']}"


class ApproveLargeRefunds:
    """Refunds above 100 ask a human."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "payment.refund" and int(request.summary.split()[1]) > 100:
            return al.permissions.AskApproval("policy_requires_confirmation", request.summary)
        return al.permissions.Allow()


def answer(request: al.model.TurnRequest) -> Reply:
    """The model: refund what the user asks, then report the tool's answer."""
    last = request.transcript[-1]
    if last.kind is al.ItemKind.USER:
        order, amount = last.parts[0].text.split()[1:3]  # type: ignore[union-attr]
        refund = call("refund", {"order": order, "amount": int(amount)}, id="refund-1")
        return tool_calls(refund)
    [result] = [part for part in last.parts if isinstance(part, al.ToolResultPart)]
    return text(f"Done: {result.output}")


def build_agent(ledger: Path) -> al.Agent:
    """The refund agent; ``ledger`` records every refund that really ran."""
    return (
        al.Agent.builder()
        .model(ScriptedModel(answer))
        .add_tool_source(al.ToolRegistry().with_tool(Refund(ledger)))
        .permissions(ApproveLargeRefunds())
        .build()
    )


def request(order: str, amount: int) -> list[al.Item]:
    """The user's message."""
    return [al.Item.text(al.ItemKind.USER, f"refund {order} {amount}")]
