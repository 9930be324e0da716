"""Failures between the client and the service: retries with one request_id, a service
that goes silent until the lease runs out, and an interrupt after a grant was sent."""

from __future__ import annotations

import json
import re
import signal
import threading
import time

import httpx
import pytest

import lockwarden
from lockwarden._keeper import RAN_OUT
from support import FaultyFront, eventually


def test_an_acquire_is_retried_with_its_request_id_and_gets_one_lease(
    front: FaultyFront, token: str, client: lockwarden.Client, name: str
) -> None:
    front.acquire_faults = ["503", "drop"]
    with lockwarden.Client(front.url, token=token, retry_for=5.0) as through:
        held = through.acquire(name, lease=2.0)
        acquires = [json.loads(body) for _, path, body in front.seen if path.endswith("/acquire")]
        assert len(acquires) == 3, "a 503, a lost answer, then the answer"
        assert len({a["request_id"] for a in acquires}) == 1, "one request_id for all tries"
        assert acquires[0] == acquires[2], "the same body every time"
        (lost,) = front.dropped
        assert (lost["lease_id"], lost["fencing_token"]) == (held.lease_id, held.fencing_token)
        assert client.status(name)["fencing_token"] == held.fencing_token
        held.release()
    assert client.status(name)["state"] == "free", "no second lease holds the lock"


def test_a_lease_is_lost_by_the_clients_clock_while_the_service_is_silent(
    front: FaultyFront, token: str, name: str
) -> None:
    with lockwarden.Client(front.url, token=token) as through:
        held = through.acquire(name, lease=1.0)
        time.sleep(0.5)
        front.silent = True
        silent_at = time.monotonic()
        assert held.lost.wait(2.0)
        # Counted from the last renewal sent before the silence, so before the lease could
        # have ended on the service (within a renewal interval of it going silent).
        assert time.monotonic() - silent_at <= 1.0 + 0.5
        with pytest.raises(lockwarden.LockLost, match=re.escape(RAN_OUT)):
            held.check()
        front.silent = False


def _interrupt_on_grant(client: lockwarden.Client) -> None:
    """Raises KeyboardInterrupt once, right after the first granted acquire's answer came."""
    fired = threading.Event()

    def hook(response: httpx.Response) -> None:
        granted = response.request.url.path.endswith("/acquire") and response.status_code == 200
        if granted and not fired.is_set():
            fired.set()
            raise KeyboardInterrupt

    client._transport.http().event_hooks["response"].append(hook)


def test_an_interrupt_after_the_grant_was_sent_releases_it(
    client: lockwarden.Client, name: str
) -> None:
    _interrupt_on_grant(client)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        client.acquire(name, lease=30.0)
    assert client.status(name)["state"] == "free", "released, not left for its 30 s"
    assert time.monotonic() - started < 5


def test_an_interrupt_while_waiting_leaves_the_queue(client: lockwarden.Client, name: str) -> None:
    holder = client.acquire(name, lease=10.0)
    started = time.monotonic()
    # A real SIGINT to the main thread, as Ctrl-C sends: it interrupts the blocking read.
    # Python's own handler, as in a terminal: a process started as a background job (`&`
    # in a script, as CI may run the tests) inherits SIGINT ignored, and Python keeps that.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            client.acquire(name, lease=30.0, wait=10.0)
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 5, "the interrupt came at once, and the clean-up soon"
    eventually(lambda: client.status(name)["waiters"] == 0, 2.0, "the waiter left")
    holder.release()
    assert client.status(name)["state"] == "free", "nobody was handed the lock"
