"""An MCP server for the client tests: ``python echo.py LABEL``.

Every answer names LABEL, so two copies under different names can be told
apart. ``pid`` lets a test kill the process, ``sleep`` is slow without
blocking the server, ``freeze`` blocks it (no heartbeat answers), ``grow``
adds a tool and announces the change, ``fail`` returns an error result.
"""

import os
import sys
import time

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

LABEL = sys.argv[1] if len(sys.argv) > 1 else "echo"
server = MCPServer(LABEL, log_level="WARNING")


@server.tool(description="Repeat the text, prefixed with the server's label.",
             annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str, times: int | None = None) -> str:
    return " ".join([f"{LABEL}: {text}"] * (times or 1))


@server.tool(description="The server's process id.")
def pid() -> str:
    return str(os.getpid())


@server.tool(description="Wait without blocking the server, then answer.")
async def sleep(seconds: float) -> str:
    await anyio.sleep(seconds)
    return f"{LABEL} slept {seconds} s"


@server.tool(description="Block the whole server (it stops answering pings).")
async def freeze(seconds: float) -> str:
    time.sleep(seconds)  # on the event loop itself: nothing else is answered meanwhile
    return "thawed"


@server.tool(description="Add a tool named NAME and announce that the tool list changed.")
async def grow(name: str, ctx: Context) -> str:
    server.add_tool(lambda: f"{LABEL}: {name} answers", name=name, description=f"Added at run time: {name}.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(description="Fail with the given message.")
def fail(message: str) -> str:
    raise ToolError(message)


if __name__ == "__main__":
    server.run()
