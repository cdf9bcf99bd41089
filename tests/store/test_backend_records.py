"""What BackendSessionStore keeps in a backend: records round-trip; damaged ones fail closed."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop import CheckpointError, InvalidStateError
from agentloop.store import (
    BackendHead,
    BackendSessionStore,
    MemoryBackend,
    RedisSessionStore,
    SessionStatus,
)
from agentloop.store._records import (
    ClaimRow,
    DecisionRow,
    LeaseRecord,
    SessionMeta,
    decode_record,
    encode_record,
)
from agentloop.testing.store_conformance import sample_checkpoint

pytestmark = pytest.mark.anyio

TEXT = st.text(max_size=12)
SECONDS = st.floats(min_value=0, max_value=4e9, allow_nan=False)
LEASES = st.builds(
    LeaseRecord,
    owner=TEXT,
    token=st.integers(min_value=1),
    expires_at=SECONDS,
    released=st.booleans(),
)
METAS = st.builds(
    SessionMeta,
    version=st.integers(min_value=0),
    updated_at=SECONDS,
    status=st.sampled_from(SessionStatus),
    pending=st.lists(TEXT, max_size=3).map(tuple),
    item_count=st.integers(min_value=0),
    turn_counts=st.none() | TEXT,
    lease=st.none() | LEASES,
)
CLAIMS = st.builds(
    ClaimRow,
    tool_name=TEXT,
    input_digest=st.none() | TEXT,
    claimed_at=SECONDS,
    answered=st.booleans(),
)
DECISIONS = st.builds(
    DecisionRow,
    input_digest=TEXT,
    approved=st.booleans(),
    decided_at=SECONDS,
    reason=st.none() | TEXT,
    edited_input=st.none() | TEXT,
)


@given(record=METAS | CLAIMS | DECISIONS)
def test_every_record_round_trips_through_its_text(record: Any) -> None:
    text = encode_record(record)
    assert decode_record(text, type(record), "s1", "a row") == record


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"version": 1', "JSONDecodeError: Expecting ',' delimiter"),
        ('{"version": 1, "colour": "red"}', "extra fields found (colour) @ $"),
        (None, "TypeError: it holds NoneType, expected JSON text"),
    ],
)
def test_a_damaged_record_is_refused_naming_the_session_and_the_row(
    text: object, reason: str
) -> None:
    with pytest.raises(CheckpointError) as caught:
        decode_record(text, SessionMeta, "s1", "its head's meta")
    message = str(caught.value)
    assert message.startswith("cannot load session 's1': its head's meta is damaged (")
    assert reason in message
    assert message.endswith(
        "; the store is damaged: restore it from a backup or delete the session"
    )


async def test_a_damaged_head_or_claim_row_fails_every_read_closed() -> None:
    backend = MemoryBackend()
    store = BackendSessionStore(backend)
    await store.save_checkpoint("s1", sample_checkpoint("s1", []))
    await store.record_call_started("s1", "c1", "tool")
    head = await backend.read("s1")
    assert head is not None
    damaged = BackendHead(revision=head.revision + 1, meta="{", document=head.document)
    assert await backend.commit("s1", head.revision, _with_head(damaged, {}))
    with pytest.raises(CheckpointError, match=r"^cannot load session 's1': its head's meta is"):
        await store.load("s1")
    with pytest.raises(CheckpointError, match=r"its head's meta is damaged"):
        await store.list_sessions()
    repaired = BackendHead(revision=head.revision + 2, meta=head.meta, document=head.document)
    assert await backend.commit("s1", head.revision + 1, _with_head(repaired, {"c1": "[]"}))
    with pytest.raises(CheckpointError, match=r"^cannot load session 's1': claims row 'c1' is"):
        await store.load("s1")
    assert [info.session_id for info in await store.list_sessions()] == ["s1"]


def _with_head(head: BackendHead, claims: dict[str, str]) -> Any:
    from agentloop.store import BackendWrite

    return BackendWrite(head=head, rows={"claims": claims} if claims else {})


async def test_a_redis_store_without_a_server_raises_checkpoint_error_naming_the_operation() -> (
    None
):
    store = RedisSessionStore("redis://127.0.0.1:1/0")
    with pytest.raises(CheckpointError) as caught:
        await store.load("s1")
    assert str(caught.value).startswith("cannot read session 's1' in Redis at ")
    assert "check that the server is running and reachable" in str(caught.value)
    await store.aclose()
    with pytest.raises(InvalidStateError, match=r"^cannot read session 's1': the Redis store"):
        await store.load("s1")
