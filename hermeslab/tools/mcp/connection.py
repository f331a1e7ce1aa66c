"""One MCP server's connection: handshake, heartbeat, reconnects and tool calls, on the manager's event loop.

Each configured server is one long-lived task. It connects, completes the
handshake within ``connect_timeout`` and hands the tool listing to the
manager; then it pings the server every ``keepalive_interval``. Two missed
pings in a row, or the connection ending, mark the server unavailable and
start a reconnect that lists the tools again; a
``notifications/tools/list_changed`` re-lists at once. A call that arrives
while the server is away waits up to ``connect_timeout`` for the reconnect
instead of failing at once. Every failure becomes a ``ToolError`` (or a
``TransientToolError`` when retrying may help) with a one-line reason.
"""

from __future__ import annotations

import logging
import math
import threading
from contextlib import AsyncExitStack
from typing import Any, Callable

import anyio
import mcp_types as types
from mcp import ClientSession, MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from hermeslab import __version__
from hermeslab.core.mcp_config import MCPServerConfig
from hermeslab.tools.mcp.results import result_text
from hermeslab.tools.mcp.transport import EndWatch, ServerTransport
from hermeslab.tools.mcp.variables import UnsetVariable
from hermeslab.tools.registry import ToolError, TransientToolError

log = logging.getLogger(__name__)

#: Pings in a row that may go unanswered before the server counts as unavailable.
MISSED_HEARTBEATS = 2
#: Longest pause between two reconnect attempts; the first one after a loss starts at once.
MAX_RECONNECT_DELAY = 30.0
#: Pages of ``tools/list`` followed before the listing counts as complete.
MAX_LIST_PAGES = 100

_CLIENT_INFO = types.Implementation(name="hermeslab", version=__version__)


