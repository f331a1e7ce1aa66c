"""An MCP server that dies before the handshake, as a misconfigured one does."""

import sys

print("crash: the database URL is not set", file=sys.stderr, flush=True)
sys.exit(3)
