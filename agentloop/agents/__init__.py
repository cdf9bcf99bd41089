"""Agents working together: an agent as a tool of another, and handoffs.

``Agent.as_tool(name, description)`` makes an :class:`AgentTool`: each call
runs the agent in a driver of its own, nested in the caller's tool round; its
approvals surface at the top driver as :class:`ChildApprovalRequest` steps
(and its calls' questions as ``CallQuestion`` steps) whose ``path`` names the
calls above it. See ``docs/agents.md``.
"""

from ..loop._agent_tool import CHILD_SESSION_KEY, AgentTool, ChildRun
from ..loop._state import CHILD_USAGE_KEY
from ..loop._steps import ChildApprovalRequest

__all__ = [
    "CHILD_SESSION_KEY",
    "CHILD_USAGE_KEY",
    "AgentTool",
    "ChildApprovalRequest",
    "ChildRun",
]
