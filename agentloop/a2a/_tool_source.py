"""``A2AToolSource``: a remote A2A agent (or each of its skills) as tools of ours.

No a2a-sdk import at module level (``agentloop.a2a`` imports without the
extra); entering the source imports the client side.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, overload

from .._extras import require_extra
from .._log import get_logger
from ..core._tool_spec import ToolAnnotations, ToolSpec
from ..tools._registry import ToolCatalogEvent
from ..tools._tool import ToolContext, ToolOutput, ToolRequest
from ._errors import RemoteAgentConnectionError

if TYPE_CHECKING:
    import httpx
    from a2a.client import Client
    from a2a.types import AgentCard

    from ._remote_call import CallLimits

__all__ = ["A2ATool", "A2AToolSource"]

log = get_logger()

A2A_AGENT_KEY = "a2a.agent"
A2A_SKILL_KEY = "a2a.skill"

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def _tool_name(*words: str) -> str:
    """``a2a__<words>`` with every character a model API refuses replaced (<= 64 chars)."""
    cleaned = [_UNSAFE.sub("_", word).strip("_") or "agent" for word in words]
    return "__".join(["a2a", *cleaned])[:64]


def _input_schema(what: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "message": {"type": "string", "minLength": 1, "description": f"What to ask {what}."},
            "data": {"type": "object", "description": "Structured data sent with the message."},
        },
        "required": ["message"],
        "additionalProperties": False,
    }


def _positive(name: str, value: float) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"A2AToolSource {name} must be a positive number, got {value!r}")
    return float(value)


def _count(name: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"A2AToolSource {name} must be a positive int, got {value!r}")
    return value


class A2ATool:
    """A remote A2A agent (or one of its skills) as a tool: input ``{message, data?}``.

    Its calls may ask the host (``asks_host``): a remote task waiting in
    ``input-required`` becomes a ``CallQuestion`` (see :class:`A2AToolSource`).
    """

    asks_host = True

    def __init__(self, source: A2AToolSource, spec: ToolSpec, skill: str | None) -> None:
        self.source = source
        self.spec = spec
        self.skill = skill

    def __repr__(self) -> str:
        return f"<A2ATool {self.spec.name!r} of {self.source.url!r}>"

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> ToolOutput:
        """Send the message as a remote task and return its result."""
        return await self.source.call(self, request, ctx)

    async def reconcile(self, request: ToolRequest, ctx: ToolContext) -> ToolOutput | None:
        """Settle a call left in doubt by a restart: its remote task's result when the
        task ended completed, failed or rejected; else ``None`` (still in doubt)."""
        return await self.source.call(self, request, ctx, reconcile=True)


class A2AToolSource:
    """The agent at ``url`` (an A2A 1.0 server) as a tool, or each of its skills as one.

    Use it as an async context manager around the sessions that use it::

        async with A2AToolSource("https://agents.example/deployer",
                                 headers={"authorization": "Bearer ..."}) as deployer:
            agent = Agent.builder().model(model).add_tool_source(deployer)...

    Entering reads the agent card (``/.well-known/agent-card.json`` under ``url``,
    within ``connect_timeout``) and offers one tool ``a2a__<name>`` (``name``
    defaults to the card's name), or with ``skills=True`` one tool
    ``a2a__<name>__<skill id>`` per skill of the card (the skill's id goes in the
    message metadata as ``skill``). The tool's input is ``{"message": str,
    "data"?: object}``; its result is the remote task's artifacts (all text: one
    string). Calls stream (``SendStreamingMessage``) when the card says the agent
    streams and ``streaming`` is not ``False``, else use ``SendMessage`` and poll
    ``GetTask`` while the task works.

    A task waiting in ``input-required`` is asked of the host as ``CallQuestion``
    steps: kind ``"a2a.approval"`` per remote call waiting for approval (answer
    ``{"approved", "editedArgs"?, "reason"?}``), the question of a remote call
    (an agentloop server's ``{"questions": [...]}``) with its own kind and schema,
    else ``"a2a.input"`` (answer ``{"text", "data"?}``); the answers continue the
    same remote task. A declined or cancelled question cancels the remote task,
    except a remote call's question, to which the decline or cancel is sent. The
    agent needs an entered ``AsyncTaskManager`` so the call can ask. Each call's
    remote context is its idempotency key: a question survives a restart (the
    restored driver asks it again and the answer continues the same task), and a
    call left in doubt is settled by its task's result when that ended
    (``reconcile``). See docs/a2a.md.

    Bounds: ``call_timeout`` seconds of remote work per call (time waiting for the
    host not counted), ``max_response_bytes`` per HTTP response (a whole event
    stream included), ``max_events`` events and ``max_input_rounds`` input rounds
    per call. The card must send calls to its own origin unless
    ``allow_other_origins`` (the ``headers``, your credentials, go with every
    request). ``http_transport`` replaces the HTTP transport (tests, proxies).
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        skills: bool = False,
        streaming: bool | None = None,
        connect_timeout: float = 10.0,
        call_timeout: float = 300.0,
        poll_interval: float = 0.5,
        max_response_bytes: int = 8 * 1024 * 1024,
        max_events: int = 10_000,
        max_input_rounds: int = 10,
        allow_other_origins: bool = False,
        http_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        require_extra("a2a", "agentloop.a2a.A2AToolSource", "a2a", "httpx")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"A2AToolSource url must be an http(s) URL, got {url!r}")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"A2AToolSource name must be a non-empty str, got {name!r}")
        self.url = url.rstrip("/")
        self._name = name
        self._headers = dict(headers or {})
        self.skills = bool(skills)
        self._streaming = streaming
        self.connect_timeout = _positive("connect_timeout", connect_timeout)
        self.call_timeout = _positive("call_timeout", call_timeout)
        self.poll_interval = _positive("poll_interval", poll_interval)
        self.max_response_bytes = _count("max_response_bytes", max_response_bytes)
        self.max_events = _count("max_events", max_events)
        self.max_input_rounds = _count("max_input_rounds", max_input_rounds)
        self.allow_other_origins = bool(allow_other_origins)
        self._transport = http_transport
        self.name = f"a2a:{self.url}"
        self.card: AgentCard | None = None
        """The agent card read on entering (a2a-sdk's ``AgentCard``)."""
        self._http: httpx.AsyncClient | None = None
        self._client: Client | None = None
        self._limits: CallLimits | None = None
        self._tools: dict[str, A2ATool] = {}

    def __repr__(self) -> str:
        state = "open" if self._client is not None else "not open"
        return f"<A2AToolSource {self.url!r} ({state}): {len(self._tools)} tools>"

    @property
    def streaming(self) -> bool:
        """Whether calls stream (the card says so and ``streaming`` is not ``False``)."""
        card = self.card
        return card is not None and card.capabilities.streaming and self._streaming is not False

    # -- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> A2AToolSource:
        if self._http is not None:
            raise RemoteAgentConnectionError(
                f"A2A source {self.url!r} is already open; use one `async with` per source",
                agent=self.url,
            )
        import httpx

        from ._remote_call import CallLimits
        from ._remote_http import BoundedTransport, open_client

        inner = self._transport if self._transport is not None else httpx.AsyncHTTPTransport()
        self._http = httpx.AsyncClient(
            transport=BoundedTransport(inner, self.max_response_bytes, self.url),
            headers=self._headers,
            timeout=httpx.Timeout(self.call_timeout, connect=self.connect_timeout),
        )
        try:
            self.card, self._client = await open_client(
                self.url,
                self._http,
                streaming=self._streaming is not False,
                card_timeout=self.connect_timeout,
                other_origins=self.allow_other_origins,
            )
        except BaseException:
            await self._close()
            raise
        self._limits = CallLimits(
            call_timeout=self.call_timeout,
            poll_interval=self.poll_interval,
            max_events=self.max_events,
            max_rounds=self.max_input_rounds,
            streaming=self.streaming,
        )
        self._tools = self._offered(self.card)
        log.info("a2a agent connected", agent=self.url, tools=len(self._tools))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._close()

    async def _close(self) -> None:
        http, self._http, self._client = self._http, None, None
        if http is not None:
            await http.aclose()

    def _offered(self, card: AgentCard) -> dict[str, A2ATool]:
        name = self._name or card.name
        annotations = ToolAnnotations(open_world=True)
        if not self.skills or not card.skills:
            described = card.description or f"The remote A2A agent {card.name}."
            spec = ToolSpec(
                _tool_name(name),
                described,
                _input_schema(f"the agent {card.name}"),
                annotations=annotations,
                metadata={A2A_AGENT_KEY: self.url},
            )
            return {spec.name: A2ATool(self, spec, None)}
        tools: dict[str, A2ATool] = {}
        for skill in card.skills:
            spec = ToolSpec(
                _tool_name(name, skill.id),
                skill.description or skill.name or skill.id,
                _input_schema(f"the skill {skill.name or skill.id} of {card.name}"),
                annotations=annotations,
                metadata={A2A_AGENT_KEY: self.url, A2A_SKILL_KEY: skill.id},
            )
            tools.setdefault(spec.name, A2ATool(self, spec, skill.id))
        return tools

    # -- the ToolSource protocol ---------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        """The specs of the offered tools, sorted by name (none before entering)."""
        return [self._tools[name].spec for name in sorted(self._tools)]

    def get(self, name: str) -> A2ATool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def drain_catalog_events(self) -> list[ToolCatalogEvent]:
        """None: the card is read once, on entering."""
        return []

    # -- calls -------------------------------------------------------------------------

    @overload
    async def call(self, tool: A2ATool, request: ToolRequest, ctx: ToolContext) -> ToolOutput: ...

    @overload
    async def call(
        self, tool: A2ATool, request: ToolRequest, ctx: ToolContext, *, reconcile: bool
    ) -> ToolOutput | None: ...

    async def call(
        self, tool: A2ATool, request: ToolRequest, ctx: ToolContext, *, reconcile: bool = False
    ) -> ToolOutput | None:
        """One call of ``tool`` (see the class docstring); raises
        :class:`~agentloop.a2a.RemoteAgentError` when the agent cannot serve it.
        ``reconcile``: only look for the result of the call's earlier remote task."""
        from ._remote_call import RemoteCall

        client, limits = self._client, self._limits
        if client is None or limits is None:
            raise RemoteAgentConnectionError(
                f"A2A source {self.url!r} is not open; use `async with A2AToolSource(...)` "
                "around the sessions that use it",
                agent=self.url,
            )
        arguments = request.input if isinstance(request.input, dict) else {}
        call = RemoteCall(
            client,
            self.url,
            limits,
            tool=tool.spec.name,
            arguments=arguments,
            ctx=ctx,
            skill=tool.skill,
        )
        return await call.reconcile() if reconcile else await call.run()
