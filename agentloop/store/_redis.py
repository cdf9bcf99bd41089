"""``RedisSessionStore``: sessions in Redis, through the storage protocol.

Keys, atomicity, threads and durability are docs/store.md's ("RedisSessionStore").
A commit and a delete are Lua scripts, so Redis runs each as one atomic step;
they build their keys from the prefix, so the store needs a single Redis, not
a cluster. Redis errors become ``CheckpointError`` here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ..core._errors import CheckpointError, InvalidStateError
from ._backed import BackendSessionStore
from ._backend import BackendHead, BackendWrite
from ._history import DEFAULT_HISTORY_LIMIT

__all__ = ["RedisBackend", "RedisSessionStore"]

T = TypeVar("T")

_COMMIT = """
local prefix, session = ARGV[1], ARGV[2]
local head = prefix .. 'head:' .. session
local stored = redis.call('HGET', head, 'revision')
if (stored or '0') ~= ARGV[3] then return 0 end  -- as text: exact past 2^53
redis.call('HSET', head, 'revision', ARGV[4], 'meta', ARGV[5])
if ARGV[6] == '1' then redis.call('HSET', head, 'document', ARGV[7])
else redis.call('HDEL', head, 'document') end
redis.call('SADD', prefix .. 'sessions', session)
local index, i = prefix .. 'keys:' .. session, 9
for _ = 1, tonumber(ARGV[8]) do
  local key, start, count = prefix .. 'list:' .. ARGV[i] .. ':' .. session,
    tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  if start == 0 then redis.call('DEL', key) else redis.call('LTRIM', key, 0, start - 1) end
  for j = i + 3, i + 2 + count do redis.call('RPUSH', key, ARGV[j]) end
  redis.call('SADD', index, key)
  i = i + 3 + count
end
for _ = 1, tonumber(ARGV[i]) do  -- each table: the keys to drop, then the rows to put
  local key, count = prefix .. 'table:' .. ARGV[i + 1] .. ':' .. session, tonumber(ARGV[i + 2])
  for j = i + 3, i + 2 + count do redis.call('HDEL', key, ARGV[j]) end
  i = i + 3 + count  -- at the count of rows to put
  count = tonumber(ARGV[i])
  for j = i + 1, i + 2 * count, 2 do redis.call('HSET', key, ARGV[j], ARGV[j + 1]) end
  redis.call('SADD', index, key)
  i = i + 2 * count
