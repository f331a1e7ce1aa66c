"""Wiring: build a ready agent from a Config (provider, tools, bus, DuckDB writer).

The agent loop stays free of I/O choices; this is the one place that decides
which provider to start, where the lab database lives and what subscribes to
the event bus.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .agent import Agent
from .core.config import Config
from .core.events import EventBus
from .providers import ProviderHandle, open_provider
from .session import Session
from .store import StoreWriter, default_lab_path
from .tools import builtin_registry
from .tools.todo import TodoStore


def lab_path(config: Config) -> Path:
    return Path(config.store.path) if config.store.path else default_lab_path()


class Runtime:
    """Everything one conversation needs. Use as a context manager, or call ``close()``."""

    def __init__(self, config: Config | None = None, *, source: str = "cli", bus: EventBus | None = None,
                 session: Session | None = None):
        self.config = config or Config()
        self.bus = bus or EventBus()
        self.writer: StoreWriter | None = None
        if self.config.store.enabled:
            self.writer = StoreWriter(lab_path(self.config), redact=_redactor(self.config))
            self.writer.attach(self.bus)
        self.provider_handle: ProviderHandle = open_provider(self.config)
        self.todos = TodoStore()
        self.tools = builtin_registry(self.config.tools, todo_store=self.todos)
        self.agent = Agent(self.provider_handle.provider, config=self.config, tools=self.tools, bus=self.bus,
                           session=session, source=source)

    @property
    def lab_path(self) -> Path:
        return lab_path(self.config)

    def close(self) -> None:
        """End the session, write everything queued, stop the local server."""
        try:
            self.agent.close()
        finally:
            try:
                if self.writer is not None:
                    self.writer.close()
            finally:
                self.provider_handle.close()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _redactor(config: Config):
    """Secrets never reach the log when redaction is on (the default)."""
    if not config.compression.redact:
        return None
    from .context.redact import redact

    return redact
