"""``SqliteSessionStore(...)`` takes a path or a ``sqlite:///`` URL; bad ones are refused now."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import agentloop as al
import agentloop.testing
from agentloop.store import SqliteSessionStore

pytestmark = pytest.mark.anyio

EXPECTED = "a file path (sessions.db), sqlite:///PATH.db or postgresql://USER@HOST/DB"


async def _round_trip(store: SqliteSessionStore) -> list[str]:
    async with store:
        agent = al.Agent.builder().model(al.testing.ScriptedModel(["Hello!"])).store(store).build()
        result = await al.run(agent, "Hi", config="s")
        assert result.final_text == "Hello!"
        return [info.session_id for info in await store.list_sessions()]


async def test_a_path_a_relative_url_and_an_absolute_url_name_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    stores = [
        SqliteSessionStore(tmp_path / "a.db"),
        SqliteSessionStore(str(tmp_path / "b.db")),
        SqliteSessionStore("sqlite:///c.db"),
        SqliteSessionStore(f"sqlite:///{tmp_path}/d.db"),  # sqlite:////ABS: four slashes
    ]
    assert [store.path for store in stores] == [
        str(tmp_path / "a.db"),
        str(tmp_path / "b.db"),
        "c.db",
        f"{tmp_path}/d.db",
    ]
    for store in stores:
        assert await _round_trip(store) == ["s"]
    assert sorted(os.listdir(tmp_path)) == ["a.db", "b.db", "c.db", "d.db"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", f"SqliteSessionStore: the store is an empty string; expected {EXPECTED}"),
        (42, f"SqliteSessionStore: expected {EXPECTED}, got int"),
        (
            "sqlite://x.db",
            "SqliteSessionStore 'sqlite://x.db': expected sqlite:///PATH.db (three slashes, "
            "relative to the current directory) or sqlite:////ABSOLUTE/PATH.db",
        ),
        (
            "sqlite:///",
            "SqliteSessionStore 'sqlite:///': expected sqlite:///PATH.db (three slashes, "
            "relative to the current directory) or sqlite:////ABSOLUTE/PATH.db",
        ),
        (
            "mysql://db/x",
            f"SqliteSessionStore 'mysql://db/x': unknown scheme 'mysql'; expected {EXPECTED}",
        ),
        (
            "postgresql://me@db/sessions",
            "SqliteSessionStore 'postgresql://me@db/sessions': that is a PostgreSQL URL; open "
            "it with agentloop.store.PostgresSessionStore(url)",
        ),
        (
            "missing/dir/s.db",
            "SqliteSessionStore 'missing/dir/s.db': the directory 'missing/dir' does not exist; "
            "create it first (mkdir -p 'missing/dir') or choose another path",
        ),
        (
            "sqlite:///missing/s.db",
            "SqliteSessionStore 'sqlite:///missing/s.db': the directory 'missing' does not "
            "exist; create it first (mkdir -p 'missing') or choose another path",
        ),
        (
            "sub",
            "SqliteSessionStore 'sub': 'sub' is a directory; name a file in it, e.g. "
            "'sub/sessions.db'",
        ),
    ],
)
def test_a_store_that_cannot_be_opened_is_refused_at_once(
    value: object, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    with pytest.raises(al.InvalidInputError) as raised:
        SqliteSessionStore(value)  # type: ignore[arg-type]
    assert str(raised.value) == message
    assert sorted(os.listdir(tmp_path)) == ["sub"]  # nothing was created
