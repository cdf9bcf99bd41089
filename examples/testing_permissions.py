"""Property-test a permission policy with agentloop.testing (docs/testing.md)."""

import os
from typing import Any, ClassVar

import pytest
from hypothesis.stateful import invariant

import agentloop as al
import agentloop.permissions
import agentloop.tools
from agentloop.testing import AgentStateMachine, check_path_policy


class WorkspacePolicy:
    """Writes inside the root need approval; writes anywhere else are denied.

    The path is resolved first (``..`` and symlinks) and compared by path
    components: ``path.startswith("/workspace/")`` would let
    ``/workspace/../etc/x`` through to an approval prompt that looks harmless.
    """

    def __init__(self, root: str = "/workspace") -> None:
        self.root = os.path.realpath(root)

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if not isinstance(request, al.permissions.FileSystemWrite | al.permissions.FileSystemRead):
            return al.permissions.Allow()
        real = os.path.realpath(os.path.join(self.root, request.path))
        if os.path.commonpath([real, self.root]) != self.root:
            return al.permissions.Deny(
                al.permissions.DenyCode.PATH_NOT_ALLOWED, f"{request.path} is outside {self.root}"
            )
        if isinstance(request, al.permissions.FileSystemWrite):
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Allow()


class PrefixPolicy(WorkspacePolicy):
    """The bug: a prefix test on the raw text."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if getattr(request, "path", "").startswith("/workspace/"):
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Deny(al.permissions.DenyCode.PATH_NOT_ALLOWED, "outside /workspace")


def test_paths_outside_the_workspace_are_denied() -> None:
    # Traversal, look-alike siblings (/workspace-evil), unicode, relative paths;
    # without a root, a temporary sandbox whose symlinks lead out of it.
    check_path_policy(WorkspacePolicy("/workspace"), "/workspace", deny_outside=True)
    check_path_policy(WorkspacePolicy, deny_outside=True)  # built for the sandbox's root
    with pytest.raises(AssertionError, match="answered AskApproval"):
        check_path_policy(PrefixPolicy(), "/workspace", deny_outside=True)


class WriteFile:
    pattern: ClassVar = "^/(workspace|etc|workspace/\\.\\.|workspace-old)/[a-z]{1,6}$"
    spec = al.ToolSpec(
        "write_file",
        "Write",
        {"properties": {"path": {"type": "string", "pattern": pattern}}, "required": ["path"]},
    )

    def __init__(self) -> None:
        self.written: list[str] = []

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemWrite(request.input["path"])]

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
        for path in self.tool.written:
            real = os.path.realpath(os.path.join("/workspace", path))
            assert os.path.commonpath([real, "/workspace"]) == "/workspace", path


TestWorkspacePolicy = PolicyMachine.TestCase  # pytest collects this

if __name__ == "__main__":
    test_paths_outside_the_workspace_are_denied()
    PolicyMachine.run(backend="asyncio")
    PolicyMachine.run(backend="trio", seed=1)
    print("permissions: the policy holds under random host actions")
