"""Every decision's reason and edited input round-trip through the stores exactly (hypothesis)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop import InvalidInputError
from agentloop.store import MemorySessionStore, SessionStore, SqliteSessionStore, input_digest

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


async def round_trip(store: SessionStore, reason: str | None, edited: Any) -> None:
    session_id = f"s-{uuid.uuid4().hex}"
    digest = input_digest("tool", edited)
    recorded = await store.record_approval(
        session_id,
        "c1",
        input_digest=digest,
        approved=True,
        reason=reason,
        edited_input=edited,
    )
    loaded = await store.load(session_id)
    # No document was saved: a decision may come before the session's first save.
    assert loaded is None
    denial = await store.record_approval(
        session_id, "c2", input_digest="sha256:x", approved=False, reason=reason
    )
    assert (recorded.reason, recorded.edited_input, recorded.input_digest) == (
        reason,
        edited,
        digest,
    )
    assert (denial.reason, denial.edited_input) == (reason, None)
    again = await store.record_approval(session_id, "c1", input_digest=digest, approved=True)
    assert again == recorded


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(reason=st.none() | TEXT, edited=JSON.filter(lambda value: value is not None))
def test_reasons_and_edits_round_trip(tmp_path: Path, reason: str | None, edited: Any) -> None:
    async def both() -> None:
        await round_trip(MemorySessionStore(), reason, edited)
        async with SqliteSessionStore(tmp_path / "decisions.db") as store:
            await round_trip(store, reason, edited)

    anyio.run(both)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reason", "edited"),
    [("\ud800", None), (None, {"path": "\udfff"}), (None, {"n": float("inf")})],
)
async def test_text_that_is_not_unicode_and_floats_json_lacks_are_refused(
    tmp_path: Path, reason: str | None, edited: Any
) -> None:
    for store in (MemorySessionStore(), SqliteSessionStore(tmp_path / "d.db")):
        async with store:
            with pytest.raises(InvalidInputError, match="cannot record a decision on call 'c1'"):
                await store.record_approval(
                    "s",
                    "c1",
                    input_digest="sha256:x",
                    approved=True,
                    reason=reason,
                    edited_input=edited,
                )
            assert await store.sessions_awaiting_approval() == []
