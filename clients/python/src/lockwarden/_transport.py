"""Calls to the service: one try (``once``), or tries until a non-transient answer or a
deadline (``call``), over httpx, blocking or async. The blocking transport is shared by
threads and opens its own connections in a forked child."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from . import _fork
from ._protocol import (
    CALL_TIMEOUT,
    CONNECT_TIMEOUT,
    Answer,
    Retries,
    base_url,
    headers_for,
    verify_for,
)


@dataclass(frozen=True)
class Config:
    base: str
    token: str | None
    retry_for: float
    ca_file: str | os.PathLike[str] | None

    @classmethod
    def of(
        cls,
        url: str,
        token: str | None,
        retry_for: float,
        ca_file: str | os.PathLike[str] | None,
    ) -> Config:
        if isinstance(retry_for, bool) or not isinstance(retry_for, (int, float)) or retry_for < 0:
            raise ValueError(f"retry_for must be a number of seconds >= 0, not {retry_for!r}")
        return cls(base_url(url), token, float(retry_for), ca_file)

    def httpx_options(self) -> dict[str, Any]:
        return {
            "base_url": self.base,
            "headers": headers_for(self.token),
            "verify": verify_for(self.ca_file),
            "timeout": timeout(CALL_TIMEOUT),
            # Each held lock keeps a connection open for its event stream: a cap on
            # connections would make renewals wait for one.
            "limits": httpx.Limits(max_connections=None, max_keepalive_connections=20),
        }

    def deadline(self) -> float:
        return time.monotonic() + self.retry_for


def timeout(seconds: float, read: float | None = None) -> httpx.Timeout:
    """At most ``seconds`` for a try (connecting: at most ``CONNECT_TIMEOUT`` of it)."""
    seconds = max(seconds, 0.001)
    return httpx.Timeout(seconds, connect=min(CONNECT_TIMEOUT, seconds), read=read or seconds)


class SyncTransport:
    def __init__(self, config: Config) -> None:
        self.config = config
        self._guard = threading.Lock()
        self._http: httpx.Client | None = None
        self._closed = False
        _fork.register(self)

    def http(self) -> httpx.Client:
        http = self._http
        if http is not None:
            return http
        with self._guard:
            if self._closed:
                raise RuntimeError("the lockwarden client is closed")
            if self._http is None:
                self._http = httpx.Client(**self.config.httpx_options())
            return self._http

    def after_fork_in_child(self) -> None:
        # The parent's connections stay the parent's: a child that wrote to them would mix
        # its requests into the parent's. They are dropped without being closed.
        self._guard = threading.Lock()
        self._http = None

    def close(self) -> None:
        with self._guard:
            self._closed = True
            http, self._http = self._http, None
        if http is not None:
            http.close()

    def once(
        self, method: str, path: str, body: Any = None, seconds: float = CALL_TIMEOUT
    ) -> Answer:
        sent_at = time.monotonic()
        response = self.http().request(method, path, json=body, timeout=timeout(seconds))
        return Answer.of(response, sent_at)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        seconds: float = CALL_TIMEOUT,
        deadline: float | None = None,
    ) -> Answer:
        """Tries until an answer that is not transient, or raises once ``deadline``
        (default: ``retry_for`` from now) would pass. Only for calls safe to repeat."""
        retries = Retries(deadline if deadline is not None else self.config.deadline())
        while True:
            try:
                answer = self.once(method, path, body, seconds)
            except httpx.TransportError as error:
                time.sleep(retries.pause_after(error))
                continue
            if not answer.transient:
                return answer
            time.sleep(retries.pause_after(answer))


class AsyncTransport:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.http = httpx.AsyncClient(**config.httpx_options())

    async def once(
        self, method: str, path: str, body: Any = None, seconds: float = CALL_TIMEOUT
    ) -> Answer:
        sent_at = time.monotonic()
        response = await self.http.request(method, path, json=body, timeout=timeout(seconds))
        return Answer.of(response, sent_at)

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        seconds: float = CALL_TIMEOUT,
        deadline: float | None = None,
    ) -> Answer:
        """As ``SyncTransport.call``."""
        retries = Retries(deadline if deadline is not None else self.config.deadline())
        while True:
            try:
                answer = await self.once(method, path, body, seconds)
            except httpx.TransportError as error:
                await asyncio.sleep(retries.pause_after(error))
                continue
            if not answer.transient:
                return answer
            await asyncio.sleep(retries.pause_after(answer))
