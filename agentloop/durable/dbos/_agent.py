"""The agents DBOS workflows run (looked up by name), worker config, run ids."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
from dbos import DBOSConfig

from ...core._errors import InvalidInputError
from ...host._run import TurnRetryPolicy
from ...loop._agent import Agent
from ...loop._agent_tool import AgentTool
from ...loop._session_store import SessionStore
from ...loop._steps import ApprovalRequest
from ...tasks._simple import SimpleTaskManager
from ._results import DurableError
from ._steps import DurableModel, DurableToolSource

__all__ = [
    "DurableAgent",
    "dbos_config",
    "registered_agent",
    "run_number",
    "run_workflow_id",
    "runs_prefix",
]

_AGENTS: dict[str, DurableAgent] = {}
_RUN_SEPARATOR = "#"


class DurableAgent:
    """An :class:`Agent` registered under ``name`` so DBOS workflows can run it.

    Construct one in every worker process before ``DBOS.launch()`` (recovery
    looks the agent up by name). ``claims`` is a ``SessionStore`` in which
    non-idempotent tools are claimed inside their step (the in-doubt rule);
    ``approval_timeout`` (seconds) is how long an approval waits before it
    expires, denied; ``retry`` retries a turn whose model call failed with a
    kind it lists, after a durable sleep (none by default: the turn ends
    ``ERROR``). The agent's own ``store`` and ``input`` are not used: DBOS
    records the session, and input comes with each run. A custom
    ``tool_executor`` is refused (only tool sources can be wrapped), and so
    is a task manager other than ``SimpleTaskManager`` (tool calls must run
    in order, one step each). A tool that runs a child agent
    (``Agent.as_tool``) is no step itself: the child runs inline in the
    workflow, its model and tool calls DBOS steps (claimed in ``claims``
    under the child's session id), its approvals waited for like the
    agent's own; the same refusals apply to every child agent.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        name: str,
        claims: SessionStore | None = None,
        approval_timeout: float = 86_400.0,
        retry: TurnRetryPolicy | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise InvalidInputError(f"DurableAgent expects an Agent, got {type(agent).__name__}")
        _check_tree(agent, "")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"DurableAgent name must be a non-empty str, got {name!r}")
        if not isinstance(approval_timeout, (int, float)) or not approval_timeout > 0:
            raise InvalidInputError(
                f"DurableAgent approval_timeout must be positive seconds, got {approval_timeout!r}"
            )
        if retry is not None and not isinstance(retry, TurnRetryPolicy):
            raise InvalidInputError(
                f"DurableAgent retry expects a TurnRetryPolicy or None, got {type(retry).__name__}"
            )
        self.agent = agent
        self.name = name
        self.claims = claims
        self.approval_timeout = float(approval_timeout)
        self.retry = retry
        _AGENTS[name] = self

    def wrapped(
        self, child_approval: Callable[[ApprovalRequest], Awaitable[Any]] | None = None
    ) -> Agent:
        """The agent with its model and tool sources wrapped as DBOS steps; so are those of
        the child agents its tools run (``Agent.as_tool``), each child running inline in
        the workflow, its approvals answered by ``child_approval``."""
        return _wrap(self.agent, self.claims, child_approval)


def _wrap(
    agent: Agent,
    claims: SessionStore | None,
    child_approval: Callable[[ApprovalRequest], Awaitable[Any]] | None,
) -> Agent:
    def child(tool: AgentTool) -> AgentTool:
        durable = copy.copy(tool)
        durable.agent = _wrap(tool.agent, claims, child_approval)
        durable.ask_approval = child_approval
        return durable

    return attrs.evolve(
        agent,
        model=DurableModel(agent.model),
        tool_sources=tuple(DurableToolSource(s, claims, child) for s in agent.tool_sources),
        store=None,
        input=(),
    )


def _check_tree(agent: Agent, path: str) -> None:
    """Raise for what cannot run as DBOS steps, in ``agent`` or a child agent its tools run
    (``path``: the tools that lead to it, for the message)."""
    where = "" if not path else f" in the child agent its tool {path!r} runs"
    if agent.tool_executor is not None:
        raise InvalidInputError(
            f"DurableAgent cannot wrap an agent with a custom tool_executor{where}: its "
            "tools would not run as DBOS steps; give the tools as tool sources instead"
        )
    if agent.task_manager is not None and not isinstance(agent.task_manager, SimpleTaskManager):
        raise InvalidInputError(
            "DurableAgent cannot wrap an agent with a custom task_manager "
            f"({type(agent.task_manager).__name__}){where}: concurrent tool calls would make the "
            "order of DBOS steps depend on timing; leave the default SimpleTaskManager"
        )
    for source in agent.tool_sources:
        for spec in source.specs():
            tool = source.get(spec.name)
            if isinstance(tool, AgentTool):
                _check_tree(tool.agent, spec.name if not path else f"{path} > {spec.name}")


def registered_agent(name: str, workflow_id: str | None) -> DurableAgent:
    """The ``DurableAgent`` called ``name`` in this process, or ``DurableError``."""
    durable = _AGENTS.get(name)
    if durable is None:
        raise DurableError(
            f"cannot run workflow {workflow_id}: no DurableAgent named {name!r} in this "
            f"process (registered: {sorted(_AGENTS)}); construct it before DBOS.launch()"
        )
    return durable


def dbos_config(
    name: str, system_database_url: str, *, executor_id: str, application_version: str
) -> DBOSConfig:
    """A DBOS config for a worker: ``executor_id`` and ``application_version`` are required.

    Every live worker process needs its own ``executor_id`` (two with the
    default id take each other's workflows and run steps twice), and a
    restarted worker must reuse its id to recover its workflows. Pin
    ``application_version``: the default is a hash of the code, and
    recovery only picks up workflows of the same version.
    """
    required = (("executor_id", executor_id), ("application_version", application_version))
    for label, value in required:
        if not isinstance(value, str) or not value:
            raise InvalidInputError(f"dbos_config: {label} must be a non-empty str, got {value!r}")
    return {
        "name": name,
        "system_database_url": system_database_url,
        "executor_id": executor_id,
        "application_version": application_version,
    }


def run_workflow_id(session_id: str, run: int) -> str:
    """The workflow id of run number ``run`` (from 1) of ``session_id``: ``<session_id>#<run>``."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInputError(f"session_id must be a non-empty str, got {session_id!r}")
    if isinstance(run, bool) or not isinstance(run, int) or run < 1:
        raise InvalidInputError(f"run must be an int of at least 1, got {run!r}")
    return f"{session_id}{_RUN_SEPARATOR}{run}"


def runs_prefix(session_id: str) -> str:
    """The prefix every run's workflow id of ``session_id`` starts with."""
    return f"{session_id}{_RUN_SEPARATOR}"


def run_number(session_id: str, workflow_id: str) -> int | None:
    """The run number ``workflow_id`` has in ``session_id``, or ``None`` when it is no run of it."""
    prefix = runs_prefix(session_id)
    if not workflow_id.startswith(prefix):
        return None
    number = workflow_id[len(prefix) :]
    if not number.isdigit() or number.startswith("0") or not number.isascii():
        return None
    return int(number)
