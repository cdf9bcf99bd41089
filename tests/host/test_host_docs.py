"""Every Python snippet of docs/host.md runs, in order, in one namespace."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "host.md"


def test_the_host_docs_snippets_run() -> None:
    snippets = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(snippets) == 6
    namespace: dict[str, object] = {"__name__": "host_docs"}
    for number, snippet in enumerate(snippets, start=1):
        exec(compile(snippet, f"docs/host.md snippet {number}", "exec"), namespace)
    assert "make_agent" in namespace
