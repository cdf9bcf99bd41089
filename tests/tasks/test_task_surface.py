"""The tasks package's public surface."""

import agentloop
import agentloop.tasks


def test_tasks_exports_are_sorted_and_reexported_from_the_root() -> None:
    names = agentloop.tasks.__all__
    assert list(names) == sorted(names)
    for name in (
        "AsyncTaskManager",
        "AsyncTaskManagerHandle",
        "DetachAfter",
        "RouteByAnnotation",
        "RouteByName",
        "TaskRoute",
        "RoutingPolicy",
        "TaskManagerState",
    ):
        assert name in names
        assert getattr(agentloop, name) is getattr(agentloop.tasks, name)
    assert isinstance(agentloop.tasks.AsyncTaskManager(), agentloop.tasks.TaskManager)
    assert isinstance(
        agentloop.tasks.AsyncTaskManager().handle(), agentloop.tasks.TaskManagerHandle
    )
