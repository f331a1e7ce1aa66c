"""MCP servers as tools: connect the configured servers and offer their tools in the registry.

The agent loop and the tool executor are synchronous; the MCP SDK is async.
``MCPManager`` runs one event loop in a background thread that owns every
server's connection, and answers tool calls through a blocking facade.

Each server is a long-lived task that connects (a command over stdio, or a
streamable-HTTP URL), completes the handshake within ``connect_timeout``,
lists the tools and registers them as ``<server>__<tool>`` — the OpenAI
tool-name pattern has no ``.``, and server names never contain ``__``, so the
boundary stays visible. The task then pings the server every
``keepalive_interval``; two missed pings in a row, or the connection ending,
mark the server unavailable and start a reconnect that lists the tools again.
A ``notifications/tools/list_changed`` re-lists at once.

``${NAME}`` in a server's command, args, env values, URL or header values is
replaced by that environment variable when the server is (re)connected, so a
config file can name a secret without holding it (and the config's hash and
the log never see it); an unset variable fails the start with its name.

Whatever goes wrong (a server that is down, a call that times out, an error
result, arguments the server rejects) reaches the model as the text of a tool
error, never as an exception out of the loop. Connections, losses and
reconnections are published as ``Notice`` events.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import logging
import math
import os
import re
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import IO, Any, Callable, Mapping

import anyio
import httpx2
import mcp_types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from hermeslab import __version__
from hermeslab.core.config import MCPServerConfig
from hermeslab.core.events import EventBus, Notice
from hermeslab.tools.registry import Handler, Tool, ToolError, ToolRegistry, TransientToolError

log = logging.getLogger(__name__)

__all__ = ["MCPManager", "ServerStatus", "normalize_schema", "prefixed_name", "result_text"]

#: Pings in a row that may go unanswered before the server counts as unavailable.
MISSED_HEARTBEATS = 2
#: Longest pause between two reconnect attempts; the first one after a loss starts at once.
MAX_RECONNECT_DELAY = 30.0
#: Pages of ``tools/list`` followed before the listing counts as complete.
MAX_LIST_PAGES = 100
#: Extra seconds the blocking facade waits beyond the call and reconnect budgets.
_FACADE_GRACE = 5.0

_CLIENT_INFO = types.Implementation(name="hermeslab", version=__version__)
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MAX_TOOL_NAME = 64


# ---------------------------------------------------------------- pure helpers


_TYPE_ALIASES = {
    "int": "integer", "long": "integer",
    "float": "number", "double": "number", "decimal": "number",
    "bool": "boolean", "str": "string", "text": "string",
    "dict": "object", "map": "object", "list": "array", "tuple": "array",
}
_JSON_TYPES = {"object", "array", "string", "integer", "number", "boolean"}
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")


def normalize_schema(schema: Any) -> dict[str, Any]:
    """An MCP tool's input schema in the form chat-completions APIs and the argument check accept.

    Servers send what their framework produced. Some providers reject type
    lists, ``null`` branches and objects without ``properties``; some servers
    write ``int`` for ``integer`` or leave out ``type``. The result: nullable
    unions reduced to their non-null form (optional stays expressed by
    ``required``), ``integer`` with ``number`` merged into ``number``, type
    aliases spelled out and unknown type names dropped, ``type: object`` filled
    in where ``properties`` or ``required`` imply it, ``properties`` present on
    every object and ``required`` limited to declared properties. The root is
    always an object schema. The input is not modified.
    """
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    node = _normalize_node(schema)
    if node.get("type") != "object":
        kept = {key: value for key, value in schema.items() if key not in ("type", "anyOf", "oneOf")}
        node = _normalize_node({**kept, "type": "object"})
    return node


def _normalize_node(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict):
        return {}  # a boolean schema or junk: accept any value rather than lose the tool
    node = {key: _normalize_children(key, value) for key, value in schema.items()}
    for keyword in ("anyOf", "oneOf"):
        if isinstance(node.get(keyword), list):
            node = _drop_null_branches(node, keyword)
    if "type" in node:
        kind = _normalize_type(node.pop("type"))
        if kind is not None:
            node["type"] = kind
    if isinstance(node.get("enum"), list):
        values = [value for value in node["enum"] if value is not None]
        if values:
            node["enum"] = values
        else:
            del node["enum"]
    if "default" in node and node["default"] is None:
        del node["default"]
    if "type" not in node and ("properties" in node or "required" in node):
        node["type"] = "object"
    if node.get("type") == "object":
        return _complete_object(node)
    return {key: value for key, value in node.items() if key not in ("properties", "required")}


def _normalize_children(key: str, value: Any) -> Any:
    if key in _SCHEMA_MAPS and isinstance(value, dict):
        return {name: _normalize_node(sub) for name, sub in value.items()}
    if key in _SCHEMA_LISTS and isinstance(value, list):
        return [_normalize_node(sub) for sub in value]
    if key in ("items", "additionalProperties", "not") and isinstance(value, dict):
        return _normalize_node(value)
    if key == "items" and isinstance(value, list):
        return [_normalize_node(sub) for sub in value]
    return value


def _drop_null_branches(node: dict[str, Any], keyword: str) -> dict[str, Any]:
    """``anyOf: [X, {type: null}]`` becomes X (merged with the node's own keys)."""
    branches = [b for b in node[keyword] if not (isinstance(b, dict) and b.get("type") == "null")]
    if len(branches) == len(node[keyword]):
        return node
    rest = {key: value for key, value in node.items() if key != keyword}
    if len(branches) == 1:
        return {**branches[0], **rest}
    if branches:
        rest[keyword] = branches
    return rest


def _normalize_type(kind: Any) -> str | None:
    """One JSON type name, or None when the value constrains nothing usable."""
    names = kind if isinstance(kind, list) else [kind]
    spelled = [_TYPE_ALIASES.get(name, name) for name in names if isinstance(name, str)]
    known = list(dict.fromkeys(name for name in spelled if name in _JSON_TYPES))
    if "integer" in known and "number" in known:
        known.remove("integer")
    if len(known) == 1:
        return known[0]
    if not known and "null" in spelled:
        return "null"
    return None  # several real types (not expressible as one) or none known: leave the value open


def _complete_object(node: dict[str, Any]) -> dict[str, Any]:
    properties = node.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    node["properties"] = properties
    required = node.get("required")
    if isinstance(required, list):
        kept = list(dict.fromkeys(name for name in required if isinstance(name, str) and name in properties))
        if kept:
            node["required"] = kept
        else:
            del node["required"]
    elif "required" in node:
        del node["required"]
    return node


class UnsetVariable(ValueError):
    """A ``${NAME}`` in a server's settings whose variable is not set."""


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_variables(text: str, environ: Mapping[str, str], where: str) -> str:
    """``text`` with every ``${NAME}`` replaced by ``environ[NAME]``; UnsetVariable names the first one missing."""
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise UnsetVariable(f"{where} uses ${{{name}}}, which is not set in the environment")
        return environ[name]

    return _VARIABLE.sub(value, text)


def expanded_settings(name: str, config: MCPServerConfig, environ: Mapping[str, str]) -> MCPServerConfig:
    """``config`` with the variables in its command, args, env, URL and headers expanded (see the module docstring)."""
    where = f"mcp_servers.{name}"

    def each(values: dict[str, str], key: str) -> dict[str, str]:
        return {k: expand_variables(v, environ, f"{where}.{key}.{k}") for k, v in values.items()}

    return dataclasses.replace(
        config,
        command=None if config.command is None else expand_variables(config.command, environ, f"{where}.command"),
        args=[expand_variables(arg, environ, f"{where}.args[{i}]") for i, arg in enumerate(config.args)],
        env=each(config.env, "env"), headers=each(config.headers, "headers"),
        url=None if config.url is None else expand_variables(config.url, environ, f"{where}.url"))


def prefixed_name(server: str, tool: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """``<server>__<tool>`` within the 64 characters of ``[A-Za-z0-9_-]`` that model APIs accept.

    Characters outside that set become ``_``. A name that is too long, or
    already ``taken`` (two tool names that differ only in such characters),
    ends in ``-`` and a short hash of the original pair, so it stays stable
    across reconnects and distinct from its neighbours.
    """
    base = f"{server}__{_UNSAFE_NAME_CHARS.sub('_', tool) or 'tool'}"
    if len(base) <= _MAX_TOOL_NAME and base not in taken:
        return base
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()
    for width in range(6, len(digest) + 1):
        suffix = f"-{digest[:width]}"
        name = base[:_MAX_TOOL_NAME - len(suffix)] + suffix
        if name not in taken:
            return name
    raise ValueError(f"no free tool name for {tool!r} of MCP server {server!r}")


def result_text(result: types.CallToolResult) -> str:
    """What the model reads from a tool result: its text, with other content described in one line each.

    Structured content stands in as JSON when the result has no text.
    """
    parts = [_block_text(block) for block in result.content]
    text = "\n".join(part for part in parts if part)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    return text


def _block_text(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, (types.ImageContent, types.AudioContent)):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4:,} bytes]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return resource.text
        return f"[resource {resource.uri} ({resource.mime_type or 'binary'})]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri}" + (f": {block.description}]" if block.description else "]")
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


