"""Sort every package's ``__all__`` the house way: constants, classes, then functions.

python scripts/sort_all.py            # rewrites agentloop/**/__init__.py in place
"""

from __future__ import annotations

import ast
from pathlib import Path


def order(name: str) -> tuple[int, str]:
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def main() -> None:
    for path in sorted(Path(__file__).resolve().parent.parent.glob("agentloop/**/__init__.py")):
        text = path.read_text()
        for node in ast.parse(text).body:
            if not (
                isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__"
            ):
                continue
            names = [element.value for element in node.value.elts]  # type: ignore[attr-defined]
            if names == sorted(names, key=order):
                continue
            lines = text.splitlines(keepends=True)
            body = "".join(f'    "{name}",\n' for name in sorted(names, key=order))
            new = [
                *lines[: node.lineno - 1],
                "__all__ = [\n",
                body,
                "]\n",
                *lines[node.end_lineno :],
            ]
            path.write_text("".join(new))
            print(path)


if __name__ == "__main__":
    main()
