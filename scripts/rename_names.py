"""Rename public names across the tree, whole words only, all at once.

    python scripts/rename_names.py OLD=NEW [OLD=NEW ...] [--only GLOB ...] [--code-only]

Every ``OLD`` (a whole identifier: ``\\bOLD\\b``) in the Python, Markdown and
TOML/YAML files under ``agentloop/ tests/ docs/ examples/ benchmarks/
scripts/`` and in ``README.md`` becomes ``NEW``. The pairs are applied in one
pass, so ``A=B B=A`` swaps. ``--only`` limits the run to files matching one
of the globs; ``--code-only`` rewrites Markdown only inside backticks and
code blocks (for a name that is also an English word). ``CHANGELOG.md`` and
``docs/renames.md`` (history) are never touched. Run it again after a merge
to rename what the merge brought in.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from pathlib import Path

ROOTS = ("agentloop", "tests", "docs", "examples", "benchmarks", "scripts")
SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".pyi", ".txt", ".html"}
_FENCE = re.compile(r"(```.*?```|`[^`\n]+`)", re.DOTALL)


def files(repo: Path, only: list[str]) -> list[Path]:
    found = [repo / "README.md"]
    for root in ROOTS:
        found += [p for p in (repo / root).rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    found = [p for p in found if p.name not in ("CHANGELOG.md", "renames.md", "rename_names.py")]
    if only:
        found = [
            p for p in found if any(fnmatch.fnmatch(str(p.relative_to(repo)), g) for g in only)
        ]
    return sorted(found)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("pairs", nargs="+")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--code-only", action="store_true")
    args = parser.parse_args()
    mapping = dict(pair.split("=", 1) for pair in args.pairs)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, mapping)) + r")\b")

    def swap(text: str) -> str:
        return pattern.sub(lambda m: mapping[m.group(1)], text)

    repo = Path(__file__).resolve().parent.parent
    changed = 0
    for path in files(repo, args.only):
        text = path.read_text()
        if path.suffix == ".md" and args.code_only:
            new = _FENCE.sub(lambda m: swap(m.group(0)), text)
        else:
            new = swap(text)
        if new != text:
            path.write_text(new)
            changed += 1
            print(path.relative_to(repo))
    print(f"{changed} files changed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
