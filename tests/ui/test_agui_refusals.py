"""What the AG-UI endpoint refuses, and that a refusal changes nothing: a bad resume
payload, an unknown or repeated interrupt id, new input on a thread with an open
interrupt, and two resumes of one interrupt racing (one wins). In process (the app is
called through httpx's ASGI transport), on both anyio backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import attrs
import httpx
import pytest
from agui_support import (
    TOKEN,
    Deploy,
    assert_conformant,
    build_agent,
    post_run,
    resume,
    run_input,
    types,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop.serve import MemoryAuditLog
from agentloop.store import MemorySessionStore
from agentloop.ui import AguiConfig, create_agui_app

pytestmark = pytest.mark.anyio

CONFIG = AguiConfig(token=TOKEN)
OPEN = "approval:call-1"


@attrs.define
class Parked:
    """A thread ``t1`` parked on the approval of ``call-1``, and a client of its endpoint."""

    store: MemorySessionStore
    tool: Deploy
    audit: MemoryAuditLog
    client: httpx.AsyncClient

    async def fingerprint(self) -> Any:
        stored = await self.store.load("t1")
        assert stored is not None
        return (
            stored.version,
            stored.checkpoint,
            dict(stored.approvals),
            await self.audit.entries(),
        )


async def parked_thread() -> AsyncIterator[Parked]:
    store, tool, audit = MemorySessionStore(), Deploy(), MemoryAuditLog()
    app = create_agui_app(build_agent(store, tool), config=CONFIG, audit=audit)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        events = await post_run(client, run_input("t1", "r1", "deploy api"))
        assert events[-1]["outcome"]["interrupts"][0]["id"] == OPEN
        yield Parked(store, tool, audit, client)


@pytest.fixture
async def parked() -> AsyncIterator[Parked]:
    async for thread in parked_thread():
        yield thread


def refused(events: list[dict[str, Any]], code: str) -> str:
    """The message of a run that was refused with ``code``: RUN_STARTED, then RUN_ERROR."""
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[1]["code"] == code
    assert_conformant(events)
    return str(events[1]["message"])


async def test_an_unknown_interrupt_id_is_refused_and_changes_nothing(parked: Parked) -> None:
    before = await parked.fingerprint()
    body = run_input("t1", "r2", resume=resume(("approval:call-9", "resolved", {"approved": True})))
    message = refused(await post_run(parked.client, body), "unknown_interrupt")
    assert message == (
        "resume[0] answers interrupt 'approval:call-9', which is not open on this thread "
        "(open interrupts: approval:call-1); it may have been answered already. "
        "Nothing was recorded"
    )
    assert await parked.fingerprint() == before
    assert parked.tool.ran == []


async def test_new_input_on_a_thread_with_an_open_interrupt_is_refused(parked: Parked) -> None:
    before = await parked.fingerprint()
    message = refused(
        await post_run(parked.client, run_input("t1", "r2", "deploy web")), "interrupt_open"
    )
    assert message == (
        "thread 't1' has open interrupts (approval:call-1); new messages cannot be sent "
        "until they are answered: send a run with resume entries for them and no new "
        "messages. Nothing was changed"
    )
    with_resume = run_input(
        "t1", "r3", "deploy web", resume=resume((OPEN, "resolved", {"approved": True}))
    )
    refused(await post_run(parked.client, with_resume), "interrupt_open")
    message = refused(await post_run(parked.client, run_input("t1", "r4")), "interrupt_open")
    assert message == (
        "thread 't1' has open interrupts (approval:call-1); answer them with "
        "RunAgentInput.resume. Nothing was changed"
    )
    assert await parked.fingerprint() == before


async def test_an_interrupt_answered_twice_in_one_run_is_refused(parked: Parked) -> None:
    before = await parked.fingerprint()
    twice = resume((OPEN, "resolved", {"approved": True}), (OPEN, "cancelled", None))
    refused(
        await post_run(parked.client, run_input("t1", "r2", resume=twice)), "duplicate_interrupt"
    )
    assert await parked.fingerprint() == before


async def test_a_resume_on_a_new_thread_is_refused_and_creates_no_session(parked: Parked) -> None:
    body = run_input("t2", "r1", resume=resume((OPEN, "resolved", {"approved": True})))
    refused(await post_run(parked.client, body), "unknown_interrupt")
    assert await parked.store.load("t2") is None


async def test_a_message_with_media_parts_is_refused(parked: Parked) -> None:
    body = run_input("t2", "r1")
    body["messages"] = [
        {
            "id": "m1",
            "role": "user",
            "content": [{"type": "image", "source": {"type": "url", "value": "https://x/y.png"}}],
        }
    ]
    message = refused(await post_run(parked.client, body), "unsupported_content")
    assert message.startswith("messages[0] (user message 'm1') has content parts of type image")
    assert await parked.store.load("t2") is None


_BAD_PAYLOADS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.fixed_dictionaries({}),
    st.fixed_dictionaries({"approved": st.one_of(st.none(), st.integers(), st.text(max_size=3))}),
    st.fixed_dictionaries(
        {"approved": st.booleans(), "extra": st.integers()}  # an unknown key
    ),
    st.fixed_dictionaries({"approved": st.just(False), "editedArgs": st.just({"service": "x"})}),
    st.fixed_dictionaries(
        {
            "approved": st.just(True),
            "editedArgs": st.one_of(
                st.none(),
                st.just({}),
                st.just({"service": ""}),
                st.just({"service": 3}),
                st.just({"service": "web", "force": True}),
                st.lists(st.integers(), max_size=2),
            ),
        }
    ),
    st.fixed_dictionaries(
        {"approved": st.booleans(), "reason": st.one_of(st.integers(), st.just("x" * 2001))}
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entry=st.one_of(
        st.tuples(st.just("resolved"), _BAD_PAYLOADS),
        st.tuples(st.just("cancelled"), st.just({"approved": False})),
    )
)
async def test_a_bad_resume_payload_is_refused_and_changes_nothing(
    entry: tuple[str, Any],
) -> None:
    status, payload = entry
    async for parked in parked_thread():
        before = await parked.fingerprint()
        body = run_input("t1", "r2")
        body["resume"] = [{"interruptId": OPEN, "status": status, "payload": payload}]
        if payload is None:
            del body["resume"][0]["payload"]
        message = refused(await post_run(parked.client, body), "bad_resume")
        assert message.startswith("resume[0]: ")
        assert message.endswith("nothing was recorded")
        assert await parked.fingerprint() == before
        assert parked.tool.ran == []
        # The interrupt is still open: a good answer goes through.
        good = run_input("t1", "r3", resume=resume((OPEN, "resolved", {"approved": True})))
        assert (await post_run(parked.client, good))[-1]["type"] == "RUN_FINISHED"
        assert parked.tool.ran == [{"service": "api"}]


async def test_of_two_resumes_of_one_interrupt_one_wins(parked: Parked) -> None:
    parked.tool.gate = anyio.Event()  # the approved call waits until the second run is answered
    outcomes: dict[str, list[dict[str, Any]]] = {}

    async def send(run: str, payload: dict[str, Any]) -> None:
        body = run_input("t1", run, resume=resume((OPEN, "resolved", payload)))
        outcomes[run] = await post_run(parked.client, body)

    async with anyio.create_task_group() as group:
        group.start_soon(send, "approve", {"approved": True})
        for _ in range(200):  # the first run holds the thread's lease, its call waiting
            if (await parked.store.load("t1")).approvals:  # type: ignore[union-attr]
                break
            await anyio.sleep(0.01)
        await send("deny", {"approved": False, "reason": "no"})
        parked.tool.gate.set()
    assert outcomes["approve"][-1]["type"] == "RUN_FINISHED"
    message = refused(outcomes["deny"], "thread_busy")
    assert message.startswith("thread 't1' is busy: agentloop-ui:")
    assert parked.tool.ran == [{"service": "api"}]
    # Afterwards the interrupt is no longer open: a late answer is refused.
    late = run_input("t1", "late", resume=resume((OPEN, "resolved", {"approved": False})))
    refused(await post_run(parked.client, late), "unknown_interrupt")
    [entry] = await parked.audit.entries()
    assert entry.action.value == "approve"


async def test_an_expired_interrupt_says_when_and_refuses_its_answer() -> None:
    store = MemorySessionStore()
    app = create_agui_app(build_agent(store), config=AguiConfig(token=TOKEN, approval_ttl=0.2))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        parked = await post_run(client, run_input("t1", "r1", "deploy api"))
        [interrupt] = parked[-1]["outcome"]["interrupts"]
        assert interrupt["expiresAt"].endswith("+00:00")
        before = await store.load("t1")
        await anyio.sleep(0.3)
        body = run_input("t1", "r2", resume=resume((OPEN, "resolved", {"approved": True})))
        message = refused(await post_run(client, body), "interrupt_expired")
        assert message.startswith("resume[0]: interrupt 'approval:call-1' expired at ")
        after = await store.load("t1")
    assert before is not None
    assert after is not None
    assert (after.version, dict(after.approvals)) == (before.version, {})


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"token": "short"}, "at least 16 characters"),
        ({"allowed_origins": ("localhost:3000",)}, "expected origins like"),
        ({"lease_ttl": 0}, "lease_ttl must be seconds > 0"),
        ({"max_steps": 0}, "max_steps must be an int >= 1"),
    ],
)
def test_a_bad_setting_is_refused(settings: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        AguiConfig(**settings)
