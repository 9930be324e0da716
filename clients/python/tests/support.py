"""What the tests share: polling to a deadline, and an HTTP front that the tests put between
the client and the service, to answer an acquire 503, lose the answer to one (the service
got it and answered; the client gets a closed connection), or go silent (nothing passes
either way, streams included)."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx


def eventually(check: Callable[[], bool], within: float, what: str) -> None:
    """Polls `check` until it holds, or fails after `within` seconds."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        time.sleep(0.02)


FORWARDED = ("authorization", "content-type", "accept", "last-event-id")
NOT_RELAYED = ("transfer-encoding", "connection", "content-length")


class FaultyFront:
    def __init__(self, target: str, tls: tuple[str, str] | None = None) -> None:
        """A front for the service at `target`; over HTTPS with `tls` (a PEM certificate
        and its key)."""
        self.target = target
        #: What to do with the next acquires, in order: "503" or "drop".
        self.acquire_faults: list[str] = []
        #: (method, path, body) of every request, in order.
        self.seen: list[tuple[str, str, bytes]] = []
        #: The service's answers that the front did not pass on.
        self.dropped: list[Any] = []
        self.silent = False
        self._closed = False
        self._http = httpx.Client(timeout=httpx.Timeout(30.0, read=None), trust_env=False)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.front = self
        self._scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self._scheme = "https"
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._closed = True
        self._server.shutdown()
        self._server.server_close()
        self._http.close()

    def quiet(self) -> bool:
        """Waits while the front is silent; whether it is (still) open."""
        while self.silent and not self._closed:
            time.sleep(0.02)
        return not self._closed

    def fault_for(self, path: str) -> str | None:
        if path.endswith("/acquire") and self.acquire_faults:
            return self.acquire_faults.pop(0)
        return None


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    front: FaultyFront


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.forward()

    def do_POST(self) -> None:
        self.forward()

    def do_DELETE(self) -> None:
        self.forward()

    def forward(self) -> None:
        front = self.server.front
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        front.seen.append((self.command, self.path, body))
        if front.silent:
            front.quiet()
            return  # the connection closes without an answer
        fault = front.fault_for(self.path)
        if fault == "503":
            payload = b'{"error":{"code":"store_unavailable","message":"injected"}}'
            self.send_response(503)
            self.send_header("content-type", "application/json")
            self.send_header("retry-after", "0")
            self.end_headers()
            self.wfile.write(payload)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() in FORWARDED}
        request = front._http.build_request(
            self.command, front.target + self.path, content=body, headers=headers
        )
        response = front._http.send(request, stream=True)
        try:
            if fault == "drop":
                front.dropped.append(json.loads(response.read()))
                return
            self.send_response(response.status_code)
            for key, value in response.headers.items():
                if key.lower() not in NOT_RELAYED:
                    self.send_header(key, value)
            self.end_headers()
            for chunk in response.iter_raw():
                if not front.quiet():
                    return
                self.wfile.write(chunk)
                self.wfile.flush()
        except (OSError, httpx.HTTPError):
            pass
        finally:
            response.close()
