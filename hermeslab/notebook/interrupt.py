"""Kernel → Interrupt reaches a turn that runs in the background.

A ``%%hermes`` cell returns at once, so while the turn streams the kernel is
idle, and an idle ipykernel ignores SIGINT; while a cell runs it turns SIGINT
into a KeyboardInterrupt for that cell only. Either way the turn on its worker
thread would never hear of it. The relay puts a handler in front of whatever
disposition ipykernel has chosen: it tells the chat first, then does what the
kernel would have done (ignore, or raise in the running cell).

ipykernel swaps the SIGINT handler around every request it handles
(``pre_handler_hook`` / ``post_handler_hook``), so the relay wraps those two
hooks on the kernel instance and re-arms itself after each swap.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

Handler = Callable[[int, FrameType | None], Any] | int | None


class InterruptRelay:
    """Calls ``on_interrupt`` (from the signal handler: keep it tiny, take no locks) on every SIGINT."""

    def __init__(self, on_interrupt: Callable[[], None]):
        self._on_interrupt = on_interrupt
        self._kernel: Any = None
        #: (hook name, the kernel's own hook, the relay's wrapper), while attached.
        self._hooks: list[tuple[str, Any, Any]] | None = None

    @property
    def attached(self) -> bool:
        return self._hooks is not None

    def attach(self, kernel: Any) -> bool:
        """Arm on the main thread and follow ``kernel``'s handler swaps; False where signals cannot be set."""
        if self.attached:
            return True
        if threading.current_thread() is not threading.main_thread():
            return False
        if not (callable(getattr(kernel, "pre_handler_hook", None))
                and callable(getattr(kernel, "post_handler_hook", None))):
            return False
        pre, post = kernel.pre_handler_hook, kernel.post_handler_hook

        def pre_handler_hook() -> None:
            pre()
            self.arm()

        def post_handler_hook() -> None:
            post()
            self.arm()

        kernel.pre_handler_hook, kernel.post_handler_hook = pre_handler_hook, post_handler_hook
        self._kernel = kernel
        self._hooks = [("pre_handler_hook", pre, pre_handler_hook), ("post_handler_hook", post, post_handler_hook)]
        self.arm()
        return True

    def arm(self) -> None:
        """Put the relay in front of the current SIGINT disposition, unless it already is."""
        if threading.current_thread() is not threading.main_thread():
            return
        current = signal.getsignal(signal.SIGINT)
        if getattr(current, "relay", None) is self:
            return
        signal.signal(signal.SIGINT, self._in_front_of(current))

    def detach(self) -> None:
        """Give the kernel its hooks back and SIGINT the disposition the relay stood in front of."""
        if not self.attached:
            return
        kernel, hooks = self._kernel, self._hooks
        for name, original, wrapper in hooks:
            if vars(kernel).get(name) is wrapper:  # not if someone wrapped it after us: then the relay goes inert
                setattr(kernel, name, original)
        self._kernel = self._hooks = None
        # ipykernel keeps the idle handler to put back after the request it is handling now.
        if getattr(getattr(kernel, "saved_sigint_handler", None), "relay", None) is self:
            kernel.saved_sigint_handler = self._unwrapped(kernel.saved_sigint_handler)
        if threading.current_thread() is threading.main_thread():
            current = signal.getsignal(signal.SIGINT)
            if getattr(current, "relay", None) is self:
                signal.signal(signal.SIGINT, self._unwrapped(current))

    def _unwrapped(self, handler: Handler) -> Handler:
        while getattr(handler, "relay", None) is self:
            handler = handler.fallback  # type: ignore[union-attr]
        return handler

    def _in_front_of(self, fallback: Handler) -> Callable[[int, FrameType | None], Any]:
        def relay(signum: int, frame: FrameType | None) -> Any:
            if self.attached:
                self._on_interrupt()
            if fallback == signal.SIG_IGN:
                return None
            if callable(fallback):
                return fallback(signum, frame)
            raise KeyboardInterrupt  # SIG_DFL, or a handler set outside Python

        relay.relay = self  # type: ignore[attr-defined]
        relay.fallback = fallback  # type: ignore[attr-defined]
        return relay
