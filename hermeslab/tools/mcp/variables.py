"""``${NAME}`` in an MCP server's settings, replaced by environment variables at (re)connect time.

A config file can then name a secret without holding it, so neither the
config's hash nor the log ever sees the value; the expansion happens again on
every reconnect, so a rotated secret is picked up.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping

from hermeslab.core.mcp_config import MCPServerConfig


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
