"""A stdio transport for upstream servers whose answers cost at most their limit.

The SDK's ``stdio_client`` reads stdout as text and splits it with
``(buffer + chunk).split("\\n")``: every chunk copies the whole pending line, so
one long line costs time quadratic in its length and memory without bound
(measured: a 113 MB answer, 188 s and 1.4 GB before callgate could refuse it).
The reader is the part that cannot be swapped, so this module is the SDK's
transport again with another reader, kept small:

- stdout is read as bytes into a ``bytearray`` that is searched for ``\\n`` only
  where new bytes landed (:class:`LineSplitter`: linear time);
- a line that grows past the upstream's ``max_answer_bytes`` is not kept: its
  first and last :data:`KEEP` bytes are, the rest is dropped as it arrives. When
  it ends, the request it answers (its top-level ``"id"``, found in the kept head
  or tail by :func:`answer_id`) is answered with a JSON-RPC error saying how
  large it was (:func:`~callgate.gateway._transports.too_large_text`). A line
  whose id cannot be told for certain is logged and dropped: its call ends at
  its timeout.

The rest follows ``stdio_client`` and takes what the SDK makes public: the
parameters, the inherited environment (``get_default_environment``), the
process-group kill (``terminate_posix_process_tree``) and its grace periods. The
server runs in a process group of its own; shutdown is the specification's order
(close stdin, wait, terminate the group, kill it), shielded and bounded, so a
cancelled caller neither leaks a server nor hangs on one. On Windows the SDK's
own transport is used (its job objects are not redone here), unbounded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TextIO

import anyio
import anyio.lowlevel
import mcp_types as types
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import (
    FORCE_KILL_TIMEOUT,
    PROCESS_TERMINATION_TIMEOUT,
    StdioServerParameters,
    get_default_environment,
    stdio_client,
)
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from callgate.gateway._transports import too_large_text

__all__ = ["KEEP", "LineSplitter", "Overlong", "answer_id", "stdio_transport"]

logger = logging.getLogger(__name__)

KEEP = 4096
"""Bytes kept of each end of a line over the limit: where its id is."""
_FLUSH = 0.5
"""Seconds the writer has to send what it accepted before stdin is closed."""
_REAP = 2.0
"""Seconds to see a killed server gone."""

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception],
    MemoryObjectSendStream[SessionMessage],
]


@dataclass(kw_only=True, frozen=True)
class Overlong:
    """A line over the limit, of which only the ends were kept."""

    head: bytes
    tail: bytes
    size: int
    """Its length in bytes, without the newline."""


class LineSplitter:
    """Newline-delimited lines of a byte stream, in time linear in its length,
    none kept past ``limit`` bytes (see the module docs)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._head: bytes | None = None
        """While a line over the limit is being dropped: its first bytes."""
        self._tail = b""
        self._size = 0

    def feed(self, chunk: bytes) -> list[bytearray | Overlong]:
        """The lines ``chunk`` ends, without their newline (one over the limit as
        :class:`Overlong`)."""
        out: list[bytearray | Overlong] = []
        data = memoryview(chunk)
        if self._head is not None:
            end = chunk.find(b"\n")
            self._drop(data if end < 0 else data[:end])
            if end < 0:
                return out
            out.append(Overlong(head=self._head, tail=self._tail, size=self._size))
            self._head, self._tail, self._size = None, b"", 0
            data = data[end + 1 :]
        buffer = self._buffer
        scan, begin = len(buffer), 0
        buffer += data
        while (end := buffer.find(b"\n", scan)) >= 0:
            if end - begin > self._limit:
                out.append(self._overlong(buffer, begin, end))
            else:
                out.append(buffer[begin:end])
            begin = scan = end + 1
        if begin:
            del buffer[:begin]
        if len(buffer) > self._limit:  # no end yet, and too long already: keep its ends only
            self._head = bytes(buffer[:KEEP])
            self._tail = bytes(buffer[-KEEP:])
            self._size = len(buffer)
            buffer.clear()
        return out

    def _drop(self, data: memoryview) -> None:
        self._size += len(data)
        self._tail = bytes(data[-KEEP:]) if len(data) >= KEEP else (self._tail + data)[-KEEP:]

    @staticmethod
    def _overlong(buffer: bytearray, begin: int, end: int) -> Overlong:
        head = bytes(buffer[begin : min(end, begin + KEEP)])
        tail = bytes(buffer[max(begin, end - KEEP) : end])
        return Overlong(head=head, tail=tail, size=end - begin)


_DECODER = json.JSONDecoder()
_TAIL_ID = re.compile(
    r'[{,][ \t\r\n]*"id"[ \t\r\n]*:[ \t\r\n]*(-?(?:0|[1-9][0-9]*)|"(?:[^"\\\x00-\x1f]|\\.)*")'
    r"[ \t\r\n]*\}[ \t\r\n]*\Z"
)


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _head_members(text: str) -> tuple[list[str], list[types.RequestId]]:
    """The top-level keys of the object ``text`` begins, as far as they can be
    read whole, and the values of its ``"id"`` members among them."""
    keys: list[str] = []
    ids: list[types.RequestId] = []
    pos = _skip(text, 0)
    if not text.startswith("{", pos):
        return keys, ids
    pos += 1
    while True:
        try:
            key, pos = _DECODER.raw_decode(text, _skip(text, pos))
        except ValueError:
            return keys, ids
        pos = _skip(text, pos)
        if not isinstance(key, str) or not text.startswith(":", pos):
            return keys, ids
        keys.append(key)
        try:
            value, pos = _DECODER.raw_decode(text, _skip(text, pos + 1))
        except ValueError:  # cut off (a large result): nothing after it can be read
            return keys, ids
        pos = _skip(text, pos)
        # Only a value followed by its delimiter is whole: "id":12 may be "id":1234 cut.
        if not text.startswith((",", "}"), pos):
            return keys, ids
        if key == "id" and isinstance(value, (int, str)) and not isinstance(value, bool):
            ids.append(value)
        if text.startswith("}", pos):
            return keys, ids
        pos += 1


