"""The tasks package's public surface (all of it pinned in tests/test_exported_members.py)."""

import agentloop
import agentloop.tasks


def test_the_task_names_come_from_agentloop_tasks_only() -> None:
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
        "TaskResult",
    ):
        assert name in names
        assert not hasattr(agentloop, name)
    assert isinstance(agentloop.tasks.AsyncTaskManager(), agentloop.tasks.TaskManager)
    assert isinstance(
        agentloop.tasks.AsyncTaskManager().handle(), agentloop.tasks.TaskManagerHandle
    )