end
return 1
"""

_DELETE = """
local prefix, session = ARGV[1], ARGV[2]
local index = prefix .. 'keys:' .. session
for _, key in ipairs(redis.call('SMEMBERS', index)) do redis.call('DEL', key) end
redis.call('SREM', prefix .. 'sessions', session)
return redis.call('DEL', prefix .. 'head:' .. session, index) > 0 and 1 or 0
"""


def _arguments(prefix: str, session_id: str, expected: int, write: BackendWrite) -> list[Any]:
    """A commit's script arguments: the head, then each list and each table (its keys to
    drop, then its rows to put), counted."""
    head = write.head
    has_document = head.document is not None
    arguments: list[Any] = [prefix, session_id, expected, head.revision, head.meta]
    arguments += ["1" if has_document else "0", head.document or "", len(write.lists)]
    for name, (start, rows) in write.lists.items():
        arguments += [name, start, len(rows), *rows]
    tables = write.drop.keys() | write.rows.keys()
    arguments.append(len(tables))
    for table in tables:
        keys, rows_by_key = write.drop.get(table, ()), write.rows.get(table, {})
        arguments += [table, len(keys), *keys, len(rows_by_key)]
        for key, text in rows_by_key.items():
            arguments += [key, text]
    return arguments


class RedisBackend:
    """A :class:`~agentloop.store.StorageBackend` in Redis (the ``redis`` extra).

    ``url`` is a Redis URL (``redis://localhost:6379/0``); every key starts
    with ``prefix``, so several stores can share one database. At most
    ``max_connections`` calls run at once, each on its own pooled connection.
    """

    def __init__(self, url: str, *, prefix: str = "agentloop:", max_connections: int = 8) -> None:
        try:
            import redis
        except ImportError:  # pragma: no cover - the extra is installed in the tests
            raise ModuleNotFoundError(
                "RedisSessionStore needs redis: pip install 'agentloop-runtime[redis]'",
                name="redis",
            ) from None
        self._prefix = prefix
        self._client: Any = redis.Redis.from_url(
            url, decode_responses=True, max_connections=max_connections
        )
        self._limiter = anyio.CapacityLimiter(max_connections)
        self._commit = self._client.register_script(_COMMIT)
        self._delete = self._client.register_script(_DELETE)
        self._errors = redis.RedisError
        self._closed = False

    async def _run(self, operation: str, call: Callable[[], T]) -> T:
        if self._closed:
            raise InvalidStateError(f"cannot {operation}: the Redis store is closed")
        try:
            return await anyio.to_thread.run_sync(call, limiter=self._limiter)
        except self._errors as error:
            raise CheckpointError(
                f"cannot {operation} in Redis at {self._client.connection_pool!r}: "
                f"{type(error).__name__}: {error}; check that the server is running and "
                "reachable"
            ) from error

    async def read(self, session_id: str) -> BackendHead | None:
        """The session's head, or ``None``."""
        key = f"{self._prefix}head:{session_id}"
        found = await self._run(f"read session {session_id!r}", lambda: self._client.hgetall(key))
        return _head(found)

    async def commit(self, session_id: str, expected_revision: int, write: BackendWrite) -> bool:
        """Apply ``write`` iff the head's revision is ``expected_revision`` (one script)."""
        arguments = _arguments(self._prefix, session_id, expected_revision, write)
        applied = await self._run(
            f"write session {session_id!r}", lambda: self._commit(keys=[], args=arguments)
        )
        return bool(applied)

    async def read_list(self, session_id: str, name: str) -> list[str]:
        """The list's rows, in order."""
        key = f"{self._prefix}list:{name}:{session_id}"
        return await self._run(
            f"read session {session_id!r}", lambda: list(self._client.lrange(key, 0, -1))
        )

    async def read_rows(
        self, session_id: str, table: str, keys: Collection[str] | None = None
    ) -> dict[str, str]:
        """The table's rows by key (those of ``keys`` found, or all)."""
        key = f"{self._prefix}table:{table}:{session_id}"
        operation = f"read session {session_id!r}"
        if keys is None:
            return await self._run(operation, lambda: dict(self._client.hgetall(key)))
        wanted = list(keys)
        if not wanted:
            return {}
        values = await self._run(operation, lambda: self._client.hmget(key, wanted))
        return {
            name: value for name, value in zip(wanted, values, strict=True) if value is not None
        }

    async def heads(self) -> dict[str, BackendHead]:
        """Every session's head (one pipeline)."""

        def read_all() -> dict[str, BackendHead]:
            sessions = sorted(self._client.smembers(f"{self._prefix}sessions"))
            pipe = self._client.pipeline(transaction=False)
            for session_id in sessions:
                pipe.hgetall(f"{self._prefix}head:{session_id}")
            heads = zip(sessions, map(_head, pipe.execute()), strict=True)
            return {session_id: head for session_id, head in heads if head is not None}

        return await self._run("list the sessions", read_all)

    async def delete(self, session_id: str) -> bool:
        """Drop the session (one script); ``True`` if it had a head."""
        arguments = [self._prefix, session_id]
        deleted = await self._run(
            f"delete session {session_id!r}", lambda: self._delete(keys=[], args=arguments)
        )
        return bool(deleted)

    async def next_number(self, counter: str) -> int:
        """``INCR`` of the counter's key."""
        key = f"{self._prefix}counter:{counter}"
        return int(await self._run(f"count {counter}", lambda: self._client.incr(key)))

    async def aclose(self) -> None:
        """Close the connections; later calls raise ``InvalidStateError``."""
        if not self._closed:
            self._closed = True
            await anyio.to_thread.run_sync(self._client.close)


def _head(fields: dict[str, str]) -> BackendHead | None:
    if not fields:
        return None
    return BackendHead(
        revision=int(fields["revision"]), meta=fields["meta"], document=fields.get("document")
    )


class RedisSessionStore(BackendSessionStore):
    """A :class:`SessionStore` in Redis: :class:`RedisBackend` under :class:`BackendSessionStore`.

    ``RedisSessionStore("redis://localhost:6379/0")``; see :class:`RedisBackend`
    for ``prefix`` and ``max_connections``. Same protocol, same conformance
    suite as every store; leases expire by each process's own clock. ``history_limit``:
    how many of each session's latest steps stay addressable at least (0: none).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "agentloop:",
        max_connections: int = 8,
        history_limit: int = DEFAULT_HISTORY_LIMIT,
    ) -> None:
        super().__init__(
            RedisBackend(url, prefix=prefix, max_connections=max_connections),
            history_limit=history_limit,
        )
