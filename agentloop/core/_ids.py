"""Identifier types: ``NewType``s over ``str``, free at run time."""

from __future__ import annotations

from typing import NewType

__all__ = ["ApprovalId", "SessionId", "TaskId", "ToolCallId", "TurnId"]

SessionId = NewType("SessionId", str)
TurnId = NewType("TurnId", str)
ToolCallId = NewType("ToolCallId", str)
TaskId = NewType("TaskId", str)
ApprovalId = NewType("ApprovalId", str)