class ServerConnection:
    """One configured server, driven by a task on the manager's event loop.

    ``on_tools`` receives every complete tool listing; ``notify(level, text)``
    reports state changes. Both run on the loop thread.
    """

    def __init__(self, name: str, config: MCPServerConfig, *,
                 on_tools: Callable[["ServerConnection", list[types.Tool]], None],
                 notify: Callable[[str, str], None]):
        self.name = name
        self.config = config
        self.state = "connecting"
        self.error: str | None = None
        self.connects = 0
        self.session: ClientSession | None = None
        #: Set once the first connection attempt has ended, whichever way.
        self.settled = threading.Event()
        self._on_tools = on_tools
        self._notify = notify
        self._flags: set[str] = set()
        self._wake: anyio.Event | None = None
        self._ready: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._transport = ServerTransport(name, config)

    # ---- lifecycle (runs as one task)

    async def run(self) -> None:
        self._wake, self._ready = anyio.Event(), anyio.Event()
        try:
            with anyio.CancelScope() as self._scope:
                if "close" not in self._flags:
                    await self._connect_until_closed()
        finally:
            if self.state != "failed":
                self.state = "closed"
            self.settled.set()
            self._transport.close()

    async def _connect_until_closed(self) -> None:
        delay = 0.0
        while True:
            connected, reason = await self._connect_once()
            if "close" in self._flags:
                return
            if self.connects == 0:
                self._fail_start(reason)
                return
            self.error = reason
            if connected:
                delay = 0.0
            else:
                log.info("MCP server %r: reconnect failed: %s", self.name, reason)
                delay = min(max(1.0, delay * 2), MAX_RECONNECT_DELAY)
            await self._pause(delay)

    async def _connect_once(self) -> tuple[bool, str]:
        """One connection from spawn to loss: (did the handshake complete, why it ended)."""
        self._flags.discard("lost")
        connected = False
        try:
            async with AsyncExitStack() as stack:
                read, write = await self._transport.open(stack)
                session = await stack.enter_async_context(ClientSession(
                    EndWatch(read, lambda: self._poke("lost")), write,
                    read_timeout_seconds=self.config.connect_timeout,
                    message_handler=self._on_message, client_info=_CLIENT_INFO))
                try:
                    with anyio.fail_after(self.config.connect_timeout):
                        await session.initialize()
                        tools = await list_tools(session)
                except TimeoutError:
                    reason = f"no answer to the MCP handshake within {self.config.connect_timeout:g} s"
                    if self.connects == 0:
                        self._fail_start(reason)  # before the slow shutdown of a process that hangs
                    return False, reason
                connected = True
                self._go_live(session, tools)
                try:
                    reason = await self._supervise(session)
                except Exception as exc:
                    reason = self._describe(exc)
                finally:
                    self.session = None
                    self._ready = anyio.Event()
                self._lose(reason)
                return True, reason
        except Exception as exc:  # every failure of the connection becomes the reason it ended
            return connected, self._describe(exc)

    def _fail_start(self, reason: str) -> None:
        if self.state == "failed":
            return
        self.state, self.error = "failed", reason
        self._notify("error", f"MCP server {self.name!r} failed to start: {reason}; its tools are not available")
        self.settled.set()

    def _go_live(self, session: ClientSession, tools: list[types.Tool]) -> None:
        first = self.connects == 0
        self.session, self.state, self.error = session, "ready", None
        self._flags.discard("reconnect")
        self.connects += 1
        self._on_tools(self, tools)
        assert self._ready is not None
        self._ready.set()
        word = "connected" if first else "reconnected"
        self._notify("info", f"MCP server {self.name!r} {word} with {len(tools)} tools")
        self.settled.set()

    def _lose(self, reason: str) -> None:
        """The live connection ended (reported at once, before the old process is taken down)."""
        if "close" in self._flags:
            return
        self.state, self.error = "reconnecting", reason
        self._notify("warning", f"MCP server {self.name!r} disconnected: {reason}; reconnecting")

    async def _supervise(self, session: ClientSession) -> str:
        """Keep the connection until it is lost, the heartbeat fails or the manager closes; say why it ended."""
        interval = self.config.keepalive_interval
        ping_timeout = min(self.config.connect_timeout, interval) if interval else 0.0
        next_ping = anyio.current_time() + interval if interval else math.inf
        missed = 0
        while True:
            if "lost" in self._flags:
                return self._with_stderr("the server closed the connection")
            if "refresh" in self._flags:
                self._flags.discard("refresh")
                await self._refresh(session)
            assert self._wake is not None
            with anyio.move_on_after(next_ping - anyio.current_time()):
                await self._wake.wait()
            self._wake = anyio.Event()
            if anyio.current_time() < next_ping or "lost" in self._flags:
                continue
            try:
                with anyio.fail_after(ping_timeout):
                    await session.send_ping()
                missed = 0
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    return self._with_stderr("the server closed the connection")
                missed += 1
            except Exception:  # a timeout or a broken transport: one missed heartbeat
                missed += 1
            if missed >= MISSED_HEARTBEATS:
                return f"{missed} heartbeats in a row went unanswered"
            next_ping = anyio.current_time() + interval

    async def _refresh(self, session: ClientSession) -> None:
        try:
            with anyio.fail_after(self.config.connect_timeout):
                tools = await list_tools(session)
        except Exception as exc:
            self._notify("warning", f"MCP server {self.name!r} announced new tools but listing them failed: "
                                    f"{self._describe(exc)}")
            return
        self._on_tools(self, tools)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._poke("refresh")
        elif isinstance(message, Exception):
            log.info("MCP server %r: transport error: %s", self.name, message)

    async def _pause(self, seconds: float) -> None:
        """Wait before the next attempt; a call that needs the server cuts the wait short."""
        deadline = anyio.current_time() + seconds
        while "reconnect" not in self._flags and anyio.current_time() < deadline:
            assert self._wake is not None
            with anyio.move_on_after(deadline - anyio.current_time()):
                await self._wake.wait()
            self._wake = anyio.Event()
        self._flags.discard("reconnect")

    def _poke(self, flag: str) -> None:
        self._flags.add(flag)
        if self._wake is not None:
            self._wake.set()

    def stop(self) -> None:
        """Close the connection (on the loop thread); the stdio transport still shuts the process down."""
        self._poke("close")
        if self._scope is not None:
            self._scope.cancel()

    # ---- tool calls (each runs as its own task)

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> str:
        session = await self._live_session()
        try:
            result = await session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._poke("lost")
                raise TransientToolError(
                    f"the connection to MCP server {self.name!r} closed during the call to {tool!r}, which may "
                    "or may not have run; the server is reconnecting") from None
            if exc.code == REQUEST_TIMEOUT:
                raise ToolError(f"MCP tool {tool!r} on server {self.name!r} did not answer within {timeout:g} s; "
                                "the call was cancelled") from None
            raise ToolError(f"MCP server {self.name!r} refused the call to {tool!r}: {exc.message}") from None
        except Exception as exc:  # e.g. a result that breaks the tool's own output schema
            raise ToolError(f"MCP tool {tool!r} on server {self.name!r} failed: "
                            f"{self._describe(exc, stderr=False)}") from None
        text = result_text(result)
        if result.is_error:
            raise ToolError(f"MCP tool {tool!r} on server {self.name!r} reported an error: "
                            f"{text or 'no details given'}")
        return text

    async def _live_session(self) -> ClientSession:
        """The connected session, waiting up to ``connect_timeout`` for a reconnect in progress."""
        if self.state == "failed":
            raise ToolError(f"MCP server {self.name!r} is not available: it failed to start ({self.error})")
        if self.state == "closed" or "close" in self._flags:
            raise ToolError(f"MCP server {self.name!r} is closed")
        if not self._live():
            self._poke("reconnect")
            with anyio.move_on_after(self.config.connect_timeout):
                while not self._live():
                    ready = self._ready
                    assert ready is not None
                    if ready.is_set():  # the old session is still being taken down
                        await anyio.sleep(0.01)
                    else:
                        await ready.wait()
        session = self.session
        if session is None or not self._live():
            raise TransientToolError(f"MCP server {self.name!r} is unavailable ({self.error}); "
                                     "it keeps reconnecting in the background")
        return session

    def _live(self) -> bool:
        return self.session is not None and "lost" not in self._flags

    # ---- diagnostics

    def _describe(self, exc: BaseException, *, stderr: bool = True) -> str:
        """One line that says what failed, with the end of the server's stderr when it has one."""
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        if isinstance(exc, MCPError):
            text = "the server closed the connection" if exc.code == CONNECTION_CLOSED else exc.message
        elif isinstance(exc, TimeoutError):
            text = "timed out"
        elif isinstance(exc, UnsetVariable):
            text = str(exc)
        elif isinstance(exc, FileNotFoundError) and self.config.command is not None:
            text = f"command {self.config.command!r} not found"
        elif isinstance(exc, OSError) and exc.strerror and self.config.command is not None:
            text = f"could not run {self.config.command!r}: {exc.strerror}"
        else:
            text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return self._with_stderr(text) if stderr else text

    def _with_stderr(self, text: str) -> str:
        tail = self._transport.stderr_tail()
        return f"{text}; its stderr ends with: {tail}" if tail else text


async def list_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool the server lists, following pagination."""
    result = await session.list_tools()
    tools = list(result.tools)
    for _ in range(MAX_LIST_PAGES):
        if result.next_cursor is None:
            return tools
        result = await session.list_tools(params=types.PaginatedRequestParams(cursor=result.next_cursor))
        tools.extend(result.tools)
    raise RuntimeError(f"the tool listing went on for more than {MAX_LIST_PAGES} pages")
