"""Reaching one MCP server: a command over stdio or a streamable-HTTP URL, with the process's stderr kept.

A connection (``hermeslab.tools.mcp.connection``) opens a fresh transport on
every (re)connect, learns from ``EndWatch`` the moment the server goes away,
and quotes the end of the server's stderr when it explains why a start or a
connection failed. Opening the streams and keeping that stderr live here, so
the connection logic deals only in sessions.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import AsyncExitStack
from typing import IO, Any, Callable

import anyio
import httpx2
from mcp import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from hermeslab.core.mcp_config import MCPServerConfig
from hermeslab.tools.mcp.variables import expanded_settings


class EndWatch:
    """The transport's read stream, reporting when it ends: the server went away."""

    def __init__(self, inner: Any, on_end: Callable[[], None]):
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> "EndWatch":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> "EndWatch":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


class ServerTransport:
    """Opens the streams to one configured server; a stdio server's stderr goes to a file kept between connects."""

    def __init__(self, name: str, config: MCPServerConfig):
        self.name = name
        self.config = config
        self._stderr: IO[str] | None = None

    async def open(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        """The (read, write) streams of a new connection, closed with ``stack``; variables are expanded now."""
        config = expanded_settings(self.name, self.config, os.environ)
        if config.url is not None:
            client = await stack.enter_async_context(httpx2.AsyncClient(
                headers=config.headers,
                timeout=httpx2.Timeout(config.connect_timeout, read=max(300.0, config.timeout))))
            return await stack.enter_async_context(streamable_http_client(config.url, http_client=client))
        if self._stderr is None:
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self._stderr.seek(0)
        self._stderr.truncate()
        assert config.command is not None
        parameters = StdioServerParameters(command=config.command, args=config.args, env=config.env or None)
        return await stack.enter_async_context(stdio_client(parameters, errlog=self._stderr))

    def stderr_tail(self, limit: int = 400) -> str:
        """The last few non-empty lines the current (or last) server process wrote to stderr, on one line."""
        if self._stderr is None or self._stderr.closed:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        lines = [line.strip() for line in self._stderr.read().splitlines() if line.strip()]
        text = " | ".join(lines[-4:])
        return text if len(text) <= limit else "..." + text[-limit:]

    def close(self) -> None:
        """Drop the stderr file; the server's task calls this when it ends for good."""
        if self._stderr is not None:
            self._stderr.close()
