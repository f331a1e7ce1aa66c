"""The settings of one MCP server (``mcp_servers.<name>``), checked entry by entry."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import ConfigError


#: Server names become the prefix of their tools' names, so they use the tool-name characters,
#: and never ``__``, which separates the server from the tool.
_MCP_SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*(?<!_)$")


@dataclass
class MCPServerConfig:
    """One MCP server under ``mcp_servers.<name>``: a command run over stdio, or a streamable-HTTP URL."""

    command: str | None = None
    args: list[str] = field(default_factory=list)
    #: Extra environment variables for the command (a small safe set is inherited besides).
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds one tool call may take before it is cancelled and reported to the model as failed.
    timeout: float = 120.0
    #: Seconds to start the server and finish the handshake (initialize and the first tool listing).
    connect_timeout: float = 10.0
    #: Seconds between heartbeat pings; two missed in a row mark the server unavailable (0: no heartbeat).
    keepalive_interval: float = 30.0

    @classmethod
    def from_mapping(cls, name: Any, entry: Any) -> "MCPServerConfig":
        """A checked entry; every problem is a ConfigError naming ``mcp_servers.<name>.<key>``."""
        if not isinstance(name, str) or len(name) > 32 or not _MCP_SERVER_NAME.match(name):
            raise ConfigError(f"mcp_servers: server name {name!r} must be 1-32 letters, digits, '-' or '_', "
                              "without '__' and not starting or ending with '_'")
        where = f"mcp_servers.{name}"
        if isinstance(entry, MCPServerConfig):
            entry = dataclasses.asdict(entry)
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}: expected a mapping with command or url, got {type(entry).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(key) for key in entry if key not in known)
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(sorted(known))})")
        command, url = entry.get("command"), entry.get("url")
        if (command is None) == (url is None):
            raise ConfigError(f"{where}: set either command (a local server over stdio) or url "
                              "(a streamable-HTTP server), not both and not neither")
        if command is not None and (not isinstance(command, str) or not command.strip()):
            raise ConfigError(f"{where}.command: expected the program to run, got {command!r}")
        if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
            raise ConfigError(f"{where}.url: expected an http:// or https:// URL, got {url!r}")
        numbers = {}
        for key in ("timeout", "connect_timeout", "keepalive_interval"):
            value = entry.get(key, getattr(cls, key))
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
                    value == 0 and key != "keepalive_interval"):
                allowed = "0 (off) or a positive" if key == "keepalive_interval" else "a positive"
                raise ConfigError(f"{where}.{key}: expected {allowed} number of seconds, got {value!r}")
            numbers[key] = float(value)
        return cls(command=command, args=_texts(entry.get("args"), f"{where}.args"),
                   env=_text_map(entry.get("env"), f"{where}.env"), url=url,
                   headers=_text_map(entry.get("headers"), f"{where}.headers"), **numbers)


def _texts(value: Any, where: str) -> list[str]:
    """A list of command-line words; numbers are accepted as their text (YAML reads ``8080`` as a number)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(_scalar(item) for item in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return [str(item) for item in value]


def _text_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and _scalar(v) for k, v in value.items()):
        raise ConfigError(f"{where}: expected a mapping of names to strings")
    return {key: str(item) for key, item in value.items()}


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)
