"""Elections: a leadership is kept past its lease, proclaims, resigns on leaving its block,
is refused to a second candidate, and is lost to a preferred one; the election's stream
tells each change; the asyncio client does the same."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import lockwarden


def test_a_leadership_is_kept_proclaimed_and_resigned(client: lockwarden.Client, name: str) -> None:
    events = client.observe(name)
    stream = iter(events)
    assert next(stream).type == "snapshot"
    with client.campaign(name, candidate="node-1", value="10.0.0.1:80", lease=1.5) as leader:
        assert leader.term == leader.fencing_token > 0
        elected = next(stream)
        assert elected.type == "elected"
        assert elected.data["election"]["leader"]["term"] == leader.term
        time.sleep(1.8)  # past the lease: only renewals keep it
        leader.check()
        now = client.leader(name)["leader"]
        assert (now["candidate"], now["value"], now["term"]) == ("node-1", "10.0.0.1:80", leader.term)
        assert leader.proclaim("10.0.0.2:80")["leader"]["value"] == "10.0.0.2:80"
        assert next(stream).type == "proclaimed"
        with pytest.raises(lockwarden.LockHeld) as refused:
            client.elect(name, candidate="node-2")
        assert refused.value.code == "leader_exists"
    assert next(stream).type == "no_leader"
    assert client.leader(name)["leader"] is None
    with pytest.raises(lockwarden.LockLost):
        leader.check()
    events.close()


def test_a_preferred_candidate_takes_over(client: lockwarden.Client, name: str) -> None:
    old = client.elect(name, candidate="old", lease=30.0, cleanup=None)
    with ThreadPoolExecutor(1) as pool:
        preferred = pool.submit(client.elect, name, candidate="new", priority=5, wait=5.0).result()
    assert preferred.term > old.term
    assert old.lost.wait(10.0), "the old leader hears of it"
    with pytest.raises(lockwarden.LockLost):
        old.check()
    preferred.resign()
    assert client.leader(name)["leader"] is None


def test_the_async_client_campaigns_proclaims_and_resigns(url: str, token: str, name: str) -> None:
    async def main() -> None:
        async with lockwarden.AsyncClient(url, token=token) as client:
            async with client.campaign(name, candidate="a", value="v1", lease=1.5) as leader:
                assert isinstance(leader, lockwarden.AsyncLeadership)
                await asyncio.sleep(1.8)  # past the lease: only renewals keep it
                leader.check()
                said = await leader.proclaim("v2")
                assert said["leader"]["term"] == leader.term
                assert (await client.leader(name))["leader"]["value"] == "v2"
            assert (await client.leader(name))["leader"] is None

    asyncio.run(main())


def test_a_leader_is_asked_to_hand_over_and_does(client: lockwarden.Client, name: str) -> None:
    leader = client.elect(name, candidate="old", cleanup=30.0)
    with ThreadPoolExecutor(1) as pool:
        asking = pool.submit(client.elect, name, candidate="new", priority=5, wait=20.0)
        assert leader.cleanup_requested.wait(10.0), "the leader is asked"
        leader.resign()
        preferred = asking.result()
    assert client.leader(name)["leader"]["term"] == preferred.term
    preferred.resign()
