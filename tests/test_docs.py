"""Every Python code block in the docs runs as it stands (imports included).

Pages are found by glob (``docs/*.md`` and ``README.md``), so a new page is
checked without editing this file. Each ```` ```python ```` block runs alone,
in a fresh namespace, in a subprocess-free ``exec`` (so it must import what it
uses). A block that is deliberately a fragment (it needs an API key, or shows
a few lines of a bigger program) says so on the line before its fence::

    <!-- not-run: needs an API key -->

and is only compiled (top-level ``await`` allowed), not run. ``PENDING`` lists
the fragments in pages this change does not own that still lack that marker;
each is an expected failure, strict, so fixing one (or marking it) turns its
entry into a failure that says to remove it.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import attrs
import pytest
import structlog
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
FENCE = re.compile(r"^```python\s*$")
NOT_RUN = re.compile(r"^<!--\s*not-run\b.*-->\s*$")

# page -> first line of the block: what is missing (fix the page, or mark it not-run)
PENDING = {
    ("host.md", "async def main() -> None:"): "continues the page's first example (make_agent)",
    ("loop.md", "agent = ("): "a fragment with top-level await",
    (
        "loop.md",
        'driver.steer([al.Item.text(al.ItemKind.USER, "stop, use the other file")], label="ana")',
    ): "a fragment: driver is not defined",
    ("store.md", "import anyio"): "a fragment: document is not defined",
    ("store.md", "import io"): "a fragment: ask is not defined",
    ("store.md", "import json"): "continues the page's first example (Item, document)",
}


@attrs.frozen
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    code: str
    run: bool

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def pending(self) -> str | None:
        first = self.code.splitlines()[0] if self.code else ""
        return PENDING.get((self.page.name, first))


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
            found.append(Block(page, index + 1, code, run=not NOT_RUN.match(before.strip())))
            index = end
        index += 1
    return found


BLOCKS = [block for page in PAGES for block in blocks_of(page)]


def params() -> list[object]:
    marked = []
    for block in BLOCKS:
        reason = block.pending if block.run else None
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        marked.append(pytest.param(block, id=block.id, marks=marks))
    return marked


settings.register_profile(
    "docs", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=20
)


@pytest.mark.parametrize("block", params())
def test_code_block_runs(block: Block, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compiled = compile(block.code, block.id, "exec", flags=flags if not block.run else 0)
    if not block.run:
        return  # a marked fragment: it must still be valid Python
    monkeypatch.chdir(tmp_path)  # a snippet that writes files writes them here
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(50))
    previous = settings.default
    settings.load_profile("docs")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compiled, {"__name__": "__main__"})
    finally:
        settings.register_profile("docs-restore", previous)
        settings.load_profile("docs-restore")
        structlog.reset_defaults()


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
