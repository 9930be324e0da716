"""Semaphores: permits up to the limit, each kept past its lease and released on leaving
its block; a full semaphore and another limit are refused; a preempted permit is lost; the
asyncio client does the same."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import lockwarden


def test_permits_are_held_up_to_the_limit(client: lockwarden.Client, name: str) -> None:
    with client.semaphore(name, 2, owner="a", lease=1.5) as first:
        with client.semaphore(name, 2, owner="b", lease=1.5) as second:
            assert second.fencing_token > first.fencing_token > 0
            with pytest.raises(lockwarden.LockHeld) as full:
                client.acquire_permit(name, 2, owner="c")
            assert full.value.code == "semaphore_full"
            with pytest.raises(lockwarden.Refused) as other:
                client.acquire_permit(name, 3, owner="c")
            assert other.value.code == "limit_mismatch"
            time.sleep(1.8)  # past the lease: only renewals keep them
            first.check()
            second.check()
        # One permit is free again.
        third = client.acquire_permit(name, 2, owner="c")
        third.release()
    with pytest.raises(lockwarden.LockLost):
        first.check()
    with pytest.raises(ValueError):
        client.acquire_permit(name, 0)


def test_a_preempted_permit_is_lost(client: lockwarden.Client, name: str) -> None:
    low = client.acquire_permit(name, 1, owner="low", lease=30.0, cleanup=None)
    with ThreadPoolExecutor(1) as pool:
        high = pool.submit(client.acquire_permit, name, 1, owner="high", priority=5, wait=5.0).result()
    assert high.fencing_token > low.fencing_token
    assert low.lost.wait(10.0), "the preempted holder hears of it at its next renewal"
    with pytest.raises(lockwarden.LockLost):
        low.check()
    high.release()


def test_the_asyncio_client_holds_a_permit(url: str, token: str, name: str) -> None:
    async def main() -> None:
        async with lockwarden.AsyncClient(url, token=token) as client:
            async with client.semaphore(name, 2, owner="a", lease=1.5) as held:
                assert held.fencing_token > 0
                await asyncio.sleep(1.8)  # past the lease: only renewals keep it
                held.check()
                with pytest.raises(lockwarden.LockHeld):
                    async with client.semaphore(name, 2, owner="b"):
                        async with client.semaphore(name, 2, owner="c"):
                            pass

    asyncio.run(main())