def answer_id(head: bytes, tail: bytes) -> types.RequestId | None:
    """The id of the request an over-long line answers, when it is certain.

    The line must begin as a JSON-RPC response (a top-level ``"result"`` or
    ``"error"`` key and no ``"method"`` among the keys its head shows whole). The
    id is a top-level ``"id"`` member read whole from the head (where the Python
    SDK writes it: ``{"jsonrpc":"2.0","id":7,"result":...``), or the last member
    of the object in the tail (the TypeScript SDK's ``...,"jsonrpc":"2.0","id":7}``):
    a member just before the final ``}`` is in the outermost object, and its key
    is ``"id"`` itself, for a quote after ``,`` or ``{`` cannot be an escaped one.
    Two ids that differ, or none, give ``None``.
    """
    keys, ids = _head_members(head.decode("utf-8", errors="replace"))
    if "method" in keys or not {"result", "error"} & set(keys):
        return None
    found = _TAIL_ID.search(tail.decode("utf-8", errors="replace"))
    if found is not None:
        ids.append(json.loads(found[1]))
    if not ids or any(value != ids[0] for value in ids):
        return None
    return ids[0]


def _message(
    line: bytearray | Overlong, limit: int, upstream: str
) -> SessionMessage | Exception | None:
    """What the session gets for one line (``None``: nothing)."""
    if isinstance(line, Overlong):
        request = answer_id(line.head, line.tail)
        if request is None:
            logger.warning(
                "upstream %s sent a line of at least %d bytes, over max_answer_bytes (%d), "
                "that answers no request it can be matched to: dropped",
                upstream,
                line.size,
                limit,
            )
            return None
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=too_large_text(line.size, limit))
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request, error=error))
    if not line.strip():
        return None
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # the session surfaces it, as the SDK's transport does
        # Not the line itself: it may hold a value the gateway must not log.
        logger.warning(
            "upstream %s sent a line of %d bytes that is no JSON-RPC message", upstream, len(line)
        )
        return exc


@contextlib.asynccontextmanager
async def stdio_transport(
    server: StdioServerParameters, *, max_answer_bytes: int, errlog: TextIO, upstream: str
) -> AsyncIterator[Streams]:
    """Start ``server`` and connect to it over its stdin and stdout; the streams
    are those ``mcp.Client`` takes.

    Raises:
        OSError: the server could not be started.
    """
    if sys.platform == "win32":  # pragma: no cover - see the module docs
        async with stdio_client(server, errlog=errlog) as streams:
            yield streams
        return
    process = await anyio.open_process(
        [server.command, *server.args],
        env=get_default_environment() | (server.env or {}),
        stderr=errlog,
        cwd=server.cwd,
        start_new_session=True,
    )
    # No await between the spawn and the task group, or a cancellation there
    # would leak the process.
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    shutting_down = False

    async def read() -> None:
        assert process.stdout is not None
        lines = LineSplitter(max_answer_bytes)
        try:
            async with to_session:
                try:
                    # One chunk at a time: nothing is read ahead while a delivery waits.
                    async for chunk in process.stdout:
                        for line in lines.feed(chunk):
                            message = _message(line, max_answer_bytes, upstream)
                            if message is not None:
                                await to_session.send(message)
                finally:
                    await _drain(process.stdout)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            # The session is gone or our shutdown closed the pipe: teardown, unless
            # it happened mid-session.
            if not shutting_down:
                logger.warning("upstream %s: reading its stdout failed", upstream, exc_info=True)

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(text.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may live on: end the session's reading, so no request waits forever.
            await to_session.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()  # the reader drains stdout: a server blocked writing can exit
        write_stream.close()
        with anyio.move_on_after(_FLUSH):
            await writer_done.wait()
        await _stop(process)
        for stream in (read_stream, write_stream, to_session, from_session):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()


async def _drain(stdout: ByteReceiveStream) -> None:
    """Read and drop what the server still writes, until shutdown closes the pipe."""
    with (
        anyio.CancelScope(shield=True),
        contextlib.suppress(
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            ConnectionError,
            OSError,
        ),
    ):
        while True:
            await stdout.receive()


async def _stop(process: Process) -> None:
    """Close stdin, give the server its grace period, then end its process group."""
    assert process.stdin is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, PROCESS_TERMINATION_TIMEOUT):
        await terminate_posix_process_tree(process, FORCE_KILL_TIMEOUT)
        if not await _exited(process, _REAP):
            logger.warning("upstream server process %d outlived its kill", process.pid)
    # Closes the pipes (and ends the drain); on a timeout it closes the transport.
    with anyio.move_on_after(_REAP):
        await process.aclose()


async def _exited(process: Process, timeout: float) -> bool:
    """Whether the process is gone within ``timeout``: its return code is polled,
    for ``wait()`` would also wait for a grandchild holding the pipes."""
    with anyio.move_on_after(timeout):
        while process.returncode is None:  # noqa: ASYNC110 - no event to wait on
            await anyio.sleep(0.01)
    return process.returncode is not None
