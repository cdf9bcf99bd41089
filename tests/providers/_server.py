"""A tiny HTTP/1.1 server on 127.0.0.1 that replays SSE byte streams.

Runs on anyio, so it works under both asyncio and trio. Each request is
answered by the next :class:`Reply` (or by a function of the request); the body
is sent with chunked transfer encoding, one HTTP chunk per element of
``Reply.chunks``, with a short pause between them so that chunk boundaries
(which may split an SSE line or a UTF-8 character) reach the client as
separate reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import attrs


@attrs.frozen
class Reply:
    """One scripted HTTP response.

    ``cut``: close the connection after ``chunks`` without the terminating
    chunk. ``hang``: after ``chunks``, wait until the client disconnects.
    ``trickle``: after ``chunks``, send these bytes (e.g. an SSE comment) every
    ``trickle_every`` seconds until the client disconnects (at most 30 s).
    """

    status: int = 200
    chunks: tuple[bytes, ...] = ()
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/event-stream"),)
    cut: bool = False
    hang: bool = False
    trickle: bytes = b""
    trickle_every: float = 0.02


def sse(*chunks: bytes, **options: Any) -> Reply:
    """A 200 ``text/event-stream`` reply sending ``chunks`` as separate HTTP chunks."""
    return Reply(chunks=tuple(chunks), **options)


def json_error(status: int, body: Any, *headers: tuple[str, str]) -> Reply:
    """An error reply with a JSON body."""
    return Reply(
        status=status,
        chunks=(json.dumps(body).encode(),),
        headers=(("Content-Type", "application/json"), *headers),
    )


@attrs.frozen
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


Responder = Callable[[Recorded], Reply]


class ReplayServer:
    """``async with ReplayServer(replies) as server:`` then point an adapter at ``server.url``."""

    def __init__(self, replies: Sequence[Reply] | Responder) -> None:
        self._replies = list(replies) if not callable(replies) else []
        self._responder = replies if callable(replies) else None
        self.requests: list[Recorded] = []
        self.disconnected = anyio.Event()
        self.closed_connections = 0
        self._listener: anyio.abc.SocketListener | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> ReplayServer:
        self._listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = self._listener.extra(anyio.abc.SocketAttribute.local_port)
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._listener.serve, self._handle)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._group is not None
        assert self._listener is not None
        self._group.cancel_scope.cancel()
        # the body's own exception (if any) propagates unwrapped, not in an ExceptionGroup
        await self._group.__aexit__(None, None, None)
        await self._listener.aclose()
        return None

    def _next_reply(self, request: Recorded) -> Reply:
        if self._responder is not None:
            return self._responder(request)
        if not self._replies:
            return json_error(599, {"error": {"message": "test server: no reply scripted"}})
        return self._replies.pop(0)

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            try:
                request = await _read_request(stream)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return
            self.requests.append(request)
            reply = self._next_reply(request)
            try:
                await self._send(stream, reply)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                self._saw_disconnect()

    async def _send(self, stream: anyio.abc.SocketStream, reply: Reply) -> None:
        head = [f"HTTP/1.1 {reply.status} Test", "Transfer-Encoding: chunked", "Connection: close"]
        head += [f"{name}: {value}" for name, value in reply.headers]
        await stream.send(("\r\n".join(head) + "\r\n\r\n").encode())
        for chunk in reply.chunks:
            await stream.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await anyio.sleep(0.002)
        if reply.cut:
            return
        if reply.trickle:
            with anyio.move_on_after(30):
                while True:
                    await stream.send(b"%x\r\n%s\r\n" % (len(reply.trickle), reply.trickle))
                    await anyio.sleep(reply.trickle_every)
            return
        if reply.hang:
            with anyio.move_on_after(10):
                try:
                    while await stream.receive():
                        pass
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    pass
            self._saw_disconnect()
            return
        await stream.send(b"0\r\n\r\n")

    def _saw_disconnect(self) -> None:
        self.closed_connections += 1
        self.disconnected.set()


async def _read_request(stream: anyio.abc.SocketStream) -> Recorded:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        buffer += await stream.receive()
    head, _, body = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        body += await stream.receive()
    return Recorded(method, path, headers, body)


def events(*records: str) -> bytes:
    """SSE records (each already ``field: value`` lines) joined with blank lines, as bytes."""
    return "".join(record + "\n\n" for record in records).encode("utf-8")


def split_at(data: bytes, *positions: int) -> tuple[bytes, ...]:
    """``data`` cut at byte ``positions`` (ascending)."""
    pieces = []
    start = 0
    for position in positions:
        pieces.append(data[start:position])
        start = position
    pieces.append(data[start:])
    return tuple(piece for piece in pieces if piece)


def split_inside(data: bytes, marker: str, offset: int = 1) -> int:
    """The byte position ``offset`` bytes into the first occurrence of ``marker``."""
    position = data.index(marker.encode("utf-8"))
    return position + offset
