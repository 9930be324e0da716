"""`client.watch(name)`: a lock's events, as they happen; and the event-stream parser."""

from __future__ import annotations

import queue
import threading

import lockwarden
from lockwarden._sse import SseParser


def test_watch_iterates_over_a_locks_events_until_closed(
    client: lockwarden.Client, name: str
) -> None:
    seen: queue.Queue[lockwarden.Event | None] = queue.Queue()
    watch = client.watch(name)

    def follow() -> None:
        for event in watch:
            seen.put(event)
        seen.put(None)  # the iteration ended

    reader = threading.Thread(target=follow)
    reader.start()
    first = seen.get(timeout=2)
    assert first is not None and first.type == "snapshot"
    assert first.lock is not None and (first.lock["name"], first.lock["state"]) == (name, "free")
    held = client.acquire(name, lease=2.0, message="watched")
    event = seen.get(timeout=2)
    assert event is not None and event.type == "acquired" and event.lock is not None
    assert (event.lock["message"], event.lock["fencing_token"]) == ("watched", held.fencing_token)
    assert event.zxid is not None and event.zxid >= held.fencing_token
    held.release()
    kinds = []
    while "released" not in kinds:
        event = seen.get(timeout=2)
        assert event is not None
        kinds.append(event.type)
    watch.close()  # from another thread than the one reading
    assert seen.get(timeout=2) is None
    reader.join(timeout=2)
    assert not reader.is_alive()


def test_any_split_of_a_stream_gives_the_same_events() -> None:
    stream = (
        '\ufeff: heartbeat\r\n\r\nevent: acquired\r\nid: 7\r\ndata: {"lock":\r\n'
        'data: {"name":"h\u00e9llo"}}\r\n\r\nevent: queue\rdata: {"n":1}\r\r'
    ).encode()

    def events(*chunks: bytes) -> list[lockwarden.Event]:
        parser = SseParser()
        return [event for chunk in chunks for event in parser.feed(chunk)]

    whole = events(stream)
    assert [(e.type, e.id) for e in whole] == [("acquired", "7"), ("queue", "7")]
    assert whole[0].lock == {"name": "h\u00e9llo"} and whole[0].zxid == 7
    for cut in range(len(stream)):
        assert events(stream[:cut], stream[cut:]) == whole, f"cut at {cut}"
    assert events(b"event: x\n\nid: 3\n\n") == [], "a block without data dispatches nothing"
