"""Every Python code block in the docs runs as it stands (imports included).

Pages are found by glob (``docs/*.md`` and ``README.md``), so a new page is
checked without editing this file. Each ```` ```python ```` block runs alone,
in a fresh namespace, in a subprocess-free ``exec`` compiled without this
file's ``__future__`` imports (so it must import what it uses, exactly as a
reader who copies it). When the prose right after a block starts with
``Output`` and a ```` ```text ```` block follows, what the block printed must
equal that text. A block that is deliberately a fragment (it needs an API
key, or shows a few lines of a bigger program) says so on the line before its
fence::

    <!-- not-run: needs an API key -->

and is only compiled (top-level ``await`` allowed), not run. Fragments are at
most a quarter of all blocks.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import sys
import types
from pathlib import Path

import attrs
import pytest
import structlog
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
FENCE = re.compile(r"^```python\s*$")
NOT_RUN = re.compile(r"^<!--\s*not-run\b.*-->\s*$")


@attrs.frozen
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    code: str
    run: bool
    output: str | None = None  # what it must print, when the page shows that

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        if FENCE.match(lines[index]):
            end = index + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            before = next((line for line in reversed(lines[:index]) if line.strip()), "")
            code = "\n".join(lines[index + 1 : end])
            run = not NOT_RUN.match(before.strip())
            found.append(Block(page, index + 1, code, run, _shown_output(lines, end + 1)))
            index = end
        index += 1
    return found


def _shown_output(lines: list[str], start: int) -> str | None:
    """The ```text block after a paragraph starting ``Output`` that follows a block."""
    index = start
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index >= len(lines) or not lines[index].startswith("Output"):
        return None
    while index < len(lines) and lines[index].strip() and not lines[index].startswith("```"):
        index += 1
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index >= len(lines) or lines[index].strip() != "```text":
        return None
    end = index + 1
    while end < len(lines) and not lines[end].startswith("```"):
        end += 1
    return "\n".join(lines[index + 1 : end]) + "\n"


BLOCKS = [block for page in PAGES for block in blocks_of(page)]


settings.register_profile(
    "docs", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=20
)


@pytest.mark.parametrize("block", [pytest.param(block, id=block.id) for block in BLOCKS])
def test_code_block_runs(block: Block, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    flags = 0 if block.run else ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compiled = compile(block.code, block.id, "exec", flags=flags, dont_inherit=True)
    if not block.run:
        return  # a marked fragment: it must still be valid Python
    monkeypatch.chdir(tmp_path)  # a snippet that writes files writes them here
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(50))
    previous = settings.default
    settings.load_profile("docs")
    script = types.ModuleType("__main__")  # as `python block.py` runs it: types resolve by module
    monkeypatch.setitem(sys.modules, "__main__", script)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compiled, script.__dict__)
    finally:
        settings.register_profile("docs-restore", previous)
        settings.load_profile("docs-restore")
        structlog.reset_defaults()
    if block.output is not None:
        assert printed.getvalue() == block.output


def test_pages_are_found_and_fragments_are_few() -> None:
    names = {page.name for page in PAGES}
    assert {"README.md", "index.md", "cli.md", "loop.md"} <= names
    assert len(BLOCKS) >= 20
    fragments = [block.id for block in BLOCKS if not block.run]
    assert len(fragments) <= len(BLOCKS) // 4, fragments


def test_the_not_run_marker_is_recognised(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n<!-- not-run: needs a key -->\n```python\nawait x\n```\n\n"
        "```python\nprint(1)\n```\n",
        encoding="utf-8",
    )
    assert [(block.line, block.code, block.run) for block in blocks_of(page)] == [
        (4, "await x", False),
        (8, "print(1)", True),
    ]


def test_the_output_after_a_block_is_what_it_must_print(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nprint(1)\n```\n\nOutput (two lines):\n\n```text\n1\n2\n```\n\n"
        "```python\nprint(3)\n```\n\nSome prose.\n\n```text\n3\n```\n\n"
        "```python\nprint(4)\n```\n\nOutput:\n\n```sh\n4\n```\n",
        encoding="utf-8",
    )
    assert [(block.code, block.output) for block in blocks_of(page)] == [
        ("print(1)", "1\n2\n"),
        ("print(3)", None),  # the prose does not say it is the output
        ("print(4)", None),  # not a text block
    ]


def test_shown_outputs_are_checked_on_the_pages() -> None:
    shown = {block.id.split(":")[0] for block in BLOCKS if block.output is not None}
    assert {"docs/host.md", "docs/loop.md", "docs/store.md", "docs/tools.md"} <= shown
