"""The exceptions, and which one an answer of the service stands for."""

from __future__ import annotations

from typing import Any


class LockwardenError(Exception):
    """The base of every error this package raises.

    ``status`` is the HTTP status when the service answered, ``code`` the service's stable
    error code (``lock_held``, ``not_owner``, ...), and ``lock`` the lock as the service saw
    it, when its answer carried one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        lock: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.lock = lock


class LockHeld(LockwardenError):
    """The lock was not acquired: another caller holds it, or the wait ran out.

    ``code`` is ``lock_held`` or ``wait_timeout``; ``lock`` is the lock, with its holder.
    A campaign that was not elected raises it too, with ``leader_exists`` or
    ``wait_timeout``.
    """


class LockLost(LockwardenError):
    """The lease is no longer held: a renewal was refused, the lock was force-released or
    taken by a higher priority, the service could not be reached until the lease ran out
    (by this process's clock), or this process is a fork of the holder."""


class Unavailable(LockwardenError):
    """The service could not be reached, or answered 503/429, for longer than
    ``retry_for``; or the TLS handshake failed."""


class Forbidden(LockwardenError):
    """The service refused the credential (401: missing or unknown token; 403: the call
    needs a token that may do more, such as the admin token)."""


class Refused(LockwardenError):
    """Any other refusal; ``code`` says which: ``cleanup_timeout``, ``superseded``,
    ``lease_ended``, ``name_conflict``, ``not_owner``, ``invalid_request``, ..."""


TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})
NOT_ACQUIRED_CODES = frozenset({"lock_held", "wait_timeout", "leader_exists", "semaphore_full"})


def error_for(status: int, body: Any) -> LockwardenError:
    """The exception a (non-200) answer stands for."""
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    code = error.get("code") if isinstance(error.get("code"), str) else f"http_{status}"
    message = error.get("message") if isinstance(error.get("message"), str) else str(body)
    lock = body.get("lock") if isinstance(body, dict) else None
    lock = lock if isinstance(lock, dict) else None
    text = f"{code}: {message}"
    kind: type[LockwardenError]
    if status == 409 and code in NOT_ACQUIRED_CODES:
        kind = LockHeld
    elif status in (401, 403):
        kind = Forbidden
    elif status in TRANSIENT_STATUSES:
        kind = Unavailable
    else:
        kind = Refused
    return kind(text, status=status, code=code, lock=lock)
