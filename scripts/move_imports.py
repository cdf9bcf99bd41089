"""Point imports of names that left a package at the package that exports them now.

    python scripts/move_imports.py [FILE ...]
    (default: agentloop/ tests/ docs/ examples/ scripts/ benchmarks/ README.md)

For every ``from agentloop[.pkg] import a, b as c`` whose names are not all in
that package's ``__all__`` any more, the names are regrouped by their home (the
public package that exports them now; the root first) into one import each.
``al.Name`` / ``agentloop.Name`` for a name that left the root becomes
``al.pkg.Name``, and ``import agentloop.pkg`` is added after ``import agentloop``.
Run ``ruff check --fix`` and ``ruff format`` afterwards (import order).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from pathlib import Path

import agentloop

REPO = Path(__file__).resolve().parent.parent
PACKAGES = sorted(
    module.name
    for module in pkgutil.walk_packages(agentloop.__path__, "agentloop.")
    if module.ispkg and not any(part.startswith("_") for part in module.name.split("."))
)
EXPORTS = {name: set(getattr(importlib.import_module(name), "__all__", ())) for name in PACKAGES}
EXPORTS["agentloop"] = set(agentloop.__all__)
MOVED = {"StreamAccumulator": "agentloop.model", "parse_tool_arguments": "agentloop.model"}


def home(name: str) -> str | None:
    if name in EXPORTS["agentloop"]:
        return "agentloop"
    if name in MOVED:
        return MOVED[name]
    owners = [package for package, names in EXPORTS.items() if name in names]
    if not owners:
        return None
    value = getattr(importlib.import_module(owners[0]), name)
    defined = getattr(value, "__module__", "") or ""
    for package in owners:  # the package that defines it, else the shortest name
        if defined.startswith(package + "."):
            return package
    return sorted(owners, key=lambda p: (p.count("."), p))[0]


IMPORT = re.compile(
    r"^(?P<indent>[ \t]*)from (?P<module>agentloop(?:\.[a-z_]+)*) import "
    r"(?:\((?P<paren>[^)]*)\)|(?P<line>[^\n(]*))",
    re.MULTILINE,
)


def rewrite_imports(text: str) -> str:
    def fix(match: re.Match[str]) -> str:
        module, indent = match["module"], match["indent"]
        if module not in EXPORTS:
            return match[0]
        raw = match["paren"] if match["paren"] is not None else match["line"]
        entries = [re.sub(r"#.*", "", part).strip() for part in raw.replace("\\\n", "").split(",")]
        entries = [entry for entry in entries if entry]
        groups: dict[str, list[str]] = {}
        for entry in entries:
            name = entry.split(" as ")[0].strip()
            target = module if name in EXPORTS[module] or name.startswith("_") else home(name)
            if target is None:
                target = module
            groups.setdefault(target, []).append(entry)
        if list(groups) == [module]:
            return match[0]
        lines = []
        for target, names in groups.items():
            joined = ", ".join(names)
            line = f"{indent}from {target} import {joined}"
            if len(line) > 99:
                inner = "".join(f"{indent}    {name},\n" for name in names)
                line = f"{indent}from {target} import (\n{inner}{indent})"
            lines.append(line)
        return "\n".join(lines)

    return IMPORT.sub(fix, text)


def rewrite_attributes(text: str) -> str:
    aliases = set(re.findall(r"^\s*import agentloop as (\w+)", text, re.MULTILINE))
    if re.search(r"^\s*import agentloop\s*$", text, re.MULTILINE):
        aliases.add("agentloop")
    needed: set[str] = set()
    for alias in aliases:

        def fix(match: re.Match[str], alias: str = alias) -> str:
            name = match[1]
            if (
                name in EXPORTS["agentloop"]
                or name.startswith("_")
                or name in {p.rsplit(".", 1)[1] for p in PACKAGES}
            ):
                return match[0]
            target = home(name)
            if target is None or target == "agentloop":
                return match[0]
            needed.add(target)
            return f"{alias}.{target.removeprefix('agentloop.')}.{name}"

        text = re.sub(rf"(?<![\w.]){re.escape(alias)}\.([A-Za-z_]\w*)\b", fix, text)
    for target in sorted(needed):
        if re.search(rf"^\s*import {re.escape(target)}\s*$", text, re.MULTILINE):
            continue
        text = re.sub(
            r"^(?P<indent>[ \t]*)import agentloop( as \w+)?[ \t]*$",
            lambda m, target=target: f"{m[0]}\n{m['indent']}import {target}",
            text,
            count=1,
            flags=re.MULTILINE,
        )
    return text


def main() -> None:
    paths = [Path(arg) for arg in sys.argv[1:]]
    if not paths:
        paths = [REPO / "README.md"]
        for root in ("tests", "docs", "examples", "scripts", "benchmarks", "agentloop"):
            paths += [p for p in (REPO / root).rglob("*") if p.suffix in {".py", ".md"}]
    for path in sorted(paths):
        if path.name in {"CHANGELOG.md", "renames.md", "move_imports.py"}:
            continue
        text = path.read_text()
        new = rewrite_attributes(rewrite_imports(text))
        if new != text:
            path.write_text(new)
            print(path.relative_to(REPO))


if __name__ == "__main__":
    main()
