"""The blocking client: ``Client``, the ``Held`` lock and the ``Leadership`` it hands out,
and the context managers of ``client.lock()`` and ``client.campaign()``."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, Unpack

from ._errors import LockwardenError
from ._keeper import Hold, finish_in_background, release_all, settle
from ._protocol import (
    SETTLE_BUDGET,
    AcquireRequest,
    CampaignOptions,
    Grant,
    LockOptions,
    lock_path,
    path_of,
    view_of,
)
from ._transport import Config, SyncTransport
from ._watch import Watch


class Held(Hold):
    """A held lock, renewed in the background until ``release()``.

    ``name``, ``lease_id`` and ``fencing_token`` (pass it to the resource the lock
    protects) identify the grant. ``lost`` is set when the lease is lost, and
    ``cleanup_requested`` when a higher priority asks this holder to clean up and let go
    (the holder has the ``cleanup`` window it declared). ``check()`` raises ``LockLost``
    once the lease is lost.

    After ``os.fork()``, the child's copy holds nothing: it neither renews nor releases,
    ``lost`` is set and ``check()`` raises. The parent keeps the lock.
    """

    lost: threading.Event
    cleanup_requested: threading.Event

    def __init__(self, client: Client, grant: Grant) -> None:
        self.lost = threading.Event()
        self.cleanup_requested = threading.Event()
        super().__init__(client, grant, client._transport)

    def _on_lost(self) -> None:
        super()._on_lost()
        self.lost.set()

    def _on_cleanup(self) -> None:
        self.cleanup_requested.set()

    def after_fork_in_child(self) -> None:
        lost = threading.Event()
        lost.set()
        self.lost = lost

    def release(self) -> None:
        """Stops renewing and releases the lock. Raises ``LockLost`` if the lease had been
        lost before (the release then changed nothing), and ``Unavailable`` if the
        service could not be reached for ``retry_for`` (the lease then runs out by
        itself). Releasing again does nothing; so does a forked child. Interrupted
        (``KeyboardInterrupt``), it finishes the release before the process exits."""
        if not self._begin_release():
            return
        path, body = self._release_body()
        try:
            answer = self._transport.call("POST", path, body)
        except LockwardenError:
            raise
        except BaseException:
            deadline = time.monotonic() + SETTLE_BUDGET
            finish_in_background(
                lambda: self._transport.call("POST", path, body, deadline=deadline),
                f"release {self.name!r}",
            )
            raise
        self._end_release(answer)


class Leadership(Held):
    """This process leads an election: a ``Held`` whose ``fencing_token`` is the ``term``.
    ``lost`` is set when the leadership is lost (its lease ran out, a renewal was refused,
    another leader was seen); ``proclaim(value)`` tells observers a new value, and
    ``resign()`` (``release()``) steps down, electing the next candidate at once."""

    @property
    def term(self) -> int:
        return self.fencing_token

    def proclaim(self, value: str) -> dict[str, Any]:
        """Sets the leader's value, keeping the term; the Election after it. Raises
        ``Refused`` (``not_leader``) once the leadership is lost."""
        path = path_of("election", self.name, "proclaim")
        body = self._transport.call("POST", path, {"lease_id": self.lease_id, "value": value})
        answer: dict[str, Any] = body.ok()
        view = view_of("election", answer)
        if view is not None:
            self._keeper.judge(view, None)
        return dict(answer["election"])

    def resign(self) -> None:
        """As ``release()``."""
        self.release()


class Campaigning:
    """``with client.campaign(...) as leader:`` is elected on entry and resigns on exit,
    as ``Locking`` does for a lock."""

    def __init__(
        self, client: Client, name: str, candidate: str | None, value: str, options: CampaignOptions
    ) -> None:
        self._client, self._args = client, (name, candidate, value, options)
        self._leader: Leadership | None = None

    def __enter__(self) -> Leadership:
        name, candidate, value, options = self._args
        self._leader = self._client.elect(name, candidate=candidate, value=value, **options)
        return self._leader

    def __exit__(self, *exc_info: object) -> None:
        leader, self._leader = self._leader, None
        if leader is None:
            return
        if exc_info[0] is None:
            leader.resign()
            return
        try:
            leader.resign()
        except LockwardenError:
            pass


class Locking:
    """``with client.lock(...) as held:`` acquires on entry and releases on exit, also
    on an exception. When the block ends normally, a lock lost meanwhile raises
    ``LockLost`` there; when it raised, its exception goes on unchanged."""

    def __init__(self, take: Callable[[], Held]) -> None:
        self._take = take
        self._held: Held | None = None

    def __enter__(self) -> Held:
        self._held = self._take()
        return self._held

    def __exit__(self, *exc_info: object) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        if exc_info[0] is None:
            held.release()
            return
        try:
            held.release()
        except LockwardenError:
            pass  # the block's own exception matters more; a loss shows in held.lost


class Client:
    """A client of one lockwarden service (any of its instances behind one URL).

    ``base_url`` is ``http://host:port`` or ``https://host:port``; ``token`` is sent as
    ``Authorization: Bearer``; ``retry_for`` (seconds) is how long calls are retried while
    the service is unreachable or answers 503 or 429 (an acquire that waits gets its wait
    on top); ``ca_file`` is a PEM file of the certificate authorities to trust for
    ``https://`` (default: the system's).

    A client is safe to share between threads, and may be used in a forked child, where it
    opens connections of its own. ``close()`` (or leaving ``with client:``) releases the
    locks still held through it; so does the interpreter's exit.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        retry_for: float = 10.0,
        ca_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self._transport = SyncTransport(Config.of(base_url, token, retry_for, ca_file))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Releases the locks still held through this client and closes its connections."""
        release_all(self)
        self._transport.close()

    def lock(self, name: str, **options: Unpack[LockOptions]) -> Locking:
        """A context manager that holds the lock ``name`` (see ``acquire``) while its block
        runs, and releases it on exit, also on an exception."""
        return Locking(lambda: self.acquire(name, **options))

    def acquire(self, name: str, **options: Unpack[LockOptions]) -> Held:
        """Takes the lock ``name`` (a ``/`` in it is sent as ``%2F``) and renews it every
        third of ``lease`` until ``held.release()``.

        The keywords (see ``LockOptions``), all optional: ``lease=30.0`` (seconds),
        ``wait=None`` (seconds to wait in the lock's queue; None: don't wait),
        ``priority=0``, ``cleanup=30.0`` (the window this holder asks for when a higher
        priority wants the lock; None: none, so a higher priority takes it at once),
        ``forceful=False`` (take the lock from a lower holder once its window has passed),
        ``message=""`` and ``owner=None`` (``user@host:pid``).

        The call carries a fresh ``request_id`` and is sent again with it after a 503, a
        429, a connection error or a timeout, for up to ``retry_for`` (plus ``wait``): a
        retry gets the same grant, never a second lease. Interrupted after it was sent
        (``KeyboardInterrupt``), it sends the ``request_id`` again and releases what it
        got before the interrupt goes on (for up to 5 s; a second interrupt leaves that to
        a thread that the interpreter waits for at exit).

        Raises ``LockHeld`` (held, or the wait ran out), ``Refused`` (``.code``:
        ``cleanup_timeout``, ``superseded``, ``lease_ended``, ``name_conflict``, ...),
        ``Forbidden`` or ``Unavailable``.
        """
        return self._take(AcquireRequest.build(name, **options), Held)

    def semaphore(self, name: str, limit: int, **options: Unpack[LockOptions]) -> Locking:
        """A context manager that holds one permit of the semaphore ``name`` of ``limit``
        permits (1 to 128; see ``acquire_permit``) while its block runs, and releases it on
        exit, also on an exception. A semaphore and a lock of one name are unrelated."""
        return Locking(lambda: self.acquire_permit(name, limit, **options))

    def acquire_permit(self, name: str, limit: int, **options: Unpack[LockOptions]) -> Held:
        """Takes one permit of the semaphore ``name`` of ``limit`` permits, with ``acquire``'s
        keywords, and renews it until ``held.release()``. ``held.fencing_token`` is the
        permit's own. Raises ``LockHeld`` (``semaphore_full``, ``wait_timeout``) when no
        permit is free, ``Refused`` with ``limit_mismatch`` when the semaphore is held
        under another limit, and otherwise as ``acquire``."""
        return self._take(AcquireRequest.permit(name, limit, **options), Held)

    def campaign(
        self,
        name: str,
        candidate: str | None = None,
        value: str = "",
        **options: Unpack[CampaignOptions],
    ) -> Campaigning:
        """A context manager that leads the election ``name`` (see ``elect``) while its
        block runs, and resigns on exit, also on an exception."""
        return Campaigning(self, name, candidate, value, options)

    def elect(
        self,
        name: str,
        candidate: str | None = None,
        value: str = "",
        **options: Unpack[CampaignOptions],
    ) -> Leadership:
        """Campaigns in the election ``name`` as ``candidate`` (default ``user@host:pid``)
        with ``value`` (at most 4096 characters), waiting as ``acquire`` waits; the keywords are
        ``acquire``'s but ``message`` and ``owner``. The leadership renews itself every
        third of ``lease`` (strictly: the service never renews a leader whose lease ran
        out) until ``resign()``. Raises ``LockHeld`` (``leader_exists``, ``wait_timeout``)
        when another leads, and otherwise as ``acquire``."""
        request = AcquireRequest.campaign(name, candidate, value, **options)
        return self._take(request, Leadership)

    def _take(self, request: AcquireRequest, kind: type[Held]) -> Any:
        deadline = time.monotonic() + (request.wait or 0.0) + self._transport.config.retry_for
        held: Held | None = None
        try:
            answer = self._transport.call(
                "POST", request.path, request.body, seconds=request.timeout, deadline=deadline
            )
            held = kind(self, Grant.of(request, answer))
            held._start()
            return held
        except LockwardenError:
            raise
        except BaseException:
            if held is not None:
                held._begin_release()
            finish_in_background(
                lambda: settle(self._transport, request), f"settle the acquire of {request.name!r}"
            )
            raise

    def status(self, name: str) -> dict[str, Any]:
        """The lock ``name`` as the service shows it (state, holder, fencing token, time
        left, requestor, waiters); a lock nobody holds shows as free."""
        body: dict[str, Any] = self._transport.call("GET", lock_path(name)).ok()
        return body

    def validate(self, name: str, fencing_token: int) -> bool:
        """Whether ``fencing_token`` belongs to the live holder of the lock ``name``."""
        path = lock_path(name, "validate") + f"?fencing_token={int(fencing_token)}"
        return bool(self._transport.call("GET", path).ok().get("current"))

    def watch(self, name: str) -> Watch:
        """The events of the lock ``name``, as they happen (see ``Watch``)."""
        return Watch(self._transport, lock_path(name, "events"))

    def leader(self, name: str) -> dict[str, Any]:
        """The election ``name``: ``{"name", "leader": None or {"candidate", "value",
        "term", ...}, "candidates"}``."""
        body: dict[str, Any] = self._transport.call("GET", path_of("election", name)).ok()
        return body

    def observe(self, name: str) -> Watch:
        """The election's events: ``snapshot``, ``elected``, ``proclaimed``, ``no_leader``;
        each event's ``data["election"]`` is the election after it."""
        return Watch(self._transport, path_of("election", name, "events"))
