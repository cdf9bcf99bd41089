"""The Python snippet of docs/cli.md runs."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_cli_docs_snippet_runs() -> None:
    snippets = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(snippets) == 1
    namespace: dict[str, object] = {"__name__": "cli_docs"}
    exec(compile(snippets[0], "docs/cli.md snippet 1", "exec"), namespace)
    assert namespace["status"] == 0
