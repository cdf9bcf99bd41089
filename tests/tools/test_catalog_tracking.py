"""An executor's catalog tracking against a model of its documented rules (hypothesis).

Each executor compares every source's listing with the one it saw last: one
event per source whose specs changed by name (added, removed, changed), none
for the same specs listed again (in any order, or as equal new objects), a
source added later starts as seen. The drain before each model call
(``_drain_with_specs``) also returns the specs ``specs()`` gives, or ``None``
when there were events. The model below is the rule written plainly, by name.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.tools
from agentloop.tools import compare_catalogs

_NAMES = ("a", "b", "c")
_TEXTS = ("one", "two")
# Two distinct but equal objects per (name, text): "the same spec as a new object".
_POOL = [al.ToolSpec(name, text) for name in _NAMES for text in _TEXTS for _copy in range(2)]


class ListedSource:
    """A source whose listing the test sets (duplicates and any order allowed)."""

    def __init__(self, name: str, listing: list[al.ToolSpec]) -> None:
        self.name = name
        self.listing = listing

    def specs(self) -> list[al.ToolSpec]:
        return list(self.listing)

    def get(self, name: str) -> Any:
        return None

    def drain_catalog_events(self) -> list[Any]:
        return []


class Model:
    """What the executor should report, kept by name per source."""

    def __init__(self, sources: list[ListedSource]) -> None:
        self.seen: dict[int, dict[str, al.ToolSpec]] = {
            id(source): _by_name(source.listing) for source in sources
        }

    def drain(self, sources: list[ListedSource]) -> list[Any]:
        events = []
        for source in sources:
            now = _by_name(source.listing)
            before = self.seen.setdefault(id(source), now)
            if len(now) == len(before) and all(before.get(n) is s for n, s in now.items()):
                continue
            self.seen[id(source)] = now
            change = compare_catalogs(source.name, before, now)
            if change is not None:
                events.append(change)
        return events


def _by_name(listing: list[al.ToolSpec]) -> dict[str, al.ToolSpec]:
    return {spec.name: spec for spec in listing}


_listing = st.lists(st.sampled_from(_POOL), max_size=4)
_step = st.one_of(
    st.tuples(st.just("list"), st.integers(0, 3), _listing),
    st.tuples(st.just("reorder"), st.integers(0, 3), st.randoms(use_true_random=False)),
    st.tuples(st.just("add source"), _listing),
    st.tuples(st.just("drain"), st.booleans()),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_listing, min_size=1, max_size=3), st.lists(_step, max_size=25))
def test_catalog_events_and_specs_follow_the_documented_rules(
    initial: list[list[al.ToolSpec]], steps: list[Any]
) -> None:
    sources = [ListedSource(f"s{index}", listing) for index, listing in enumerate(initial)]
    executor = al.tools.BasicToolExecutor(sources)
    model = Model(sources)
    for step in steps:
        kind = step[0]
        if kind == "list":
            sources[step[1] % len(sources)].listing = list(step[2])
        elif kind == "reorder":
            step[2].shuffle(sources[step[1] % len(sources)].listing)
        elif kind == "add source":
            sources.append(ListedSource(f"s{len(sources)}", list(step[1])))
            executor.sources.append(sources[-1])
        elif step[1]:  # the drain before a model call: events, else the specs
            events, specs = executor._drain_with_specs()
            expected = model.drain(sources)
            assert list(events) == expected
            assert specs == (None if expected else tuple(executor.specs()))
        else:
            assert executor.drain_catalog_events() == model.drain(sources)
    events, specs = executor._drain_with_specs()
    expected = model.drain(sources)
    assert list(events) == expected
    assert specs == (None if expected else tuple(executor.specs()))
