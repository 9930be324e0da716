"""The blocking client against the service: holding and renewing, names with `/`, refusals,
a lost lock, and a preemption."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

import lockwarden
from lockwarden._protocol import ANSWER_MARGIN, AcquireRequest, encode


def test_a_lock_is_held_renewed_past_its_lease_and_released(
    client: lockwarden.Client, name: str
) -> None:
    assert encode(name).startswith("py%2F") and "/" not in encode(name)
    with client.lock(name, lease=1.5, message="py test") as held:
        assert held.name == name and held.lease_id and held.fencing_token > 0
        lock = client.status(name)
        assert lock["name"] == name, "the name went as one path segment"
        assert (lock["state"], lock["message"], lock["cleanup_ms"]) == ("held", "py test", 30000)
        assert lock["owner"].count("@") == 1 and lock["owner"].endswith(f":{os.getpid()}")
        time.sleep(1.8)  # past the lease: only renewals keep it
        held.check()
        assert client.validate(name, held.fencing_token)
        with pytest.raises(lockwarden.LockHeld) as refused:
            client.acquire(name, lease=1.0)
        assert refused.value.code == "lock_held"
        assert refused.value.lock is not None
        assert refused.value.lock["fencing_token"] == held.fencing_token
        with pytest.raises(lockwarden.LockHeld) as timed_out:
            client.acquire(name, lease=1.0, wait=0.2)
        assert timed_out.value.code == "wait_timeout"
    assert client.status(name)["state"] == "free"
    assert not client.validate(name, held.fencing_token)
    with pytest.raises(lockwarden.LockLost):
        held.check()
    held.release()  # again: nothing to do


def test_refusals_are_sorted(url: str, token: str, client: lockwarden.Client, name: str) -> None:
    with lockwarden.Client(url, token="wrong") as stranger:
        with pytest.raises(lockwarden.Forbidden) as forbidden:
            stranger.status(name)
    assert (forbidden.value.status, forbidden.value.code) == (401, "unauthorized")
    with pytest.raises(lockwarden.Forbidden):
        client.acquire(name, priority=2147483647)  # the override needs the admin token
    with pytest.raises(lockwarden.Refused) as bad:
        client.acquire("py/no spaces")
    assert bad.value.code == "invalid_lock_name"
    with client.lock(name + "/inner", lease=2.0):
        with pytest.raises(lockwarden.Refused) as nested:
            client.acquire(name, lease=2.0)
        assert nested.value.code == "name_conflict"
    with pytest.raises(ValueError):
        lockwarden.Client("127.0.0.1:8080")
    with pytest.raises(ValueError):
        client.acquire(name, lease=0)
    started = time.monotonic()
    with lockwarden.Client("http://127.0.0.1:9", retry_for=0.3) as nowhere:
        with pytest.raises(lockwarden.Unavailable):
            nowhere.acquire(name)
    assert time.monotonic() - started < 3


def test_a_force_released_lock_is_lost(
    client: lockwarden.Client, name: str, force_release: Callable[[str], None]
) -> None:
    with pytest.raises(lockwarden.LockLost):
        with client.lock(name, lease=2.0) as held:
            held.check()
            force_release(name)
            assert held.lost.wait(2.0), "the loss is seen"
            with pytest.raises(lockwarden.LockLost):
                held.check()
    # The block ended normally, so leaving it said that the lock had been lost.


def test_a_higher_priority_asks_for_cleanup_then_takes_the_lock(
    client: lockwarden.Client, name: str
) -> None:
    with ThreadPoolExecutor(1) as pool:
        # The holder lets go when asked: the lock passes to the higher priority.
        with client.lock(name, lease=2.0, cleanup=5.0) as held:
            boss = pool.submit(client.acquire, name, lease=2.0, priority=5, wait=5.0, cleanup=0.5)
            assert held.cleanup_requested.wait(3.0), "the holder is asked to clean up"
            assert not held.lost.is_set()
        taken = boss.result(timeout=3.0)
        assert client.status(name)["fencing_token"] == taken.fencing_token
        # A holder that does not let go loses the lock to a forceful caller once its
        # cleanup window (0.5 s) has passed.
        started = time.monotonic()
        forceful = pool.submit(client.acquire, name, lease=2.0, priority=9, wait=3.0, forceful=True)
        assert taken.cleanup_requested.wait(3.0)
        assert taken.lost.wait(3.0), "the lock was taken"
        assert time.monotonic() - started >= 0.4
        with pytest.raises(lockwarden.LockLost):
            taken.check()
        forceful.result(timeout=3.0).release()


def test_a_holder_without_a_cleanup_window_is_revoked_at_once(
    client: lockwarden.Client, name: str
) -> None:
    held = client.acquire(name, lease=2.0, cleanup=None)
    started = time.monotonic()
    boss = client.acquire(name, lease=2.0, priority=1)
    assert held.lost.wait(2.0)
    assert time.monotonic() - started < 2.0
    with pytest.raises(lockwarden.LockLost):
        held.release()
    boss.release()


def test_an_acquire_may_take_its_wait_plus_the_store_timeouts_to_answer() -> None:
    waits = AcquireRequest.build("a", wait=60.0, lease=5.0)
    assert waits.timeout == 60.0 + ANSWER_MARGIN and ANSWER_MARGIN >= 4 * 2.0
    assert waits.body["waiting_ms"] == 60000 and waits.body["lease_ms"] == 5000
    assert AcquireRequest.build("a").timeout == ANSWER_MARGIN
    assert "waiting_ms" not in AcquireRequest.build("a").body, "wait=None: don't wait"
    assert AcquireRequest.build("a").body["cleanup_ms"] == 30000
    assert "cleanup_ms" not in AcquireRequest.build("a", cleanup=None).body


def test_a_grant_after_a_wait_longer_than_its_lease_is_held(
    client: lockwarden.Client, name: str
) -> None:
    """The bound counted from when the acquire was sent is past on arrival: the first
    renewal, sent at once, confirms the grant instead of the lock counting as lost."""
    first = client.acquire(name, lease=5.0)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(lambda: client.acquire(name, lease=0.6, wait=5.0))
        time.sleep(1.0)  # longer than the waiter's lease
        first.release()
        held = waiting.result(timeout=10)
    try:
        time.sleep(0.3)
        held.check()
        assert not held.lost.is_set()
        assert client.validate(name, held.fencing_token)
    finally:
        held.release()
