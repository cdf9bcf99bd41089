"""Every Python snippet of docs/store.md runs, in order, in one namespace."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "store.md"


def test_the_store_docs_snippets_run() -> None:
    snippets = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(snippets) == 16
    namespace: dict[str, object] = {"__name__": "store_docs"}
    for number, snippet in enumerate(snippets, start=1):
        exec(compile(snippet, f"docs/store.md snippet {number}", "exec"), namespace)
    assert "TestSqliteStore" in namespace
