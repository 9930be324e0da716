"""Fixtures: the service under test (from the environment: tests/suite/python_client.rs
starts one on ZooKeeper and sets these), clients of it, fresh lock names, the admin, and a
front for the service that fails on purpose."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest

import lockwarden
from support import FaultyFront

URL = "LOCKWARDEN_TEST_URL"
TOKEN = "LOCKWARDEN_TEST_TOKEN"
ADMIN = "LOCKWARDEN_TEST_ADMIN_TOKEN"


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(
            f"{name} is not set: run these tests with `cargo test --test suite python_client`, "
            f"or set {URL}, {TOKEN} and {ADMIN} for a service with an API token and an admin "
            "token"
        )
    return value


@pytest.fixture(scope="session")
def url() -> str:
    return _env(URL)


@pytest.fixture(scope="session")
def token() -> str:
    return _env(TOKEN)


@pytest.fixture
def client(url: str, token: str) -> Iterator[lockwarden.Client]:
    with lockwarden.Client(url, token=token, retry_for=2.0) as client:
        yield client


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A fresh lock name with a `/` in it, which the client must send as %2F."""
    return f"py/{request.node.name.replace('[', '-').strip(']')}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def admin(url: str) -> Iterator[httpx.Client]:
    headers = {"authorization": f"Bearer {_env(ADMIN)}"}
    with httpx.Client(base_url=url, headers=headers, trust_env=False) as http:
        yield http


@pytest.fixture
def force_release(admin: httpx.Client) -> Callable[[str], None]:
    def release(name: str) -> None:
        answer = admin.delete(f"/v1/locks/{name.replace('/', '%2F')}")
        assert answer.status_code == 200, answer.text

    return release


@pytest.fixture
def front(url: str) -> Iterator[FaultyFront]:
    front = FaultyFront(url)
    yield front
    front.close()
