"""The inbox's session page lists the session's kept steps (read only), newest first."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from serve_support import park_async
from test_app import Inbox, open_inbox

pytestmark = pytest.mark.anyio


@pytest.fixture
async def inbox(tmp_path: Path) -> AsyncIterator[Inbox]:
    async for opened in open_inbox(tmp_path):
        yield opened


async def test_the_session_page_lists_the_steps_newest_first(inbox: Inbox) -> None:
    await park_async(inbox.store, "s1", "/reports/q3.txt")
    steps = await inbox.store.history("s1")
    assert steps
    await inbox.store.fork("s1", at=steps[-1].step, new_session_id="s1-what-if")
    await inbox.signed_in()
    for url in ("/sessions/s1", "/partials/sessions/s1"):
        page = (await inbox.client.get(url)).text
        listed = re.findall(r'<tr class="step" id="step-(\d+)">', page)
        assert listed == [str(step.step) for step in reversed(steps)]
        assert f"Steps ({len(steps)} kept, newest first)" in page
        assert "awaiting approval" in page
    fork = (await inbox.client.get("/sessions/s1-what-if")).text
    assert re.findall(r'<tr class="step" id="step-(\d+)">', fork) == ["1"]
    assert f"(forked from &#39;s1&#39; at step {steps[-1].step})" in fork
