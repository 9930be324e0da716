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

An election's leadership is kept the same way::

    with client.campaign("scheduler", candidate="node-1", value="10.0.0.7:9000") as leader:
        serve(until=leader.lost)             # a threading.Event, set once leadership is lost
        leader.proclaim("10.0.0.8:9000")     # a new value, the same term
    # resigned on exit

``AsyncClient`` is the same for asyncio. Durations are seconds (floats). The package reads
no environment variables and installs no signal handlers.
"""

from ._async import AsyncCampaigning, AsyncClient, AsyncHeld, AsyncLeadership, AsyncLocking
from ._errors import (
    Forbidden,
    LockHeld,
    LockLost,
    LockwardenError,
    Refused,
    Unavailable,
)
from ._protocol import CampaignOptions, LockOptions
from ._sse import Event
from ._sync import Campaigning, Client, Held, Leadership, Locking
from ._watch import AsyncWatch, Watch

__version__ = "0.1.0"

__all__ = [
    "AsyncCampaigning",
    "AsyncClient",
    "AsyncHeld",
    "AsyncLeadership",
    "AsyncLocking",
    "AsyncWatch",
    "Campaigning",
    "CampaignOptions",
    "Client",
    "Event",
    "Forbidden",
    "Held",
    "Leadership",
    "Locking",
    "LockHeld",
    "LockLost",
    "LockOptions",
    "LockwardenError",
    "Refused",
    "Unavailable",
    "Watch",
]
