"""One model endpoint, shared by the user's turns and the background review: turns first.

A local server often has a single slot: a second request either waits behind
the first or, on some servers, cuts the stream that was running. So the review
never calls an endpoint while a turn is using it. Each endpoint (one base URL)
has an ``EndpointGate``: a turn announces itself when it starts and is gone when
it finishes; a review call goes in only while no turn is announced and no other
background call is running. A turn that starts while a review call is in
flight waits for that one call (a request already sent cannot be taken back
from the server's slot, so cancelling would not free it any sooner), and the
review's next call waits until the turn is over: the review pauses instead of
losing the work it has done.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

from hermeslab.core.provider import ChatRequest, ChatResponse, Provider, StreamDelta


class EndpointBusy(RuntimeError):
    """A background call waited too long for the endpoint to be free of turns (not a fault to retry)."""


class EndpointGate:
    """Who may use one endpoint now: announced turns, or one background call between them."""

    def __init__(self, key: str):
        self.key = key
        self._cond = threading.Condition()
        self._turns: set[int] = set()
        self._background = 0

    @property
    def background_busy(self) -> bool:
        """Whether a background call is in flight right now."""
        with self._cond:
            return self._background > 0

    def turn_started(self, holder: object, timeout: float | None = None) -> bool:
        """Announce ``holder``'s turn and wait for a background call in flight; False if it outlasted ``timeout``.

        Announcing again (a turn that ended without a word) is harmless: a holder has at most one turn.
        """
        with self._cond:
            self._turns.add(id(holder))
            return self._cond.wait_for(lambda: self._background == 0, timeout)

    def turn_finished(self, holder: object) -> None:
        with self._cond:
            self._turns.discard(id(holder))
            self._cond.notify_all()

    @contextmanager
    def background(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the endpoint for one background call, once no turn is announced and no other one runs."""
        with self._cond:
            if not self._cond.wait_for(lambda: not self._turns and self._background == 0, timeout):
                raise EndpointBusy(f"{self.key} stayed busy with the user's turns for {timeout:g} s; "
                                   "the background call was not sent")
            self._background += 1
        try:
            yield
        finally:
            with self._cond:
                self._background -= 1
                self._cond.notify_all()


_GATES: dict[str, EndpointGate] = {}
_GATES_LOCK = threading.Lock()


def endpoint_key(provider: Provider) -> str:
    """The endpoint a provider talks to: its base URL, or the provider object itself when it has none."""
    base_url = getattr(provider, "base_url", None)
    if isinstance(base_url, str) and base_url:
        return base_url.rstrip("/")
    return f"{type(provider).__name__}@{id(provider):x}"


def gate_for(provider: Provider) -> EndpointGate:
    """The process-wide gate of ``provider``'s endpoint (every agent on one base URL shares it)."""
    key = endpoint_key(provider)
    with _GATES_LOCK:
        gate = _GATES.get(key)
        if gate is None:
            gate = _GATES[key] = EndpointGate(key)
        return gate


class GatedProvider:
    """A provider whose every call first waits for its endpoint to be free of turns (for background work)."""

    def __init__(self, provider: Provider, gate: EndpointGate, *, timeout: float | None = None):
        self.provider, self.gate, self.timeout = provider, gate, timeout
        self.name = provider.name

    def complete(self, request: ChatRequest) -> ChatResponse:
        with self.gate.background(self.timeout):
            return self.provider.complete(request)

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        with self.gate.background(self.timeout):
            yield from self.provider.stream(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.provider, name)
