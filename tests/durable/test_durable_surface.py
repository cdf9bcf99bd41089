"""agentloop.durable.dbos exports exactly its sorted ``__all__``."""

from __future__ import annotations

import types

import agentloop.durable
import agentloop.durable.dbos as durable_dbos


def test_the_dbos_surface_is_deliberate() -> None:
    names = [
        name
        for name, value in vars(durable_dbos).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    ]

    def order(name: str) -> tuple[int, str]:  # constants, classes, then functions
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert durable_dbos.__all__ == sorted(durable_dbos.__all__, key=order)
    assert set(durable_dbos.__all__) == set(names)
    assert agentloop.durable.__all__ == []


def test_every_public_name_has_a_docstring() -> None:
    for name in durable_dbos.__all__:
        value = getattr(durable_dbos, name)
        if isinstance(value, type) or callable(value):
            assert value.__doc__, name
