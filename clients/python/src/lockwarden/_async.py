"""The asyncio client: ``AsyncClient``, the ``AsyncHeld`` lock it hands out, and
``client.lock()``'s async context manager. The calls are async (httpx); keeping a held
lease runs on threads (see ``_keeper``), so that blocking code in the event loop cannot
starve the renewals."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, Unpack

from ._errors import LockwardenError
from ._keeper import Hold, settle
from ._protocol import (
    AcquireRequest,
    Answer,
    CampaignOptions,
    Grant,
    LockOptions,
    lock_path,
    path_of,
    view_of,
)
from ._transport import AsyncTransport, Config, SyncTransport
from ._watch import AsyncWatch

T = TypeVar("T")


class AsyncHeld(Hold):
    """A held lock, as ``Held``, for asyncio: ``lost`` and ``cleanup_requested`` are
    ``asyncio.Event``s (``await held.lost.wait()``), and ``release()`` is a coroutine.

    The lease is renewed from a thread, so it is kept while blocking code holds up the
    event loop; the events are set once the loop runs again, and ``check()`` knows at once.
    """

    lost: asyncio.Event
    cleanup_requested: asyncio.Event

    def __init__(self, client: AsyncClient, grant: Grant) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._client = client
        self.lost = asyncio.Event()
        self.cleanup_requested = asyncio.Event()
        super().__init__(client, grant, client._keeper_transport)

    def _soon(self, signal: Callable[[], object]) -> None:
        if threading.get_ident() == self._loop_thread:
            signal()
            return
        try:
            self._loop.call_soon_threadsafe(signal)
        except RuntimeError:
            pass  # the loop is closed: nobody is left to tell

    def _on_lost(self) -> None:
        super()._on_lost()
        self._soon(lambda: self.lost.set())

    def _on_cleanup(self) -> None:
        self._soon(lambda: self.cleanup_requested.set())

    def after_fork_in_child(self) -> None:
        lost = asyncio.Event()
        lost.set()
        self.lost = lost

    async def release(self) -> None:
        """As ``Held.release()``. Cancelled, the release goes on in the background."""
        if not self._begin_release():
            return
        path, body = self._release_body()
        call = self._client._in_background(self._client._transport.call("POST", path, body))
        self._end_release(await asyncio.shield(call))


class AsyncLeadership(AsyncHeld):
    """A leadership, as ``Leadership``, for asyncio: ``proclaim()`` and ``resign()`` are
    coroutines."""

    @property
    def term(self) -> int:
        return self.fencing_token

    async def proclaim(self, value: str) -> dict[str, Any]:
        """As ``Leadership.proclaim``."""
        path = path_of("election", self.name, "proclaim")
        body = {"lease_id": self.lease_id, "value": value}
        answer: dict[str, Any] = (await self._client._transport.call("POST", path, body)).ok()
        view = view_of("election", answer)
        if view is not None:
            self._keeper.judge(view, None)
        return dict(answer["election"])

    async def resign(self) -> None:
        """As ``release()``."""
        await self.release()


class AsyncCampaigning:
    """``async with client.campaign(...) as leader:``, as ``Campaigning``."""

    def __init__(
        self,
        client: AsyncClient,
        name: str,
        candidate: str | None,
        value: str,
        options: CampaignOptions,
    ) -> None:
        self._client, self._args = client, (name, candidate, value, options)
        self._leader: AsyncLeadership | None = None

    async def __aenter__(self) -> AsyncLeadership:
        name, candidate, value, options = self._args
        self._leader = await self._client.elect(name, candidate=candidate, value=value, **options)
        return self._leader

    async def __aexit__(self, *exc_info: object) -> None:
        leader, self._leader = self._leader, None
        if leader is None:
            return
        if exc_info[0] is None:
            await leader.resign()
            return
        try:
            await leader.resign()
        except LockwardenError:
            pass


class AsyncLocking:
    """``async with client.lock(...) as held:``, as ``Locking``."""

    def __init__(self, take: Callable[[], Awaitable[AsyncHeld]]) -> None:
        self._take = take
        self._held: AsyncHeld | None = None

    async def __aenter__(self) -> AsyncHeld:
        self._held = await self._take()
        return self._held

    async def __aexit__(self, *exc_info: object) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        if exc_info[0] is None:
            await held.release()
            return
        try:
            await held.release()
        except LockwardenError:
            pass


class AsyncClient:
    """The asyncio twin of ``Client``, with the same arguments and methods, each a
    coroutine (``watch`` gives an async iterator). Use it from one event loop; don't carry
    it across ``fork()``. ``aclose()`` (or leaving ``async with``) releases the locks still
    held through it.

    An acquire cancelled after it was sent (``asyncio.CancelledError``, a timeout) sends
    its ``request_id`` again and releases what it got before the cancellation goes on
    (for up to 5 s; cancelled again, that goes on in the background).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        retry_for: float = 10.0,
        ca_file: str | os.PathLike[str] | None = None,
    ) -> None:
        config = Config.of(base_url, token, retry_for, ca_file)
        self._transport = AsyncTransport(config)
        self._keeper_transport = SyncTransport(config)
        self._background: set[asyncio.Future[Any]] = set()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Releases the locks still held through this client and closes its connections."""
        for hold in [h for h in list(Hold.live) if h.owner is self]:
            if isinstance(hold, AsyncHeld):
                try:
                    await hold.release()
                except LockwardenError:
                    pass
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self._transport.http.aclose()
        self._keeper_transport.close()

    def _in_background(self, work: Awaitable[T]) -> asyncio.Future[T]:
        """A task that runs to its end even if whoever awaits it is cancelled."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def lock(self, name: str, **options: Unpack[LockOptions]) -> AsyncLocking:
        """As ``Client.lock``: ``async with client.lock(name, ...) as held:``."""
        return AsyncLocking(lambda: self.acquire(name, **options))

    async def acquire(self, name: str, **options: Unpack[LockOptions]) -> AsyncHeld:
        """As ``Client.acquire``."""
        return await self._take(AcquireRequest.build(name, **options), AsyncHeld)

    def semaphore(self, name: str, limit: int, **options: Unpack[LockOptions]) -> AsyncLocking:
        """As ``Client.semaphore``: ``async with client.semaphore(name, limit, ...) as held:``."""
        return AsyncLocking(lambda: self.acquire_permit(name, limit, **options))

    async def acquire_permit(
        self, name: str, limit: int, **options: Unpack[LockOptions]
    ) -> AsyncHeld:
        """As ``Client.acquire_permit``."""
        return await self._take(AcquireRequest.permit(name, limit, **options), AsyncHeld)

    def campaign(
        self,
        name: str,
        candidate: str | None = None,
        value: str = "",
        **options: Unpack[CampaignOptions],
    ) -> AsyncCampaigning:
        """As ``Client.campaign``: ``async with client.campaign(name, ...) as leader:``."""
        return AsyncCampaigning(self, name, candidate, value, options)

    async def elect(
        self,
        name: str,
        candidate: str | None = None,
        value: str = "",
        **options: Unpack[CampaignOptions],
    ) -> AsyncLeadership:
        """As ``Client.elect``."""
        request = AcquireRequest.campaign(name, candidate, value, **options)
        leader = await self._take(request, AsyncLeadership)
        assert isinstance(leader, AsyncLeadership)
        return leader

    async def _take(self, request: AcquireRequest, kind: type[AsyncHeld]) -> AsyncHeld:
        deadline = time.monotonic() + (request.wait or 0.0) + self._transport.config.retry_for
        try:
            answer: Answer = await self._transport.call(
                "POST", request.path, request.body, seconds=request.timeout, deadline=deadline
            )
            grant = Grant.of(request, answer)
        except LockwardenError:
            raise
        except BaseException:
            work = asyncio.to_thread(settle, self._keeper_transport, request)
            try:
                await asyncio.shield(self._in_background(work))
            except asyncio.CancelledError:
                pass  # cancelled again: the clean-up goes on in the background
            raise
        held = kind(self, grant)
        held._start()
        return held

    async def status(self, name: str) -> dict[str, Any]:
        """As ``Client.status``."""
        body: dict[str, Any] = (await self._transport.call("GET", lock_path(name))).ok()
        return body

    async def validate(self, name: str, fencing_token: int) -> bool:
        """As ``Client.validate``."""
        path = lock_path(name, "validate") + f"?fencing_token={int(fencing_token)}"
        return bool((await self._transport.call("GET", path)).ok().get("current"))

    def watch(self, name: str) -> AsyncWatch:
        """The events of the lock ``name`` (``async for event in client.watch(name)``)."""
        return AsyncWatch(self._transport, lock_path(name, "events"))

    async def leader(self, name: str) -> dict[str, Any]:
        """As ``Client.leader``."""
        body: dict[str, Any] = (await self._transport.call("GET", path_of("election", name))).ok()
        return body

    def observe(self, name: str) -> AsyncWatch:
        """As ``Client.observe`` (``async for event in client.observe(name)``)."""
        return AsyncWatch(self._transport, path_of("election", name, "events"))
