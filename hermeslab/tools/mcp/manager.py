"""``MCPManager``: every configured MCP server connected in the background, its tools in a ToolRegistry.

The agent loop and the tool executor are synchronous; the MCP SDK is async.
The manager runs one event loop in a background thread that owns every
server's connection (``hermeslab.tools.mcp.connection``) and answers tool
calls through a blocking facade. It keeps the registry in step with each
server's latest tool listing, and turns state changes into ``Notice`` events
(or log records when there is no bus).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import mcp_types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal

from hermeslab.core.mcp_config import MCPServerConfig
from hermeslab.core.events import EventBus, Notice
from hermeslab.tools.mcp.connection import ServerConnection
from hermeslab.tools.mcp.names import prefixed_name
from hermeslab.tools.mcp.schema import normalize_schema
from hermeslab.tools.registry import Handler, Tool, ToolError, ToolRegistry

log = logging.getLogger(__name__)

#: Extra seconds the blocking facade waits beyond the call and reconnect budgets.
_FACADE_GRACE = 5.0


@dataclass(frozen=True)
class ServerStatus:
    """One server as ``MCPManager.status()`` reports it."""

    name: str
    #: ``connecting``, ``ready``, ``reconnecting``, ``failed`` (never came up) or ``closed``.
    state: str
    #: The names its tools are registered under.
    tools: tuple[str, ...]
    #: Why it is not ready (None when it is).
    error: str | None
    #: Completed handshakes: 1 after a clean start, more after reconnects.
    connects: int


@dataclass(frozen=True)
class _Registered:
    server: str
    remote_name: str
    tool: Tool


class MCPManager:
    """The configured MCP servers, connected in the background, with their tools in a ToolRegistry.

    ``start(registry)`` connects every server at once and returns when each has
    completed its handshake or failed (a server that fails to start is reported
    and skipped; the others register). Events go to ``bus`` with the session
    id ``session_id()`` returns at the time.
    """

    def __init__(self, servers: Mapping[str, MCPServerConfig | Mapping[str, Any]], *,
                 bus: EventBus | None = None, session_id: Callable[[], str] | None = None):
        if bus is not None and session_id is None:
            raise ValueError("events need a session: pass session_id together with bus")
        if not isinstance(servers, Mapping):
            raise TypeError(f"servers must map names to MCP server settings, got {type(servers).__name__}")
        self._servers = {name: ServerConnection(name, MCPServerConfig.from_mapping(name, config),
                                       on_tools=self._apply_listing, notify=self._notify)
                         for name, config in servers.items()}
        self._bus = bus
        self._session_id = session_id
        self._lock = threading.Lock()
        self._registry: ToolRegistry | None = None
        self._registered: dict[str, _Registered] = {}
        self._portal: BlockingPortal | None = None
        self._portal_context: Any = None
        self._tasks: list[concurrent.futures.Future[Any]] = []

    def start(self, registry: ToolRegistry) -> None:
        """Connect every server and register its tools into ``registry``; never raises for a bad server."""
        if self._portal_context is not None:
            raise RuntimeError("this MCPManager was already started")
        self._registry = registry
        self._portal_context = start_blocking_portal(name="hermeslab-mcp")
        self._portal = self._portal_context.__enter__()
        started = time.monotonic()
        self._tasks = [self._portal.start_task_soon(server.run) for server in self._servers.values()]
        for server in self._servers.values():  # they connect at the same time: wait for each until its deadline
            server.settled.wait(max(0.0, started + server.config.connect_timeout + _FACADE_GRACE - time.monotonic()))

    def call(self, server: str, tool: str, arguments: dict[str, Any] | None = None, *,
             timeout: float | None = None) -> str:
        """Call ``tool`` (the server's own name for it) and return the text; failures raise ToolError."""
        target = self._servers.get(server)
        if target is None:
            raise ToolError(f"no MCP server named {server!r}; configured: {', '.join(self._servers) or 'none'}")
        limit = target.config.timeout if timeout is None else timeout
        if not limit > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        portal = self._portal
        if portal is None:
            raise ToolError(f"MCP server {server!r} is not running (the manager is not started or is closed)")
        try:
            future = portal.start_task_soon(target.call, tool, dict(arguments or {}), limit)
        except RuntimeError:
            raise ToolError(f"MCP server {server!r} is closed") from None
        try:
            return future.result(timeout=limit + target.config.connect_timeout + _FACADE_GRACE)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError(f"MCP tool {tool!r} on server {server!r} did not answer within {limit:g} s") from None
        except concurrent.futures.CancelledError:
            raise ToolError(f"the call to MCP tool {tool!r} on server {server!r} was cancelled") from None

    def status(self) -> dict[str, ServerStatus]:
        with self._lock:
            names = {name: entry.server for name, entry in self._registered.items()}
        return {name: ServerStatus(name, server.state, tuple(n for n, s in names.items() if s == name),
                                   server.error, server.connects)
                for name, server in self._servers.items()}

    def close(self) -> None:
        """Disconnect every server (stdio servers are shut down) and take their tools out of the registry."""
        portal, context = self._portal, self._portal_context
        if portal is None:
            return
        self._portal = None
        try:
            portal.call(self._stop_servers)
            concurrent.futures.wait(self._tasks, timeout=max(
                (s.config.connect_timeout for s in self._servers.values()), default=0.0) + _FACADE_GRACE)
        finally:
            context.__exit__(None, None, None)
            with self._lock:
                for name in list(self._registered):
                    self._unregister(name)

    def __enter__(self) -> "MCPManager":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # ---- on the loop thread

    async def _stop_servers(self) -> None:
        for server in self._servers.values():
            server.stop()

    def _apply_listing(self, server: ServerConnection, tools: list[types.Tool]) -> None:
        """Make the registry hold exactly this listing for ``server``; unchanged tools keep their place."""
        skipped: list[str] = []
        with self._lock:
            registry = self._registry
            if registry is None:
                return
            mine = {name for name, entry in self._registered.items() if entry.server == server.name}
            taken = set(registry.names()) - mine
            wanted: dict[str, _Registered] = {}
            for remote in tools:
                try:
                    name = prefixed_name(server.name, remote.name, taken)
                    wanted[name] = _Registered(server.name, remote.name, self._tool(name, server.name, remote))
                    taken.add(name)
                except ValueError as exc:
                    skipped.append(f"{remote.name} ({exc})")
            for name in mine:
                if name not in wanted or not _same_tool(wanted[name].tool, self._registered[name].tool):
                    self._unregister(name)
            for name, entry in wanted.items():
                if name in self._registered:
                    continue
                try:
                    registry.register(entry.tool)
                except ValueError as exc:  # the name was taken meanwhile by a tool registered elsewhere
                    skipped.append(f"{entry.remote_name} ({exc})")
                    continue
                self._registered[name] = entry
        if skipped:
            self._notify("warning", f"MCP server {server.name!r}: tools left out: {'; '.join(skipped)}")

    def _unregister(self, name: str) -> None:
        entry = self._registered.pop(name)
        if self._registry is not None and self._registry.get(name) is entry.tool:
            self._registry.unregister(name)

    def _tool(self, name: str, server: str, remote: types.Tool) -> Tool:
        hints = remote.annotations
        read_only = bool(hints and hints.read_only_hint)
        description = (remote.description or remote.title or "").strip() or f"{remote.name} (MCP server {server})"
        return Tool(name=name, description=description, parameters=normalize_schema(remote.input_schema),
                    handler=self._handler(server, remote.name), read_only=read_only,
                    idempotent=read_only or bool(hints and hints.idempotent_hint))

    def _handler(self, server: str, tool: str) -> Handler:
        def handle(arguments: dict[str, Any]) -> str:
            return self.call(server, tool, arguments)

        return handle

    def _notify(self, level: str, text: str) -> None:
        """A Notice on the bus; without one, a log record at the same level."""
        if self._bus is None or self._session_id is None:
            log.log(logging.ERROR if level == "error" else logging.WARNING if level == "warning" else logging.INFO,
                    "%s", text)
            return
        try:
            session_id = self._session_id()
        except Exception:  # the caller's callback must not stop a server's connection task
            log.exception("no session id for the MCP notice %r", text)
            return
        self._bus.publish(Notice(session_id=session_id, level=level, text=text))


def _same_tool(a: Tool, b: Tool) -> bool:
    return (a.schema(), a.read_only, a.idempotent) == (b.schema(), b.read_only, b.idempotent)
