"""An MCP server that starts but never answers the handshake."""

import time

time.sleep(120)
