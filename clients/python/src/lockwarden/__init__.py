"""A Python client for lockwarden, an HTTP lock service: named, leased, prioritised locks
with fencing tokens.

It takes a lock (retrying transient failures with one ``request_id``, so that a retry
never takes a second lease), renews the lease in the background every third of it, and
tells the holder when the lease is lost or when a higher priority asks it to clean up::

    import lockwarden

    client = lockwarden.Client("http://127.0.0.1:8080", token=None, retry_for=10.0)
    with client.lock("jobs/etl", lease=30.0, wait=10.0) as held:
        for batch in batches:
            held.check()                     # raises lockwarden.LockLost once lost
            write(batch, fencing_token=held.fencing_token)
            if held.cleanup_requested.is_set():
                break                        # a higher priority waits: let go
    # released on exit, also on an exception

``AsyncClient`` is the same for asyncio. Durations are seconds (floats). The package reads
no environment variables and installs no signal handlers.
"""

from ._async import AsyncClient, AsyncHeld, AsyncLocking
from ._errors import (
    Forbidden,
    LockHeld,
    LockLost,
    LockwardenError,
    Refused,
    Unavailable,
)
from ._protocol import LockOptions
from ._sse import Event
from ._sync import Client, Held, Locking
from ._watch import AsyncWatch, Watch

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncHeld",
    "AsyncLocking",
    "AsyncWatch",
    "Client",
    "Event",
    "Forbidden",
    "Held",
    "Locking",
    "LockHeld",
    "LockLost",
    "LockOptions",
    "LockwardenError",
    "Refused",
    "Unavailable",
    "Watch",
]
