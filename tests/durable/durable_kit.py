"""The agent of the durable tests: a scripted model and a charging tool, both counted on disk.

Every model request appends a line to ``requests.log`` (its turn id, how
many items it holds and the texts of its user items); every charge that
really runs appends one to ``charges.log``. The user says ``charge N``, or
``fail auth`` / ``fail busy`` (the model call fails, not retryable /
retryable) or ``fail busy until turn-N`` (retryable failures in turns
before ``turn-N``, then an answer). Files in the work dir make a worker hang
at a chosen point so a test can SIGKILL it there: ``hang_tool`` (inside the
tool, after its side effect), ``hang_model_2`` (inside the model call after
a tool result) and ``hang_<turn id>`` (inside every model call of that turn).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
from dbos import DBOSClient

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.tools
from agentloop.durable.dbos import DurableAgent
from agentloop.testing import Reply, ScriptedModel, call, fail, hang, text, tool_calls

IN_DOUBT_PREFIX = "in doubt: tool call"
"""How the in-doubt answer of a claimed call begins."""

APPROVAL_LIMIT = 100
"""Charges above this need a human's approval."""


def _append(path: Path, line: str) -> None:
    with path.open("a") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _marker(path: Path) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text("1")
    temporary.rename(path)


def lines(path: Path) -> list[str]:
    """The lines of a counter file (none when it does not exist)."""
    return path.read_text().splitlines() if path.exists() else []


class Charge:
    """Charge an amount: a side effect that must run at most once."""

    spec = al.ToolSpec(
        "charge",
        "Charge the customer.",
        {
            "type": "object",
            "properties": {"amount": {"type": "integer"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    )

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [
            al.permissions.CustomPermission("payment.charge", f"charge {request.input['amount']}")
        ]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        if request.input["amount"] < 0:
            raise ValueError(f"cannot charge a negative amount ({request.input['amount']})")
        _append(self.workdir / "charges.log", f"{request.call_id} {request.input['amount']}")
        if (self.workdir / "hang_tool").exists():
            _marker(self.workdir / "tool_started")
            await anyio.sleep_forever()
        return f"charged {request.input['amount']}"


class ApproveLargeCharges:
    """Charges above :data:`APPROVAL_LIMIT` ask a human."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "payment.charge" and int(request.summary.split()[1]) > APPROVAL_LIMIT:
            return al.permissions.AskApproval("policy_requires_confirmation", request.summary)
        return al.permissions.Allow()


def build_agent(workdir: Path) -> al.Agent:
    """The agent: 'charge N' makes the model call ``charge``, then it reports the result."""

    def answer(request: al.model.TurnRequest) -> Reply:
        users = [_text(item) for item in request.transcript if item.kind is al.ItemKind.USER]
        line = {"turn": request.turn_id, "items": len(request.transcript), "users": users}
        _append(workdir / "requests.log", json.dumps(line))
        if (workdir / f"hang_{request.turn_id}").exists():
            _marker(workdir / f"model_{request.turn_id}_started")
            return hang()
        last = request.transcript[-1]
        if last.kind is al.ItemKind.USER:
            words = _text(last).split()
            if words[0] == "fail":
                return _failure(words, request.turn_id)
            amount = int(words[1])
            return tool_calls(call("charge", {"amount": amount}, id=f"{request.turn_id}-charge"))
        if (workdir / "hang_model_2").exists():
            _marker(workdir / "model_2_started")
            return hang()
        results = [part for part in last.parts if isinstance(part, al.ToolResultPart)]
        return text(f"done: {results[0].output}")

    registry = al.ToolRegistry().with_tool(Charge(workdir))
    return (
        al.Agent.builder()
        .model(ScriptedModel(answer))
        .add_tool_source(registry)
        .permissions(ApproveLargeCharges())
        .build()
    )


def _failure(words: list[str], turn_id: str) -> Reply:
    if words[1] == "auth":
        denied = al.ProviderError(
            "401: invalid api key", status=401, kind=al.ProviderErrorKind.AUTH
        )
        return fail(denied)
    until = words[3] if len(words) == 4 else None  # fail busy until turn-N
    if until is not None and _turn_number(turn_id) >= _turn_number(until):
        return text(f"back online in {turn_id}")
    return fail(al.ProviderError("503: overloaded", status=503, retryable=True))


def _turn_number(turn_id: str) -> int:
    return int(turn_id.rsplit("-", 1)[1])


def _text(item: al.Item) -> str:
    return "".join(part.text for part in item.parts if isinstance(part, al.TextPart))


def user(content: str) -> list[al.Item]:
    """One user message."""
    return [al.Item.text(al.ItemKind.USER, content)]


def final_text(transcript: Any) -> str:
    """The last assistant text of a transcript."""
    return _text(transcript[-1])


class Launched:
    """DBOS launched in this process (the ``launched`` fixture): a client, the agent, counters."""

    def __init__(self, workdir: Path, client: DBOSClient, agent: DurableAgent) -> None:
        self.workdir = workdir
        self.client = client
        self.agent = agent

    def charges(self) -> list[str]:
        """The charges that really ran."""
        return lines(self.workdir / "charges.log")

    def requests(self) -> list[dict[str, Any]]:
        """The model requests, as logged."""
        return [json.loads(line) for line in lines(self.workdir / "requests.log")]


def build_nested_agent(workdir: Path) -> al.Agent:
    """A lead agent whose tool ``charger`` runs :func:`build_agent`'s agent as a child
    (``Agent.as_tool``): 'charge N' makes it call the child with that text, then it says
    ``lead: `` and the child's answer."""

    def answer(request: al.model.TurnRequest) -> Reply:
        last = request.transcript[-1]
        if last.kind is al.ItemKind.USER:
            return tool_calls(
                call("charger", {"input": _text(last)}, id=f"{request.turn_id}-charger")
            )
        results = [part for part in last.parts if isinstance(part, al.ToolResultPart)]
        return text(f"lead: {results[0].output}")

    child = build_agent(workdir).as_tool("charger", "Charges the customer.")
    return (
        al.Agent.builder()
        .model(ScriptedModel(answer))
        .add_tool_source(al.ToolRegistry().with_tool(child))
        .build()
    )
