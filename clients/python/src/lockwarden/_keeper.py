"""Keeping a held lease, on threads of its own whatever the caller does (blocking code in
an asyncio program included): renewal every third of the lease, the lock's event stream,
and the judgement of every view of the lock (a renewal answer, an event) that says whether
the lease is still held and whether a higher priority asked for the lock. Also ``Hold``,
what ``Held`` and ``AsyncHeld`` share, and the clean-up after an interrupted acquire."""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import httpx

from . import _fork
from ._errors import LockLost, error_for
from ._protocol import (
    SETTLE_BUDGET,
    SETTLE_TRY,
    AcquireRequest,
    Answer,
    Grant,
    backoff,
    path_of,
    view_of,
)
from ._transport import SyncTransport
from ._watch import Watch

log = logging.getLogger("lockwarden")

#: The longest one renewal try may take before it is given up and sent again.
RENEW_CALL_TIMEOUT = 5.0
RAN_OUT = "the service could not be reached until the lease ran out (by this process's clock)"
FORKED = "this process is a fork of the holder: the lock belongs to the parent"


class Keeper:
    def __init__(
        self,
        transport: SyncTransport,
        grant: Grant,
        on_lost: Callable[[], None],
        on_cleanup: Callable[[], None],
    ) -> None:
        self.grant = grant
        self.every = grant.lease / 3
        #: When the lease runs out at the earliest, by this process's monotonic clock:
        #: counted from when the last successful renewal (or the grant) was *sent*.
        self.valid_until = grant.valid_until
        #: The grant came after a wait long enough that its bound (counted from when the
        #: acquire was sent) is near or past: the first renewal, sent at once, confirms it,
        #: and until it is answered the bound is not judged (the service judges it).
        self._confirming = grant.valid_until - time.monotonic() < self.every
        self.lost_reason: str | None = None
        self.requestor: dict[str, Any] | None = None
        self._transport = transport
        self._on_lost, self._on_cleanup = on_lost, on_cleanup
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._watch = Watch(transport, path_of(grant.kind, grant.name, "events"))

    def start(self) -> None:
        self.judge(self.grant.lock, None)
        for target, what in ((self._renew, "renewal"), (self._follow, "events")):
            name = f"lockwarden {what} of {self.grant.name}"
            threading.Thread(target=target, name=name, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._watch.close()

    def lose(self, reason: str) -> None:
        with self._guard:
            if self.lost_reason is not None or self._stop.is_set():
                return
            self.lost_reason = reason
        self.stop()
        self._on_lost()

    def expired(self) -> bool:
        """Whether the lease is lost; running out by this process's clock counts."""
        if (
            self.lost_reason is None
            and not self._confirming
            and time.monotonic() >= self.valid_until
        ):
            self.lose(RAN_OUT)
        return self.lost_reason is not None

    def judge(self, lock: dict[str, Any], event: str | None) -> None:
        """One view of the lock: lost unless held with this grant's token; a requestor
        there asks this holder to clean up."""
        token = lock.get("fencing_token")
        if lock.get("state") != "held" or token != self.grant.fencing_token:
            seen = f"the {event} event" if event else "the service"
            state = lock.get("state")
            holder = f" with fencing token {token}" if state != "free" and token else ""
            self.lose(f"{seen} shows the lock {state}{holder}: not held with this lease")
            return
        requestor = lock.get("requestor")
        if isinstance(requestor, dict):
            with self._guard:
                first, self.requestor = self.requestor is None, self.requestor or requestor
            if first:
                self._on_cleanup()

    def _renew(self) -> None:
        # A grant after a long wait leaves a loose bound: the first renewal, at once when
        # the bound is near, tightens it.
        if self._confirming:
            next_at = time.monotonic()
        else:
            next_at = max(time.monotonic(), self.grant.sent_at + self.every)
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            renewed = self._renew_once()
            if renewed is None:
                return
            next_at = renewed + self.every

    def _renew_once(self) -> float | None:
        """Renews, trying again while the lease lasts; when it was renewed, when the
        successful try was sent; else None (lost, or stopped)."""
        path = path_of(self.grant.kind, self.grant.name, "renew")
        body = {"lease_id": self.grant.lease_id}
        attempt = 0
        while not self.expired():
            sent_at = time.monotonic()
            # A try that hangs (its instance lost its ZooKeeper server, say) is given up
            # and sent again rather than allowed to eat the rest of the lease.
            left = self.every if self._confirming else self.valid_until - sent_at
            seconds = min(left, self.every, RENEW_CALL_TIMEOUT)
            answer: Answer | None = None
            try:
                answer = self._transport.once("POST", path, body, seconds)
            except Exception:  # no answer (or the client was closed): while the lease lasts
                pass
            if self._stop.is_set():
                return None
            if answer is not None and answer.status == 200:
                self._renewed(answer, sent_at)
                self._confirming = False
                return None if self.lost_reason else sent_at
            # Not confirmed: from here on the grant's own bound counts, as it would have.
            self._confirming = False
            # A 5xx is the service's trouble, not a refusal: tried again while the lease lasts.
            if answer is not None and not answer.transient and answer.status < 500:
                code = error_for(answer.status, answer.body).code
                self.lose(f"a renewal was refused ({code})")
                return None
            retry_after = answer.retry_after if answer is not None else None
            left = max(0.0, self.valid_until - time.monotonic())
            if self._stop.wait(min(backoff(attempt, retry_after), self.every / 4, left)):
                return None
            attempt += 1
        return None

    def _renewed(self, answer: Answer, sent_at: float) -> None:
        lock = view_of(self.grant.kind, answer.body, self.grant.fencing_token)
        if lock is None:
            self.valid_until = sent_at + self.every
            return
        remaining = lock.get("remaining_ms")
        left = self.every if not isinstance(remaining, int) else remaining / 1000
        # Trimmed a little for clocks that run at slightly different rates.
        self.valid_until = sent_at + left - left / 50
        self.judge(lock, None)

    def _follow(self) -> None:
        try:
            for event in self._watch:
                lock = view_of(self.grant.kind, event.data, self.grant.fencing_token)
                zxid = event.zxid
                # An event from before the grant (or a snapshot that old, from an instance
                # whose copy lags) says nothing about it.
                if lock is None or (zxid is not None and zxid < self.grant.fencing_token):
                    continue
                if lock.get("state") in ("free", "held", "expired"):
                    self.judge(lock, event.type)
                if self.lost_reason is not None:
                    return
        except Exception:  # no event streams (404), a refused credential: renewals suffice
            return


class Hold:
    """What ``Held`` and ``AsyncHeld`` share: the grant's identity, the keeper, the fork
    rule, ``check()`` and how a release's answer is taken."""

    #: Every hold of this process not yet released, for the release at exit.
    live: ClassVar[set[Hold]] = set()

    name: str
    lease_id: str
    fencing_token: int

    def __init__(self, owner: object, grant: Grant, transport: SyncTransport) -> None:
        self.name, self.lease_id, self.fencing_token = (
            grant.name,
            grant.lease_id,
            grant.fencing_token,
        )
        self.owner = owner
        self._transport = transport
        self._pid = os.getpid()
        self._released = False
        self.kind = grant.kind
        self._keeper = Keeper(transport, grant, self._on_lost, self._on_cleanup)
        _fork.register(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} fencing_token={self.fencing_token}>"

    def _start(self) -> None:
        Hold.live.add(self)
        self._keeper.start()

    def _on_lost(self) -> None:
        Hold.live.discard(self)

    def _on_cleanup(self) -> None:
        pass

    def after_fork_in_child(self) -> None:
        pass  # check() and release() compare pids; subclasses also set `lost`

    def check(self) -> None:
        """Raises ``LockLost`` unless the lease is still held: lost (a renewal refused, the
        lock force-released or taken, the lease run out by this process's clock while the
        service was unreachable), released, or this process is a fork of the holder."""
        if os.getpid() != self._pid:
            raise LockLost(FORKED)
        if self._keeper.expired():
            raise LockLost(self._keeper.lost_reason or RAN_OUT)
        if self._released:
            raise LockLost("the lock was released")

    def _begin_release(self) -> bool:
        """Stops keeping the lease; whether a release should be sent (not from a forked
        child, not twice)."""
        if os.getpid() != self._pid or self._released:
            return False
        self._released = True
        Hold.live.discard(self)
        self._keeper.stop()
        return True

    def _release_body(self) -> tuple[str, dict[str, str]]:
        return path_of(self.kind, self.name, "release"), {"lease_id": self.lease_id}

    def _end_release(self, answer: Answer) -> None:
        """Raises ``LockLost`` when the lease had been lost before it was released."""
        lost = self._keeper.lost_reason
        code = error_for(answer.status, answer.body).code if answer.status == 409 else None
        if code in ("not_owner", "not_leader"):
            lost = lost or "the lock was no longer held with this lease when it was released"
        elif answer.status != 200:
            raise error_for(answer.status, answer.body)
        if lost is not None:
            raise LockLost(lost)

    def _release_at_exit(self) -> None:
        if self._keeper.lost_reason is None and self._begin_release():
            path, body = self._release_body()
            try:
                self._transport.call("POST", path, body, deadline=time.monotonic() + 2.0)
            except Exception as error:
                log.warning("could not release %r at exit: %s", self.name, error)


def release_all(owner: object | None = None) -> None:
    """Releases every live hold of this process (of ``owner`` only, if given)."""
    for hold in list(Hold.live):
        if owner is None or hold.owner is owner:
            hold._release_at_exit()


atexit.register(release_all)


def settle(transport: SyncTransport, request: AcquireRequest) -> None:
    """After an interrupted acquire: sends it again with its ``request_id`` to learn whether
    it was granted (a retry gets the same grant), and releases the lease if so."""
    deadline = time.monotonic() + SETTLE_BUDGET
    attempt = 0
    while (left := deadline - time.monotonic()) > 0:
        answer: Answer | None = None
        try:
            # No answer within a short try means that the call waits in the queue, holding
            # nothing; the closed connection withdraws it. (A lock handed to it in the very
            # instant it leaves is kept for a retry until its lease runs out: the service
            # keeps every grant made for a request_id so. Trying again would wait again.)
            # A call that does not wait has an answer coming, however slow.
            seconds = min(SETTLE_TRY, left) if request.waits else left
            answer = transport.once("POST", request.path, request.body, seconds)
        except httpx.TimeoutException:
            if request.waits:
                return
        except httpx.TransportError:
            pass
        if answer is not None and answer.status == 200:
            lease_id = answer.body["lease_id"]
            path, body = path_of(request.kind, request.name, "release"), {"lease_id": lease_id}
            transport.call("POST", path, body, deadline=deadline).ok()
            log.info("released %r, granted to an interrupted acquire", request.name)
            return
        if answer is not None and not answer.transient:
            return
        retry_after = answer.retry_after if answer is not None else None
        time.sleep(min(backoff(attempt, retry_after), max(0.0, deadline - time.monotonic())))
        attempt += 1
    log.warning("could not learn whether an interrupted acquire of %r was granted", request.name)


def finish_in_background(work: Callable[[], object], what: str) -> None:
    """Runs ``work`` on a thread that the interpreter waits for before it exits, and waits
    for it here too, unless interrupted again."""

    def run() -> None:
        try:
            work()
        except Exception as error:
            log.warning("could not %s: %s", what, error)

    thread = threading.Thread(target=run, name=f"lockwarden: {what}", daemon=False)
    thread.start()
    thread.join()
