"""What the sync and async clients share about the protocol: lock names in paths, durations,
the default owner, which failures are transient and how long to pause before a retry, the
acquire body with its ``request_id``, and reading a grant."""

from __future__ import annotations

import os
import pwd
import random
import socket
import ssl
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

import httpx

from ._errors import TRANSIENT_STATUSES, Unavailable, error_for

#: How much longer than its wait an acquire may take to answer before the try counts as
#: lost and is sent again: the service answers a call that does not wait within 4 store
#: timeouts (2 s each by default), and a waiting call within its wait plus that.
ANSWER_MARGIN = 10.0
#: How long any other single call may take.
CALL_TIMEOUT = 10.0
CONNECT_TIMEOUT = 5.0
FIRST_BACKOFF = 0.1
MAX_BACKOFF = 2.0
#: After an interrupt or a cancellation of an acquire: how long the client keeps trying to
#: learn (with the acquire's ``request_id``) whether it was granted, and to release it.
SETTLE_BUDGET = 5.0
#: One such try of an acquire that may wait: no answer by then means that the call waits
#: in the lock's queue, holding nothing, and closing its connection withdraws it.
SETTLE_TRY = 1.0


def encode(name: str) -> str:
    """A lock name as one path segment: ``jobs/etl`` is ``jobs%2Fetl``."""
    return urllib.parse.quote(name, safe="-._~")


def lock_path(name: str, action: str = "") -> str:
    return path_of("lock", name, action)


def path_of(kind: str, name: str, action: str = "") -> str:
    """The path of ``action`` on the lock (``kind`` "lock"), election ("election") or
    semaphore ("semaphore") ``name``; the action that lets go is ``release`` for each."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a{'n' if kind == 'election' else ''} {kind} name must be a non-empty string")
    if kind == "election" and action == "release":
        action = "resign"
    return f"/v1/{kind}s/{encode(name)}" + (f"/{action}" if action else "")


def view_of(kind: str, body: Any, token: int | None = None) -> dict[str, Any] | None:
    """The holder as an answer (or an event's data) shows it, as a lock: an election's
    leader is a lock held with its term; no leader, a free lock. Of a semaphore, the
    permit whose fencing token is ``token``: held while live, free once gone."""
    if not isinstance(body, dict):
        return None
    if kind == "lock":
        lock = body.get("lock")
        return lock if isinstance(lock, dict) else None
    if kind == "semaphore":
        semaphore = body.get("semaphore")
        if not isinstance(semaphore, dict):
            return None
        holders = semaphore.get("holders") or []
        mine = next((h for h in holders if isinstance(h, dict) and h.get("fencing_token") == token), None)
        if mine is None:
            return {"name": semaphore.get("name"), "state": "free"}
        return {
            "name": semaphore.get("name"),
            "state": "expired" if mine.get("remaining_ms") == 0 else "held",
            "owner": mine.get("owner"),
            "fencing_token": token,
            "remaining_ms": mine.get("remaining_ms"),
            # The requestor asks this holder only while its cleanup window counts down.
            "requestor": semaphore.get("requestor") if mine.get("cleanup_remaining_ms") is not None else None,
        }
    election = body.get("election")
    if not isinstance(election, dict):
        return None
    leader = election.get("leader")
    if not isinstance(leader, dict):
        return {"name": election.get("name"), "state": "free"}
    return {
        "name": election.get("name"),
        "state": "held",
        "owner": leader.get("candidate"),
        "fencing_token": leader.get("term"),
        "remaining_ms": leader.get("remaining_ms"),
        "requestor": election.get("requestor"),
    }


def millis(seconds: float, what: str, *, positive: bool = False) -> int:
    """Seconds (a float) as the whole milliseconds the API speaks in."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {seconds!r}")
    ms = round(seconds * 1000)
    if ms < 0 or (positive and ms < 1):
        raise ValueError(f"{what} must be {'at least 1 ms' if positive else 'at least 0'}")
    return ms


def default_owner() -> str:
    """``user@host:pid``, the user from ``$USER``, ``$LOGNAME``, the uid's name, or the uid
    (as the ``lockwarden`` CLI does)."""
    user = os.environ.get("USER") or os.environ.get("LOGNAME")
    if not user:
        try:
            user = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            user = str(os.getuid())
    return f"{user}@{socket.gethostname()}:{os.getpid()}"


