"""Permission policies: a PolicyChain where the first policy with an opinion decides.

Run: python examples/permissions_policies.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

import agentloop as al
import agentloop.permissions
import agentloop.testing
import agentloop.tools
from agentloop.permissions import NetworkPolicy
from agentloop.testing import call, tool_calls


def make_tools(workspace: Path) -> al.ToolRegistry:
    @al.tool(read_only=True, permissions=lambda args: [al.permissions.FileSystemRead(args["path"])])
    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        return (workspace / path).read_text()

    @al.tool(destructive=True, permissions=lambda args: [al.permissions.ShellCommand(args["argv"])])
    async def run(argv: list[str]) -> str:
        """Run a program (pretend)."""
        return "ran: " + " ".join(argv)

    return al.ToolRegistry().with_tool(read_file).with_tool(run)


def describe(decision: al.permissions.Verdict) -> str:
    if isinstance(decision, al.permissions.Deny):
        return f"deny [{decision.code}] {decision.message}"
    if isinstance(decision, al.permissions.AskApproval):
        return f"ask [{decision.reason}] {decision.summary}"
    return "allow"


def make_workspace(tmp: str) -> tuple[Path, Path]:
    """<tmp>/workspace/{todo.txt, shortcut -> ../secret.txt} and <tmp>/secret.txt."""
    root = Path(tmp).resolve()
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / "todo.txt").write_text("buy milk")
    (root / "secret.txt").write_text("hunter2")
    (workspace / "shortcut").symlink_to(root / "secret.txt")
    return root, workspace


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, workspace = make_workspace(tmp)

        policy = al.permissions.PolicyChain(
            al.permissions.ToolPolicy(
                deny=["format_disk"], destructive="approve", read_only="allow"
            ),
            al.permissions.PathPolicy(allowed_roots=[workspace], base=str(workspace)),
            al.permissions.CommandPolicy(
                allow=["ls", "git"], deny=["rm", "sudo"], cwd_roots=[workspace], base=str(workspace)
            ),
            NetworkPolicy(allow=["api.github.com", "*.python.org"], deny=["*.evil.com"]),
            fallback=al.permissions.Deny("policy_denied", "no policy allows this"),
        )
        for request in [
            al.permissions.ToolInvocation("read_file", al.ToolAnnotations(read_only=True)),
            al.permissions.ToolInvocation("format_disk"),
            al.permissions.ToolInvocation("deploy", al.ToolAnnotations(destructive=True)),
            al.permissions.FileSystemRead("todo.txt"),
            al.permissions.FileSystemRead("../secret.txt"),
            al.permissions.FileSystemRead("shortcut"),
            al.permissions.ShellCommand(["rm", "-rf", "/"]),
            al.permissions.ShellCommand(["curl", "example.com"]),
            al.permissions.ShellCommand(["git", "status"], cwd=".."),
            al.permissions.NetworkAccess("https://api.github.com/repos"),
            al.permissions.NetworkAccess("https://docs.python.org/3/"),
            al.permissions.NetworkAccess("https://cdn.evil.com/x.js"),
            al.permissions.NetworkAccess("file:///etc/passwd"),
            al.permissions.NetworkAccess("https://example.com"),
            al.permissions.CustomPermission("mcp.connect", "Connect to MCP server docs"),
        ]:
            shown = describe(policy.evaluate(request)).replace(str(root), "<tmp>")
            print(f"{request.summary} -> {shown}")

        model = al.testing.ScriptedModel(
            [
                tool_calls(
                    call("read_file", {"path": "todo.txt"}, id="call-1"),
                    call("read_file", {"path": "shortcut"}, id="call-2"),
                    call("run", {"argv": ["git", "status"]}, id="call-3"),
                ),
                "Done.",
            ]
        )
        agent = (
            al.Agent.builder()
            .model(model)
            .add_tool_source(make_tools(workspace))
            .permissions(policy)
            .input([al.Item.text(al.ItemKind.USER, "Check my todo list.")])
            .build()
        )
        driver = await agent.start("demo")
        step = await driver.run_until_blocked()
        while isinstance(step, al.ApprovalRequest):
            print(f"approval? {step.tool_name}: {step.summary} ({step.reason})")
            step.approve()
            step = await driver.run_until_blocked()
        assert isinstance(step, al.Finished)
        for item in driver.snapshot().transcript:
            for result in item.tool_results():
                print(f"{result.call_id}: {str(result.output).replace(str(root), '<tmp>')}")


if __name__ == "__main__":
    anyio.run(main)
