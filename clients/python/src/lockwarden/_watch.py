"""A lock's event stream (``GET /v1/locks/{name}/events``) as an iterator, blocking
(``Watch``) or async (``AsyncWatch``): it reconnects after a drop, resuming after the last
event it delivered (``Last-Event-ID``), and raises only for good (404, 401, 403)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import Any

import httpx

from ._errors import TRANSIENT_STATUSES, error_for
from ._protocol import CALL_TIMEOUT, backoff, is_transient
from ._sse import SILENCE_LIMIT, Event, SseParser
from ._transport import AsyncTransport, SyncTransport, timeout


class _Stream:
    """What both kinds share: the parser, the events parsed and not yet delivered, and
    how a failed connection or refusal is taken."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.parser = SseParser()
        self.pending: deque[Event] = deque()
        self.failures = 0
        self.closed = False

    def request_headers(self) -> dict[str, str]:
        headers = {"accept": "text/event-stream"}
        if self.parser.last_id is not None:
            headers["last-event-id"] = self.parser.last_id
        return headers

    def pause(self) -> float:
        """The pause before the next connection; raises nothing."""
        self.failures += 1
        return backoff(self.failures - 1, None)

    @staticmethod
    def refused(status: int, body: bytes) -> None:
        """Raises a refusal for good; returns for a transient one (503, say)."""
        try:
            parsed: Any = json.loads(body)
        except ValueError:
            parsed = body.decode("utf-8", errors="replace")
        if status not in TRANSIENT_STATUSES:
            raise error_for(status, parsed)

    @staticmethod
    def timeouts() -> httpx.Timeout:
        return timeout(CALL_TIMEOUT, read=SILENCE_LIMIT)


class Watch(_Stream):
    """The events of one lock, as they happen; from ``Client.watch(name)``.

    Iterate over it (``for event in client.watch(name)``); ``close()``, which any thread
    may call, ends the iteration. Also a context manager that closes it.
    """

    def __init__(self, transport: SyncTransport, path: str) -> None:
        super().__init__(path)
        self._transport = transport
        self._response: httpx.Response | None = None
        self._chunks: Iterator[bytes] | None = None
        self._socket: socket.socket | None = None
        self._reading = False
        self._guard = threading.Lock()

    def __iter__(self) -> Watch:
        return self

    def __enter__(self) -> Watch:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __next__(self) -> Event:
        while True:
            if self.pending:
                return self.pending.popleft()
            if self.closed:
                self._drop()
                raise StopIteration
            if self._chunks is None:
                try:
                    self._open()
                except httpx.TransportError as error:
                    if not is_transient(error):
                        raise
                    time.sleep(self.pause())
                continue
            with self._guard:
                self._reading = not self.closed
            try:
                chunk = next(self._chunks) if self._reading else b""
            except (StopIteration, httpx.TransportError):
                chunk = b""  # ended, failed, went silent, or was closed
            finally:
                with self._guard:
                    self._reading = False
            if not chunk:
                self._drop()
                if not self.closed:
                    time.sleep(self.pause())
                continue
            self.failures = 0
            self.pending.extend(self.parser.feed(chunk))

    def _open(self) -> None:
        http = self._transport.http()
        request = http.build_request(
            "GET", self.path, headers=self.request_headers(), timeout=self.timeouts()
        )
        response = http.send(request, stream=True)
        if response.status_code != 200:
            try:
                body = response.read()
            finally:
                response.close()
            self.refused(response.status_code, body)
            time.sleep(self.pause())
            return
        stream: Any = response.extensions.get("network_stream")
        with self._guard:
            self._response, self._chunks = response, response.iter_raw()
            self._socket = stream.get_extra_info("socket") if stream is not None else None
            if self.closed:
                self._shutdown()

    def _drop(self) -> None:
        with self._guard:
            response, self._response, self._chunks, self._socket = (
                self._response,
                None,
                None,
                None,
            )
        if response is not None:
            response.close()

    def _shutdown(self) -> None:
        # Wakes a thread blocked reading the stream: it sees the end and closes it.
        if self._socket is not None:
            try:
                self._socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        """Ends the stream; a thread iterating over it gets ``StopIteration``."""
        with self._guard:
            self.closed = True
            reading = self._reading
            self._shutdown()
        if not reading:
            self._drop()


class AsyncWatch(_Stream):
    """The events of one lock, as they happen; from ``AsyncClient.watch(name)``.

    ``async for event in client.watch(name)``; break out of the loop and ``await
    watch.aclose()`` (or use ``async with``), or cancel the task that iterates.
    """

    def __init__(self, transport: AsyncTransport, path: str) -> None:
        super().__init__(path)
        self._transport = transport
        self._response: httpx.Response | None = None
        self._chunks: AsyncIterator[bytes] | None = None

    def __aiter__(self) -> AsyncWatch:
        return self

    async def __aenter__(self) -> AsyncWatch:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def __anext__(self) -> Event:
        while True:
            if self.pending:
                return self.pending.popleft()
            if self.closed:
                await self._drop()
                raise StopAsyncIteration
            if self._chunks is None:
                try:
                    await self._open()
                except httpx.TransportError as error:
                    if not is_transient(error):
                        raise
                    await asyncio.sleep(self.pause())
                continue
            try:
                chunk = await self._chunks.__anext__()
            except (StopAsyncIteration, httpx.TransportError):
                chunk = b""
            if not chunk:
                await self._drop()
                if not self.closed:
                    await asyncio.sleep(self.pause())
                continue
            self.failures = 0
            self.pending.extend(self.parser.feed(chunk))

    async def _open(self) -> None:
        http = self._transport.http
        request = http.build_request(
            "GET", self.path, headers=self.request_headers(), timeout=self.timeouts()
        )
        response = await http.send(request, stream=True)
        if response.status_code != 200:
            try:
                body = await response.aread()
            finally:
                await response.aclose()
            self.refused(response.status_code, body)
            await asyncio.sleep(self.pause())
            return
        self._response, self._chunks = response, response.aiter_raw()

    async def _drop(self) -> None:
        response, self._response, self._chunks = self._response, None, None
        if response is not None:
            await response.aclose()

    async def aclose(self) -> None:
        """Ends the stream."""
        self.closed = True
        await self._drop()