def base_url(url: str) -> str:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"the service's URL must start with http:// or https://, not {url!r}")
    return url.rstrip("/")


def verify_for(ca_file: str | os.PathLike[str] | None) -> ssl.SSLContext | bool:
    """httpx's ``verify``: the system's roots, or only those of ``ca_file`` (PEM)."""
    return ssl.create_default_context(cafile=os.fspath(ca_file)) if ca_file else True


def headers_for(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


def backoff(attempt: int, retry_after: float | None) -> float:
    """The pause before retry number ``attempt``: exponential with jitter, or the service's
    ``Retry-After`` when longer (capped, and never shorter than the backoff)."""
    cap = min(FIRST_BACKOFF * 2.0 ** min(attempt, 10), MAX_BACKOFF)
    jittered = cap * (0.5 + random.random() / 2)
    return jittered if retry_after is None else max(min(retry_after, MAX_BACKOFF), jittered)


def is_transient(error: BaseException) -> bool:
    """A failure that a retry may get past: no answer (refused or reset connection, a
    timeout), but not a TLS failure, which the next try would meet again."""
    if not isinstance(error, httpx.TransportError) or isinstance(error, httpx.UnsupportedProtocol):
        return False
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ssl.SSLError):
            return False
        cause = cause.__cause__ or cause.__context__
    return True


def unreachable(error: BaseException) -> Unavailable:
    what = type(error).__name__
    return Unavailable(f"the service cannot be reached: {what}: {error}")


@dataclass
class Answer:
    """One answer: the status, the JSON body (or the text), when its try was sent, and the
    service's ``Retry-After``."""

    status: int
    body: Any
    sent_at: float
    retry_after: float | None = None

    @classmethod
    def of(cls, response: httpx.Response, sent_at: float) -> Answer:
        try:
            body = response.json()
        except ValueError:
            body = response.text
        after = response.headers.get("retry-after", "").strip()
        return cls(response.status_code, body, sent_at, float(after) if after.isdigit() else None)

    @property
    def transient(self) -> bool:
        return self.status in TRANSIENT_STATUSES

    def ok(self) -> Any:
        """The body of a 200; else raises the error it stands for."""
        if self.status != 200:
            raise error_for(self.status, self.body)
        return self.body


@dataclass
class Retries:
    """The retry policy of one call: after each transient failure, how long to pause, or
    the error to give up with once ``deadline`` (monotonic) would pass."""

    deadline: float
    attempt: int = 0

    def pause_after(self, failure: Answer | httpx.TransportError) -> float:
        if isinstance(failure, Answer):
            error: Exception = error_for(failure.status, failure.body)
            retry_after = failure.retry_after
        elif is_transient(failure):
            error, retry_after = unreachable(failure), None
        else:
            raise Unavailable(f"{type(failure).__name__}: {failure}") from failure
        pause = backoff(self.attempt, retry_after)
        if time.monotonic() + pause >= self.deadline:
            raise error from (None if isinstance(failure, Answer) else failure)
        self.attempt += 1
        return pause


class CampaignOptions(TypedDict, total=False):
    """The keywords of ``elect()`` and ``campaign()`` besides ``candidate`` and ``value``:
    ``lease``, ``wait``, ``priority``, ``cleanup`` and ``forceful``, as for a lock (see
    ``LockOptions``)."""

    lease: float
    wait: float | None
    priority: int
    cleanup: float | None
    forceful: bool


class LockOptions(TypedDict, total=False):
    """The keywords of ``acquire()`` and ``lock()``, each optional:

    - ``lease`` (float, default 30.0): seconds the lease lasts; renewed every third of it.
    - ``wait`` (float or None, default None): seconds to wait in the lock's queue when it
      is held; None does not wait.
    - ``priority`` (int, default 0): a strictly higher one asks a holder that declared a
      cleanup window to clean up, or takes the lock at once from one that declared none.
    - ``cleanup`` (float or None, default 30.0): the window this holder asks for when a
      higher priority wants the lock; None (or 0) declares none.
    - ``forceful`` (bool, default False): take the lock from a lower holder once its
      cleanup window has passed, instead of giving up (``cleanup_timeout``).
    - ``message`` (str, default ""): what the lock is held for, for people.
    - ``owner`` (str or None, default None): who holds it, for people; None is
      ``user@host:pid``.
    """

    lease: float
    wait: float | None
    priority: int
    cleanup: float | None
    forceful: bool
    message: str
    owner: str | None


