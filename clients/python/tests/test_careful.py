"""What careful users hit: one client shared by threads, and a fork while a lock is held."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import lockwarden


def test_threads_share_one_client(client: lockwarden.Client, name: str) -> None:
    inside = 0
    most = 0
    guard = threading.Lock()

    def take_turns(_: int) -> list[int]:
        nonlocal inside, most
        tokens = []
        for _ in range(3):
            with client.lock(name, lease=2.0, wait=10.0) as held:
                with guard:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.01)
                held.check()
                tokens.append(held.fencing_token)
                with guard:
                    inside -= 1
        return tokens

    with ThreadPoolExecutor(6) as pool:
        tokens = [t for turns in pool.map(take_turns, range(6)) for t in turns]
    assert most == 1, "one holder at a time"
    assert len(set(tokens)) == 18, "every grant its own fencing token"
    assert client.status(name)["state"] == "free"


def test_a_forked_child_holds_nothing(client: lockwarden.Client, name: str) -> None:
    with client.lock(name, lease=1.5) as held:
        pid = os.fork()
        if pid == 0:  # the child: report by exit status, never return into pytest
            status = 1
            try:
                status = _child_holds_nothing(client, held)
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "the child's checks failed"
        time.sleep(1.6)  # past the lease: the parent still renews
        held.check()
        assert not held.lost.is_set()
        assert client.validate(name, held.fencing_token)
    assert client.status(name)["state"] == "free"


def _child_holds_nothing(client: lockwarden.Client, held: lockwarden.Held) -> int:
    try:
        held.check()
        return 2
    except lockwarden.LockLost:
        pass
    if not held.lost.is_set():
        return 3
    held.release()  # does nothing in the child
    # The client works in the child, on connections of its own.
    lock = client.status(held.name)
    if (lock["state"], lock["fencing_token"]) != ("held", held.fencing_token):
        return 4
    return 0
