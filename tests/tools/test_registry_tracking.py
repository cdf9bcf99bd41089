"""A registry's catalog events against a model of its documented rules (hypothesis).

``with_tool`` is construction and is never reported; ``add``, ``remove`` and a
tool whose ``current_spec()`` changes or hides are reported by the next
``drain_catalog_events()`` as one event with the net change by name since the
last drain. The model below is the rule written plainly, with dictionaries.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.tools
from agentloop.tools import compare_catalogs

_NAMES = ("a", "b", "c")
_TEXTS = (None, "one", "two")  # None: the tool hides


class Live:
    """A tool whose advertised spec the test sets (``fresh``: an equal new object per ask)."""

    def __init__(self, name: str, text: str | None, fresh: bool) -> None:
        self.spec = al.ToolSpec(name, "static")
        self.fresh = fresh
        self.set(text)

    def set(self, text: str | None) -> None:
        self.text = text
        self.live = None if text is None else al.ToolSpec(self.spec.name, text)

    def current_spec(self) -> al.ToolSpec | None:
        if self.live is None or not self.fresh:
            return self.live
        return al.ToolSpec(self.live.name, self.live.description)

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return "ok"


class Model:
    def __init__(self) -> None:
        self.tools: dict[str, Live] = {}
        self.reported: dict[str, al.ToolSpec] = {}

    def visible(self) -> dict[str, al.ToolSpec]:
        now = {}
        for name in sorted(self.tools):
            spec = self.tools[name].current_spec()
            if spec is not None:
                now[spec.name] = spec
        return now

    def drain(self, source: str) -> list[Any]:
        now = self.visible()
        if len(now) == len(self.reported) and all(
            self.reported.get(name) == spec for name, spec in now.items()
        ):
            self.reported = now
            return []
        change = compare_catalogs(source, self.reported, now)
        self.reported = now
        return [] if change is None else [change]


_NEW_TOOL = (st.sampled_from(_NAMES), st.sampled_from(_TEXTS), st.booleans())
OPERATION = st.one_of(
    st.tuples(st.just("with_tool"), *_NEW_TOOL),
    st.tuples(st.just("add"), *_NEW_TOOL),
    st.tuples(st.just("remove"), st.sampled_from(_NAMES)),
    st.tuples(st.just("set"), st.sampled_from(_NAMES), st.sampled_from(_TEXTS)),
    st.tuples(st.just("drain")),
)


@settings(max_examples=300, deadline=None)
@given(operations=st.lists(OPERATION, max_size=25))
def test_a_registry_reports_what_the_model_reports(operations: list[tuple[Any, ...]]) -> None:
    registry = al.ToolRegistry("main")
    model = Model()
    for operation in operations:
        kind = operation[0]
        if kind in ("with_tool", "add"):
            _, name, text, fresh = operation
            tool = Live(name, text, fresh)
            model.tools[name] = tool
            if kind == "with_tool":
                registry.with_tool(tool)
                spec = tool.current_spec()
                if spec is None:
                    model.reported.pop(name, None)
                else:
                    model.reported[name] = spec
            else:
                registry.add(tool)
        elif kind == "remove":
            had = model.tools.pop(operation[1], None) is not None
            assert registry.remove(operation[1]) is had
        elif kind == "set":
            if operation[1] in model.tools:
                model.tools[operation[1]].set(operation[2])
        else:
            assert registry.drain_catalog_events() == model.drain("main")
        assert registry.specs() == list(model.visible().values())
    assert registry.drain_catalog_events() == model.drain("main")
    assert registry.drain_catalog_events() == []
