"""`https://` with `ca_file`: the client trusts only the certificate authorities it is
given, and a certificate it cannot verify fails at once rather than being retried. Against
the service's own HTTPS (`serve --tls-cert`) when the test command names one
(`LOCKWARDEN_TEST_TLS_URL`, `LOCKWARDEN_TEST_TLS_CA`), else through a TLS front made here."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import lockwarden
from support import FaultyFront


@pytest.fixture
def tls_front(url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if "LOCKWARDEN_TEST_TLS_URL" in os.environ:
        yield os.environ["LOCKWARDEN_TEST_TLS_URL"], os.environ["LOCKWARDEN_TEST_TLS_CA"]
        return
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    front = FaultyFront(url, tls=(str(cert), str(key)))
    yield front.url, str(cert)
    front.close()


def test_https_with_a_ca_file(tls_front: tuple[str, str], token: str, name: str) -> None:
    https_url, ca_file = tls_front
    assert https_url.startswith("https://")
    with lockwarden.Client(https_url, token=token, ca_file=ca_file) as client:
        with client.lock(name, lease=1.0) as held:
            time.sleep(0.5)  # a renewal, and the event stream, over TLS
            held.check()
            assert client.validate(name, held.fencing_token)
    with lockwarden.Client(https_url, token=token, retry_for=5.0) as stranger:
        started = time.monotonic()
        with pytest.raises(lockwarden.Unavailable, match="CERTIFICATE_VERIFY_FAILED"):
            stranger.status(name)
        assert time.monotonic() - started < 2, "not retried for retry_for"
