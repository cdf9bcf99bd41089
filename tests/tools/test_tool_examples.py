"""The tools and permissions examples run, and the docs show them and their output verbatim."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples"
DOCS = {
    "tools_decorator": "tools.md",
    "tools_failures": "tools.md",
    "tools_catalog": "tools.md",
    "permissions_policies": "permissions.md",
    "permissions_safe_files": "security.md",
}
KEY_LINES = {
    "permissions_safe_files": [
        "ShellCommand('git log -n 3').argv = ('git', 'log', '-n', '3')",
        "env rm -rf / -> deny: command 'env rm -rf /' is not allowed: 'rm' is on the deny list "
        "(it runs it)",
        "Read loop -> deny: cannot read 'loop': it cannot be resolved: more than 40 symbolic "
        "links (a loop or a chain that is too long)",
        "  filesystem.write: Write <tmp>/app (outside the allowed roots) (sensitive_path)",
        "  shell.command: Run make install (sensitive_command)",
        "plain open reads: someone else's",
        "open_beneath refuses: cannot open 'notes/todo.txt': 'notes' is a symbolic link, and "
        "open_beneath follows none",
        "nothing planted outside: True",
    ],
    "tools_decorator": [
        "call-1: {'city': 'Oslo', 'degrees': 38.3, 'unit': 'f'} error=False",
        "call-2: 'HI HI' error=False",
        "call-3: \"invalid input for tool 'shout': at $.times: 'two' is not of type 'integer'\" "
        "error=True",
    ],
    "tools_failures": [
        "call-2 [failed]: tool 'divide' failed: ZeroDivisionError: float division by zero",
        "call-4 [unknown_tool]: unknown tool 'translate'; available tools: divide, essay, "
        "wait_forever",
        "call-5 [timed_out]: tool 'wait_forever' timed out after 0.1 s",
        "call-6 [invalid_input]: invalid input for tool 'divide': the arguments are not valid "
        'JSON: \'{"a": 1, "b":\'',
        "[output truncated: 460 of 500 characters cut]",
        "transcript valid: completed",
    ],
    "tools_catalog": [
        "model sees: install_readme, search",
        "catalog of plugins: added=['readme'] removed=['install_readme'] changed=[]",
        "model sees: readme, search",
        "call-1: \"builtin results for 'anyio'\"",
        "call-3: '# agentloop\\n\\nA very long\\n[output truncated: 93 of 117 characters cut]'",
        "collision='error': tool name collision: 'search' is offered by more than one source; "
        "rename one or use collision='first_wins'",
    ],
    "permissions_policies": [
        "Call tool format_disk -> deny [tool_not_allowed] tool 'format_disk' is not allowed",
        "rm -rf / -> deny [command_not_allowed] command 'rm -rf /' is not allowed: 'rm' is on "
        "the deny list",
        "git status (in ..) -> deny [command_not_allowed] cannot run 'git status' in '..': it "
        "resolves to <tmp>, outside the allowed working directories (<tmp>/workspace); pass a "
        "cwd under one of them",
        "Access https://docs.python.org/3/ -> allow",
        "Access https://cdn.evil.com/x.js -> deny [network_not_allowed] cannot access "
        "'https://cdn.evil.com/x.js': host 'cdn.evil.com' matches '*.evil.com' on the deny list",
        "Access file:///etc/passwd -> deny [network_not_allowed] cannot access "
        "'file:///etc/passwd': scheme 'file' is not allowed (allowed: http, https)",
        "Access https://example.com -> ask [unknown_target] Access https://example.com (host "
        "example.com is not on the allow list)",
        "approval? run: Call tool run (destructive) (destructive_tool)",
        "call-1: buy milk",
        "call-2: tool permission denied: cannot read 'shortcut': it resolves to "
        "<tmp>/secret.txt, outside the allowed roots (<tmp>/workspace); use a path under one of "
        "them (code: path_not_allowed)",
        "call-3: ran: git status",
    ],
}


def run_example(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(DOCS))
def test_example_runs_and_its_documented_output_is_what_it_prints(name: str) -> None:
    done = run_example(name)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for line in KEY_LINES[name]:
        assert line in lines
    doc = (ROOT / "docs" / DOCS[name]).read_text()
    assert f"```python\n{(EXAMPLES / f'{name}.py').read_text()}```" in doc
    assert f"```text\n{done.stdout}```" in doc


def test_tracebacks_go_to_the_log_not_the_model() -> None:
    done = run_example("tools_failures")
    assert "tool raised" in done.stderr
    assert "ZeroDivisionError: float division by zero" in done.stderr
    assert "Traceback" not in done.stdout
