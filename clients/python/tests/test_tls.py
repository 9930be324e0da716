"""`https://` with `ca_file`: the client trusts only the certificate authorities it is
given, and a certificate it cannot verify fails at once rather than being retried."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import lockwarden
from support import FaultyFront


@pytest.fixture
def tls_front(url: str, tmp_path: Path) -> Iterator[tuple[FaultyFront, str]]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    front = FaultyFront(url, tls=(str(cert), str(key)))
    yield front, str(cert)
    front.close()


def test_https_with_a_ca_file(tls_front: tuple[FaultyFront, str], token: str, name: str) -> None:
    front, ca_file = tls_front
    assert front.url.startswith("https://")
    with lockwarden.Client(front.url, token=token, ca_file=ca_file) as client:
        with client.lock(name, lease=1.0) as held:
            time.sleep(0.5)  # a renewal, and the event stream, over TLS
            held.check()
            assert client.validate(name, held.fencing_token)
    with lockwarden.Client(front.url, token=token, retry_for=5.0) as stranger:
        started = time.monotonic()
        with pytest.raises(lockwarden.Unavailable, match="CERTIFICATE_VERIFY_FAILED"):
            stranger.status(name)
        assert time.monotonic() - started < 2, "not retried for retry_for"