# ---------------------------------------------------------------- one server's connection


@dataclass(frozen=True)
class ServerStatus:
    name: str
    #: ``connecting``, ``ready``, ``reconnecting``, ``failed`` (never came up) or ``closed``.
    state: str
    #: The names its tools are registered under.
    tools: tuple[str, ...]
    #: Why it is not ready (None when it is).
    error: str | None
    #: Completed handshakes: 1 after a clean start, more after reconnects.
    connects: int


class _EndWatch:
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

    def __aiter__(self) -> "_EndWatch":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> "_EndWatch":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


class _Server:
    """One configured server, driven by a task on the manager's event loop.

    ``on_tools`` receives every complete tool listing; ``notify(level, text)``
    reports state changes. Both run on the loop thread.
    """

    def __init__(self, name: str, config: MCPServerConfig, *,
                 on_tools: Callable[["_Server", list[types.Tool]], None],
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
        self._stderr: IO[str] | None = None

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
            if self._stderr is not None:
                self._stderr.close()

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
                read, write = await self._open_transport(stack)
                session = await stack.enter_async_context(ClientSession(
                    _EndWatch(read, lambda: self._poke("lost")), write,
                    read_timeout_seconds=self.config.connect_timeout,
                    message_handler=self._on_message, client_info=_CLIENT_INFO))
                try:
                    with anyio.fail_after(self.config.connect_timeout):
                        await session.initialize()
                        tools = await _list_tools(session)
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

    async def _open_transport(self, stack: AsyncExitStack) -> tuple[Any, Any]:
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
                tools = await _list_tools(session)
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
        tail = self._stderr_tail()
        return f"{text}; its stderr ends with: {tail}" if tail else text

    def _stderr_tail(self, limit: int = 400) -> str:
        if self._stderr is None or self._stderr.closed:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        lines = [line.strip() for line in self._stderr.read().splitlines() if line.strip()]
        text = " | ".join(lines[-4:])
        return text if len(text) <= limit else "..." + text[-limit:]


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool the server lists, following pagination."""
    result = await session.list_tools()
    tools = list(result.tools)
    for _ in range(MAX_LIST_PAGES):
        if result.next_cursor is None:
            return tools
        result = await session.list_tools(params=types.PaginatedRequestParams(cursor=result.next_cursor))
        tools.extend(result.tools)
    raise RuntimeError(f"the tool listing went on for more than {MAX_LIST_PAGES} pages")


# ---------------------------------------------------------------- the manager


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
        self._servers = {name: _Server(name, MCPServerConfig.from_mapping(name, config),
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

    def _apply_listing(self, server: _Server, tools: list[types.Tool]) -> None:
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