@dataclass
class AcquireRequest:
    """One acquire: its path and body (with a fresh ``request_id``, kept by every retry)."""

    name: str
    lease: float
    wait: float | None
    path: str = ""
    body: dict[str, Any] = field(default_factory=dict)
    #: "lock", "election" for a campaign, or "semaphore" for a permit.
    kind: str = "lock"

    @classmethod
    def permit(cls, name: str, limit: int, **options: Unpack[LockOptions]) -> AcquireRequest:
        """One permit of the semaphore ``name`` of ``limit`` permits: a lock acquire's body
        with the limit."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 128:
            raise ValueError(f"limit must be a whole number from 1 to 128, not {limit!r}")
        request = cls.build(name, **options)
        body = dict(request.body, limit=limit)
        path = path_of("semaphore", name, "acquire")
        return cls(name, request.lease, request.wait, path, body, "semaphore")

    @classmethod
    def campaign(
        cls, name: str, candidate: str | None, value: str, **options: Unpack[CampaignOptions]
    ) -> AcquireRequest:
        """A campaign: a lock acquire's body, with the candidate and value for the owner
        and message."""
        unknown = set(options) - set(CampaignOptions.__annotations__)
        if unknown:
            raise TypeError(f"unknown keyword(s): {', '.join(sorted(unknown))}")
        if not isinstance(value, str):
            raise TypeError(f"value must be a string, not {value!r}")
        request = cls.build(name, owner=candidate, message=value, **options)
        body = dict(request.body)
        body["candidate"], body["value"] = body.pop("owner"), body.pop("message")
        path = path_of("election", name, "campaign")
        return cls(name, request.lease, request.wait, path, body, "election")

    @classmethod
    def build(cls, name: str, **options: Unpack[LockOptions]) -> AcquireRequest:
        lease = options.get("lease", 30.0)
        wait = options.get("wait")
        priority = options.get("priority", 0)
        cleanup = options.get("cleanup", 30.0)
        forceful = options.get("forceful", False)
        message = options.get("message", "")
        owner = options.get("owner")
        unknown = set(options) - set(LockOptions.__annotations__)
        if unknown:
            raise TypeError(f"unknown keyword(s): {', '.join(sorted(unknown))}")
        if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
            raise ValueError(f"priority must be a whole number of at least 0, not {priority!r}")
        body: dict[str, Any] = {
            "owner": owner if owner is not None else default_owner(),
            "lease_ms": millis(lease, "lease", positive=True),
            "message": message,
            "priority": priority,
            "forceful": bool(forceful),
            "request_id": str(uuid.uuid4()),
        }
        if wait is not None:
            body["waiting_ms"] = millis(wait, "wait")
        if cleanup is not None:
            body["cleanup_ms"] = millis(cleanup, "cleanup")
        return cls(name, float(lease), wait, lock_path(name, "acquire"), body)

    @property
    def waits(self) -> bool:
        return bool(self.body.get("waiting_ms"))

    @property
    def timeout(self) -> float:
        """How long one try may take to answer."""
        return (self.wait or 0.0) + ANSWER_MARGIN


@dataclass
class Grant:
    """What a granted acquire hands the holder."""

    name: str
    lease_id: str
    fencing_token: int
    lease: float
    #: When the try that got the grant was sent, by this process's monotonic clock.
    sent_at: float
    #: When the lease runs out at the earliest, by the same clock.
    valid_until: float
    #: The holder as the grant shows it (an election's, as a lock: see ``view_of``).
    lock: dict[str, Any]
    kind: str = "lock"

    @classmethod
    def of(cls, request: AcquireRequest, answer: Answer) -> Grant:
        body = answer.ok()
        token = body.get("term" if request.kind == "election" else "fencing_token")
        lock = view_of(request.kind, body, token) or {}
        # The grant was decided no earlier than its try was sent, so the lease runs at
        # least `remaining_ms` from then: a bound this process's clock can keep.
        remaining = lock.get("remaining_ms")
        left = request.lease if remaining is None else min(remaining / 1000, request.lease)
        return cls(
            name=request.name,
            lease_id=str(body["lease_id"]),
            fencing_token=int(body["term" if request.kind == "election" else "fencing_token"]),
            lease=request.lease,
            sent_at=answer.sent_at,
            valid_until=answer.sent_at + left,
            lock=lock,
            kind=request.kind,
        )
