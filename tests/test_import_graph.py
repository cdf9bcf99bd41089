"""No import circle anywhere in the library: every ``import`` of an agentloop module, at
module level, inside a function or under ``TYPE_CHECKING``, read from the source."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from source_ast import parse_source

ROOT = Path(__file__).resolve().parents[1] / "agentloop"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, known: set[str]) -> Iterator[str]:
    """The agentloop modules ``path`` imports (a package's ``__init__`` counts as one)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(parse_source(path)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            if target in known and target != name:
                yield target


def graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in ROOT.rglob("*.py")}
    known = set(paths)
    return {name: set(imported(path, known)) for name, path in paths.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def without_packages(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph of implementation modules: a package ``__init__`` re-exports its own
    modules and is imported by others, which is no circle of implementation."""
    packages = {name for name in edges if _is_package(name)}
    return {
        name: {target for target in targets if target not in packages}
        for name, targets in edges.items()
        if name not in packages
    }


def _is_package(name: str) -> bool:
    return (ROOT.parent / Path(*name.split(".")) / "__init__.py").exists()


def test_the_library_has_no_import_circle() -> None:
    assert circles(without_packages(graph())) == []


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_the_check_finds_circles(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert circles(edges) == expected


def test_the_graph_sees_lazy_and_type_checking_imports() -> None:
    edges = graph()
    # A function-level import and a TYPE_CHECKING import, both read.
    assert "agentloop.testing._strategies" in edges["agentloop.testing._mutator_checks"]
    assert "agentloop.store._postgres" in edges["agentloop.cli._store"]


LOOP_FLOORS: dict[str, int] = {
    # 0: values (steps, state, events, actions, mutators, the results the core writes,
    # response admission, the store protocol and its history, the observer layer's interface)
    **dict.fromkeys(
        [
            "_actions",
            "_events",
            "_mutators",
            "_observer",
            "_response_admission",
            "_call_results",
            "_session_history",
            "_child_usage",
            "_session_store",
            "_state",
            "_steps",
            "_stored_answers",
        ],
        0,
    ),
    # 1: the codec (one checkpoint module with its checks, the converter)
    **dict.fromkeys(["_checkpoint", "_checkpoint_checks", "_checkpoint_memo", "_converter"], 1),
    # 2: the core that decides
    **dict.fromkeys(
        [
            "_core",
            "_machine",
            "_nested",
            "_output",
            "_rounds",
            "_host_calls",
            "_questions",
            "_in_doubt",
        ],
        2,
    ),
    # 3: the effects and the durable layer
    **dict.fromkeys(["_driver_parts", "_model_io", "_tool_io", "_persistence", "_sampling"], 3),
    # 4: the step loop and the driver; 5: the agent (and an agent as a tool) and what
    # hosts do with a driver
    "_step_runner": 4,
    "_durable_steps": 4,
    "_driver": 4,
    "_driver_inputs": 4,
    "_agent": 5,
    "_agent_tool": 5,
    "_child_checkpoint": 5,
    "_release": 5,
}
"""Each ``agentloop.loop`` module's floor: a module imports only from its floor or below."""


def test_the_loop_imports_go_down_its_floors() -> None:
    edges = graph()
    loop = {name for name in edges if name.startswith("agentloop.loop.")}
    assert {name.rpartition(".")[2] for name in loop} == set(LOOP_FLOORS)
    upward = [
        f"{name} (floor {LOOP_FLOORS[name.rpartition('.')[2]]}) imports {target} "
        f"(floor {LOOP_FLOORS[target.rpartition('.')[2]]})"
        for name in sorted(loop)
        for target in sorted(edges[name] & loop)
        if LOOP_FLOORS[target.rpartition(".")[2]] > LOOP_FLOORS[name.rpartition(".")[2]]
    ]
    assert upward == []
