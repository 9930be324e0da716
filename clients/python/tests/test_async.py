"""The asyncio client: holding through blocking code, a lost lock, a cancellation after a
grant was sent, and a lock's events."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
import pytest

import lockwarden


def test_renewal_survives_blocking_code_in_the_event_loop(url: str, token: str, name: str) -> None:
    async def main() -> None:
        async with lockwarden.AsyncClient(url, token=token) as client:
            async with client.lock(name, lease=1.5) as held:
                assert isinstance(held.lost, asyncio.Event)
                time.sleep(1.8)  # blocks the loop past the lease: renewed from a thread
                held.check()
                assert await client.validate(name, held.fencing_token)
                lock = await client.status(name)
                assert (lock["name"], lock["state"]) == (name, "held")
            assert (await client.status(name))["state"] == "free"

    asyncio.run(main())


def test_a_force_released_lock_is_lost(
    url: str, token: str, name: str, force_release: Callable[[str], None]
) -> None:
    async def main() -> None:
        async with lockwarden.AsyncClient(url, token=token) as client:
            held = await client.acquire(name, lease=2.0)
            await asyncio.to_thread(force_release, name)
            await asyncio.wait_for(held.lost.wait(), 2.0)
            with pytest.raises(lockwarden.LockLost):
                held.check()
            with pytest.raises(lockwarden.LockLost):
                await held.release()

    asyncio.run(main())


def test_a_cancellation_after_the_grant_was_sent_releases_it(
    url: str, token: str, name: str
) -> None:
    async def main() -> None:
        async with lockwarden.AsyncClient(url, token=token) as client:
            cancelled = False

            async def cancel_on_grant(response: httpx.Response) -> None:
                nonlocal cancelled
                if response.request.url.path.endswith("/acquire") and not cancelled:
                    cancelled = True
                    task = asyncio.current_task()
                    assert task is not None
                    task.cancel()
                    await asyncio.sleep(0)

            client._transport.http.event_hooks["response"].append(cancel_on_grant)
            started = time.monotonic()
            with pytest.raises(asyncio.CancelledError):
                await client.acquire(name, lease=30.0)
            assert cancelled
            assert (await client.status(name))["state"] == "free", "released, not left held"
            assert time.monotonic() - started < 5

    asyncio.run(main())


def test_watch_iterates_over_a_locks_events(url: str, token: str, name: str) -> None:
    async def main() -> None:
        async with lockwarden.AsyncClient(url, token=token) as client:
            async with client.watch(name) as events:
                first = await anext(events)
                assert (first.type, first.lock and first.lock["state"]) == ("snapshot", "free")
                held = await client.acquire(name, lease=2.0)
                acquired = await asyncio.wait_for(anext(events), 2.0)
                assert acquired.type == "acquired" and acquired.lock is not None
                assert acquired.lock["fencing_token"] == held.fencing_token
                await held.release()
                kinds = []
                while "released" not in kinds:
                    kinds.append((await asyncio.wait_for(anext(events), 2.0)).type)

    asyncio.run(main())
