"""Checks of a :class:`~agentloop.store.StorageBackend`'s primitives, one by one.

Each check drives one primitive on fresh session ids and raises
``AssertionError`` naming it: ``the backend's primitive commit() is wrong:
...``. The conformance suite runs them when a check of a
:class:`~agentloop.store.BackendSessionStore` fails, so the failure says which
primitive broke, not only which rule of the store.
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio

from ..store._backend import BackendHead, BackendWrite, NumberedCommit, StorageBackend

__all__ = ["check_backend"]


def _fail(primitive: str, what: str, expected: Any, found: Any) -> None:
    raise AssertionError(
        f"the backend's primitive {primitive}() is wrong: {what}: expected {expected!r}, "
        f"found {found!r}"
    )


def _expect(primitive: str, what: str, found: Any, expected: Any) -> None:
    if found != expected:
        _fail(primitive, what, expected, found)


def _head(revision: int, text: str = "meta") -> BackendHead:
    return BackendHead(revision=revision, meta=f"{text}-{revision}", document=f"doc-{revision}")


def _write(revision: int, **parts: Any) -> BackendWrite:
    return BackendWrite(head=_head(revision), **parts)


def _session() -> str:
    return f"backend-check-{uuid.uuid4().hex[:12]}"


async def _check_compare_and_set(backend: StorageBackend) -> None:
    session_id = _session()
    _expect("read", "the head of a session never written", await backend.read(session_id), None)
    applied = await backend.commit(session_id, 0, _write(1))
    _expect("commit", "a first commit expecting revision 0 (no head)", applied, True)
    _expect("read", "the head after the first commit", await backend.read(session_id), _head(1))
    again = await backend.commit(session_id, 0, _write(1, lists={"l": (0, ("stale",))}))
    _expect("commit", "a second commit expecting no head (one exists)", again, False)
    stale = await backend.commit(session_id, 7, _write(8, rows={"t": {"k": "stale"}}))
    _expect("commit", "a commit expecting revision 7 (the head is at 1)", stale, False)
    _expect(
        "commit", "the head after two refused commits", await backend.read(session_id), _head(1)
    )
    _expect(
        "commit", "the list after a refused commit", await backend.read_list(session_id, "l"), []
    )
    _expect(
        "commit", "the table after a refused commit", await backend.read_rows(session_id, "t"), {}
    )
    _expect(
        "commit",
        "a commit on the current revision",
        await backend.commit(session_id, 1, _write(2)),
        True,
    )
    _expect("read", "the head after the second commit", await backend.read(session_id), _head(2))
    cleared = BackendHead(revision=3, meta="meta-3", document=None)
    await backend.commit(session_id, 2, BackendWrite(head=cleared))
    _expect(
        "commit",
        "the head after a commit whose head has no document (it replaces the stored one)",
        await backend.read(session_id),
        cleared,
    )
    await backend.delete(session_id)


async def _check_lists(backend: StorageBackend) -> None:
    session_id = _session()
    steps: list[tuple[int, tuple[str, ...], list[str]]] = [
        (0, ("a", "b", "c"), ["a", "b", "c"]),
        (3, ("d",), ["a", "b", "c", "d"]),
        (1, ("x",), ["a", "x"]),
        (2, (), ["a", "x"]),
        (0, (), []),
    ]
    for revision, (start, rows, expected) in enumerate(steps):
        applied = await backend.commit(
            session_id, revision, _write(revision + 1, lists={"l": (start, rows)})
        )
        _expect("commit", f"a commit of list rows {rows!r} from {start}", applied, True)
        found = await backend.read_list(session_id, "l")
        if found != expected:
            _fail(
                "commit",
                f"list rows after a commit keeping the first {start} and writing {rows!r} "
                "(read back with read_list)",
                expected,
                found,
            )
    _expect("read_list", "a list never written", await backend.read_list(session_id, "other"), [])
    await backend.delete(session_id)


async def _check_rows(backend: StorageBackend) -> None:
    session_id = _session()
    first = {"t": {"k1": "v1", "k2": "v2"}, "u": {"k1": "u1"}}
    await backend.commit(session_id, 0, _write(1, rows=first))
    _expect(
        "commit",
        "the rows put by a commit (read_rows)",
        await backend.read_rows(session_id, "t"),
        first["t"],
    )
    _expect(
        "read_rows",
        "the rows of keys k1 and missing",
        await backend.read_rows(session_id, "t", ["k1", "missing"]),
        {"k1": "v1"},
    )
    _expect("read_rows", "the rows of no key", await backend.read_rows(session_id, "t", []), {})
    _expect(
        "read_rows", "another table's rows", await backend.read_rows(session_id, "u"), {"k1": "u1"}
    )
    await backend.commit(session_id, 1, _write(2, rows={"t": {"k1": "new"}}))
    found = await backend.read_rows(session_id, "t")
    _expect(
        "commit",
        "the rows after putting k1 again (replaced, k2 kept)",
        found,
        {"k1": "new", "k2": "v2"},
    )
    dropping = _write(3, rows={"u": {"k2": "again"}}, drop={"t": ("k2", "missing"), "u": ("k2",)})
    await backend.commit(session_id, 2, dropping)
    _expect(
        "commit",
        "the rows after dropping k2 and a missing key of t (write.drop)",
        await backend.read_rows(session_id, "t"),
        {"k1": "new"},
    )
    _expect(
        "commit",
        "the rows of u after dropping and putting k2 in one write (dropped, then put)",
        await backend.read_rows(session_id, "u"),
        {"k1": "u1", "k2": "again"},
    )
    await backend.delete(session_id)


async def _check_isolation_and_delete(backend: StorageBackend) -> None:
    kept, dropped = _session(), _session()
    for session_id in (kept, dropped):
        await backend.commit(
            session_id, 0, _write(1, lists={"l": (0, (session_id,))}, rows={"t": {"k": session_id}})
        )
    heads = await backend.heads()
    _expect(
        "heads",
        "the heads of two sessions just written",
        {k: heads.get(k) for k in (kept, dropped)},
        {kept: _head(1), dropped: _head(1)},
    )
    _expect("read_list", "one session's list rows", await backend.read_list(kept, "l"), [kept])
    _expect("delete", "deleting a session with a head", await backend.delete(dropped), True)
    _expect("delete", "the head after a delete (read)", await backend.read(dropped), None)
    _expect(
        "delete", "the list after a delete (read_list)", await backend.read_list(dropped, "l"), []
    )
    _expect(
        "delete", "the table after a delete (read_rows)", await backend.read_rows(dropped, "t"), {}
    )
    _expect("delete", "the heads after a delete (heads)", dropped in await backend.heads(), False)
    _expect("delete", "deleting it again", await backend.delete(dropped), False)
    _expect(
        "delete",
        "another session's list after a delete",
        await backend.read_list(kept, "l"),
        [kept],
    )
    _expect(
        "delete",
        "another session's rows after a delete",
        await backend.read_rows(kept, "t"),
        {"k": kept},
    )
    _expect(
        "commit",
        "a first commit after a delete (expecting no head)",
        await backend.commit(dropped, 0, _write(1)),
        True,
    )
    _expect(
        "delete",
        "the list of a session recreated after a delete",
        await backend.read_list(dropped, "l"),
        [],
    )
    await backend.delete(dropped)
    await backend.delete(kept)


async def _check_numbers(backend: StorageBackend) -> None:
    counter = _session()
    first = await backend.next_number(counter)
    second = await backend.next_number(counter)
    if not second > first:
        _fail("next_number", "two numbers of one counter, in order", f"a number > {first}", second)
    found: list[int] = []

    async def draw() -> None:
        found.append(await backend.next_number(counter))

    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(draw)
    if len(set(found)) != 20 or min(found) <= second:
        _fail(
            "next_number",
            f"20 concurrent numbers after {second}",
            "20 distinct, all greater",
            sorted(found),
        )


async def _check_concurrent_commits(backend: StorageBackend) -> None:
    session_id = _session()
    applied: list[int] = []

    async def writer(number: int) -> None:
        for _ in range(5):
            while True:
                head = await backend.read(session_id)
                revision = 0 if head is None else head.revision
                length = len(await backend.read_list(session_id, "l"))
                write = _write(revision + 1, lists={"l": (length, (f"w{number}",))})
                if await backend.commit(session_id, revision, write):
                    applied.append(number)
                    break

    async with anyio.create_task_group() as group:
        for number in range(4):
            group.start_soon(writer, number)
    head = await backend.read(session_id)
    rows = await backend.read_list(session_id, "l")
    found = (None if head is None else head.revision, len(rows))
    _expect(
        "commit",
        "4 tasks committing 5 times each on the revision they read (revision, rows)",
        found,
        (20, 20),
    )
    await backend.delete(session_id)


async def _check_large_revisions(backend: StorageBackend) -> None:
    session_id = _session()
    big = 2**53 + 1  # a new head's revisions start at a multiple of 2**32 and grow
    _expect(
        "commit",
        "a first commit of revision 2**53 + 1",
        await backend.commit(session_id, 0, _write(big)),
        True,
    )
    _expect("read", "the head of revision 2**53 + 1", await backend.read(session_id), _head(big))
    stale = await backend.commit(session_id, big - 1, _write(big + 1))
    _expect("commit", "a commit expecting revision 2**53 (the head is at 2**53 + 1)", stale, False)
    applied = await backend.commit(session_id, big, _write(big + 1))
    _expect("commit", "a commit expecting revision 2**53 + 1, the head's", applied, True)
    await backend.delete(session_id)


async def _check_numbered_commit(backend: StorageBackend) -> None:
    if not isinstance(backend, NumberedCommit):
        return  # an optional fast path; the store uses next_number() and commit() instead
    session_id, counter = _session(), _session()
    await backend.commit(session_id, 0, _write(1))
    taken: list[int] = []

    def write(number: int) -> BackendWrite:
        taken.append(number)
        return _write(2, lists={"l": (0, (f"n{number}",))})

    number = await backend.commit_numbered(session_id, 1, counter, write)
    _expect("commit_numbered", "a commit on the head's revision: its number", number, 1)
    _expect("commit_numbered", "the last number given to write()", taken[-1:], [1])
    _expect("commit_numbered", "the head it stored", await backend.read(session_id), _head(2))
    _expect(
        "commit_numbered", "the list it wrote", await backend.read_list(session_id, "l"), ["n1"]
    )
    refused = await backend.commit_numbered(session_id, 1, counter, write)
    _expect("commit_numbered", "a commit on a stale revision", refused, None)
    _expect("commit_numbered", "the head after it", await backend.read(session_id), _head(2))
    after = await backend.next_number(counter)
    if not after > 1:
        _fail("commit_numbered", "the counter's next number after it gave 1", "> 1", after)
    await backend.delete(session_id)


CHECKS = (
    _check_compare_and_set,
    _check_lists,
    _check_rows,
    _check_isolation_and_delete,
    _check_numbers,
    _check_concurrent_commits,
    _check_large_revisions,
    _check_numbered_commit,
)


async def check_backend(backend: StorageBackend) -> None:
    """Check every primitive of ``backend``; ``AssertionError`` names the one that broke."""
    for check in CHECKS:
        await check(backend)
