"""mkdocs hooks: publish ``examples/`` with the docs so the pages can link to them.

The pages link to the runnable examples as ``../examples/NAME.py`` (right on
GitHub and in an editor). The site gets a copy of each example under
``examples/`` and those links are pointed at the copy, so ``mkdocs build
--strict`` checks them like any other link.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
_LINK = re.compile(r"\]\(\.\./examples/")


def on_files(files: Files, config: Any) -> Files:
    for example in sorted(_EXAMPLES.glob("*.py")):
        files.append(File.generated(config, f"examples/{example.name}", abs_src_path=str(example)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    depth = page.file.src_uri.count("/")
    return _LINK.sub("](" + "../" * depth + "examples/", markdown)
