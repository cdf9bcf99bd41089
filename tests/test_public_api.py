"""The public surface is explicit, sorted and importable."""

import weakref

import agentloop
import agentloop.tasks
import agentloop.tools


def test_all_is_sorted_and_importable() -> None:
    names = agentloop.__all__

    def order(name: str) -> tuple[int, str]:  # constants, classes, then functions
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert list(names) == sorted(names, key=order)
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(agentloop, name), name


def test_public_classes_have_docstrings() -> None:
    missing = [
        name
        for name in agentloop.__all__
        if isinstance(getattr(agentloop, name), type) and not getattr(agentloop, name).__doc__
    ]
    assert missing == []


def test_public_classes_a_host_keeps_can_be_weakly_referenced() -> None:
    """Slotted for memory, the long-lived public objects still allow weak references
    (a host may keep its drivers or managers in a ``WeakValueDictionary``)."""
    registry = agentloop.ToolRegistry()
    objects = [
        registry,
        agentloop.tools.BasicToolExecutor([registry]),
        agentloop.tasks.AsyncTaskManager(),
        agentloop.tasks.SimpleTaskManager(),
    ]
    for instance in objects:
        assert weakref.ref(instance)() is instance
    assert "__weakref__" in agentloop.LoopDriver.__slots__
