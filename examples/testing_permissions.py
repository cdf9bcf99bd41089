"""Property-test a permission policy with agentloop.testing (docs/testing.md)."""

from typing import Any, ClassVar

from hypothesis.stateful import invariant

import agentloop as al
from agentloop.testing import AgentStateMachine


class WorkspacePolicy:
    """Writes inside /workspace need approval; writes anywhere else are denied."""

    def evaluate(self, request: al.PermissionRequest) -> al.PermissionDecision:
        if not isinstance(request, al.FileSystemWrite):
            return al.Allow()
        if request.path.startswith("/workspace/"):
            return al.RequireApproval("sensitive_path", request.summary)
        return al.Deny(al.DenyCode.PATH_NOT_ALLOWED, f"{request.path} is outside /workspace")


class WriteFile:
    path: ClassVar = {"type": "string", "pattern": "^/(workspace|etc)/[a-z]{1,6}$"}
    spec = al.ToolSpec("write_file", "Write", {"properties": {"path": path}, "required": ["path"]})

    def __init__(self) -> None:
        self.written: list[str] = []

    def proposed_requests(self, request: al.ToolRequest) -> list[al.PermissionRequest]:
        return [al.FileSystemWrite(request.input["path"])]

    async def invoke(self, request: al.ToolRequest, ctx: Any) -> str:
        self.written.append(request.input["path"])
        return "written"


class PolicyMachine(AgentStateMachine):
    """Random replies, approvals (some with edited paths), denials and cancellations."""

    def configure_agent(self, builder: al.AgentBuilder) -> al.AgentBuilder:
        self.tool = WriteFile()
        registry = al.ToolRegistry().with_tool(self.tool)
        return builder.add_tool_source(registry).permissions(WorkspacePolicy())

    @invariant()
    def nothing_was_written_outside_the_workspace(self) -> None:
        assert all(path.startswith("/workspace/") for path in self.tool.written), self.tool.written


TestWorkspacePolicy = PolicyMachine.TestCase  # pytest collects this

if __name__ == "__main__":
    PolicyMachine.run(backend="asyncio")
    PolicyMachine.run(backend="trio")
    print("permissions: the policy holds under random host actions")
