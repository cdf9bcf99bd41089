"""Result archives (memory and SQLite) and the read_result tool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import agentloop as al
from agentloop.compaction import (
    READ_RESULT_TOOL,
    MemoryResultArchive,
    ResultArchive,
    SqliteResultArchive,
    read_result_tool,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite"])
async def archive(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ResultArchive]:
    if request.param == "memory":
        yield MemoryResultArchive()
        return
    sqlite = SqliteResultArchive(tmp_path / "archive.db")
    yield sqlite
    await sqlite.close()


async def test_put_get_first_write_wins_and_sessions_are_separate(archive: ResultArchive) -> None:
    assert isinstance(archive, ResultArchive)
    assert await archive.get("s1", "c1") is None
    await archive.put("s1", "c1", "full output ü")
    await archive.put("s1", "c1", "a later trim of the trimmed text")
    await archive.put("s2", "c1", "other session")
    assert await archive.get("s1", "c1") == "full output ü"
    assert await archive.get("s2", "c1") == "other session"
    assert await archive.get("s1", "c2") is None


async def test_sqlite_archive_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    first = SqliteResultArchive(path)
    await first.put("s", "c", "x" * 100_000)
    await first.close()
    second = SqliteResultArchive(str(path))
    assert await second.get("s", "c") == "x" * 100_000
    await second.close()
    assert repr(second) == f"SqliteResultArchive({str(path)!r})"


async def read(tool: al.Tool, session_id: str, **arguments: object) -> str:
    request = al.ToolRequest("r1", READ_RESULT_TOOL, arguments, session_id, "t")
    output = await tool.invoke(request, al.ToolContext(session_id, "t", "r1"))
    assert isinstance(output, str)
    return output


async def test_read_result_pages_through_the_archived_output(archive: ResultArchive) -> None:
    await archive.put("s", "call-7", "abcdefghij")
    tool = read_result_tool(archive, page_chars=4)
    assert tool.spec.name == "read_result"
    assert tool.spec.annotations.read_only
    assert set(tool.spec.input_schema["properties"]) == {"call_id", "offset"}
    assert await read(tool, "s", call_id="call-7") == (
        "abcd\n[characters 0-4 of 10; call read_result with call_id='call-7' and offset=4 "
        "for the next page]"
    )
    assert await read(tool, "s", call_id="call-7", offset=8) == (
        "ij\n[characters 8-10 of 10; end of output]"
    )


async def test_read_result_errors_name_the_problem(archive: ResultArchive) -> None:
    await archive.put("s", "c", "abc")
    tool = read_result_tool(archive)
    with pytest.raises(LookupError, match="no archived output for call 'c' in this session"):
        await read(tool, "other-session", call_id="c")
    for offset in (-1, 3, 99):
        with pytest.raises(ValueError, match=f"offset {offset} is outside the output of call 'c'"):
            await read(tool, "s", call_id="c", offset=offset)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
async def test_read_result_tool_rejects_bad_page_sizes(bad: object) -> None:
    with pytest.raises(al.InvalidInputError, match="page_chars must be a positive int"):
        read_result_tool(MemoryResultArchive(), page_chars=bad)  # type: ignore[arg-type]
