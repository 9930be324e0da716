"""Lock events: a parser for ``text/event-stream`` (the WHATWG server-sent events format),
which keeps the bytes between reads (a line, a UTF-8 sequence or a CRLF pair may be split
across two), and the ``Event`` it yields."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ._errors import LockwardenError

#: The service sends a heartbeat every 15 s; a stream silent for much longer is dead even
#: if no error has reached us (a peer that vanished without closing the connection).
SILENCE_LIMIT = 45.0


@dataclass(frozen=True)
class Event:
    """One event of a lock's stream.

    ``type`` is ``snapshot`` (first: the lock now), ``acquired``, ``renewed``, ``released``,
    ``expired``, ``handed_off``, ``cleanup_requested``, ``cleanup_cancelled``, ``revoked``,
    ``force_released`` or ``queue``; ``id`` the stream's event id (the zxid of the change,
    growing along the stream); ``lock`` the lock after the change; ``data`` the event as
    sent.
    """

    type: str
    id: str | None
    lock: dict[str, Any] | None
    data: dict[str, Any]

    @classmethod
    def parse(cls, kind: str, event_id: str | None, data: str) -> Event:
        try:
            parsed = json.loads(data)
        except ValueError as error:
            raise LockwardenError(f"an event whose data is not JSON: {data[:200]!r}") from error
        if not isinstance(parsed, dict):
            parsed = {"value": parsed}
        lock = parsed.get("lock")
        return cls(kind, event_id, lock if isinstance(lock, dict) else None, parsed)

    @property
    def zxid(self) -> int | None:
        """The id as a number, when it is one (events without a write of their own carry
        ``zxid.n``)."""
        return int(self.id) if self.id is not None and self.id.isdigit() else None


class SseParser:
    def __init__(self) -> None:
        self._line = bytearray()
        self._after_cr = False
        self._started = False
        self._event = ""
        self._data: list[str] = []
        self._has_data = False
        self.last_id: str | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        """Feeds the next bytes of the stream; returns the events they complete."""
        events = []
        for byte in chunk:
            if byte == 0x0A and self._after_cr:
                self._after_cr = False
            elif byte in (0x0A, 0x0D):
                self._after_cr = byte == 0x0D
                line, self._line = bytes(self._line), bytearray()
                event = self._end_line(line)
                if event is not None:
                    events.append(event)
            else:
                self._after_cr = False
                self._line.append(byte)
        return events

    def _end_line(self, raw: bytes) -> Event | None:
        text = raw.decode("utf-8", errors="replace")
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if not text:
            return self._dispatch()
        if text.startswith(":"):
            return None  # a comment, such as a heartbeat
        name, _, value = text.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "id" and "\0" not in value:
            self.last_id = value
        return None

    def _dispatch(self) -> Event | None:
        kind, data, has_data = self._event, "\n".join(self._data), self._has_data
        self._event, self._data, self._has_data = "", [], False
        if not has_data:
            return None
        return Event.parse(kind or "message", self.last_id, data)
