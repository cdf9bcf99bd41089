"""The Python snippet of docs/serve.md runs as written."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "serve.md"


def test_the_serve_docs_snippet_runs() -> None:
    snippets = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(snippets) == 1
    namespace: dict[str, object] = {"__name__": "serve_docs"}
    exec(compile(snippets[0], "docs/serve.md snippet 1", "exec"), namespace)
    assert '<code class="call-id">call-1</code>' in str(namespace["page"])
    for image in re.findall(r"\]\((img/[a-z]+\.png)\)", DOC.read_text(encoding="utf-8")):
        assert (DOC.parent / image).is_file(), image
