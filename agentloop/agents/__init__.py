"""Agents working together: an agent as a tool of another, and handoffs.

``Agent.as_tool(name, description)`` makes an :class:`AgentTool`: each call
runs the agent in a driver of its own, nested in the caller's tool round; its
approvals surface at the top driver as :class:`ChildApprovalRequest` steps
(and its calls' questions as ``CallQuestion`` steps) whose ``path`` names the
calls above it. :func:`handoff` makes a tool whose call hands the conversation
to another agent; :func:`take_handoff` (or :func:`run_handoffs`) starts that
agent on the history so far, made valid for any provider. See ``docs/agents.md``.
"""

from ..loop._agent_tool import CHILD_SESSION_KEY, AgentTool, ChildRun
from ..loop._child_usage import CHILD_USAGE_KEY
from ..loop._steps import ChildApprovalRequest
from ._handoff import HANDOFF_KEY, Handoff, HandoffResult, handoff, run_handoffs, take_handoff
from ._history import HistoryFilter, portable_history, without_tool_rounds

__all__ = [
    "CHILD_SESSION_KEY",
    "CHILD_USAGE_KEY",
    "HANDOFF_KEY",
    "AgentTool",
    "ChildApprovalRequest",
    "ChildRun",
    "Handoff",
    "HandoffResult",
    "HistoryFilter",
    "handoff",
    "portable_history",
    "run_handoffs",
    "take_handoff",
    "without_tool_rounds",
]
