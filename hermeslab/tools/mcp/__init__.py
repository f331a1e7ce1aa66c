"""MCP servers as tools: connect the configured servers and offer their tools in the registry.

The agent loop and the tool executor are synchronous; the MCP SDK is async.
``MCPManager`` (``manager``) runs one event loop in a background thread that
owns every server's connection, and answers tool calls through a blocking
facade.

Each server is a long-lived task (``connection``) that connects (a command
over stdio, or a streamable-HTTP URL: ``transport``), completes the handshake
within ``connect_timeout``, lists the tools and registers them as
``<server>__<tool>`` (``names``) — the OpenAI tool-name pattern has no ``.``,
and server names never contain ``__``, so the boundary stays visible. The task
then pings the server every ``keepalive_interval``; two missed pings in a row,
or the connection ending, mark the server unavailable and start a reconnect
that lists the tools again. A ``notifications/tools/list_changed`` re-lists at
once.

``${NAME}`` in a server's command, args, env values, URL or header values is
replaced by that environment variable when the server is (re)connected
(``variables``), so a config file can name a secret without holding it (and
the config's hash and the log never see it); an unset variable fails the start
with its name.

Tool input schemas are rewritten into the form model APIs accept
(``schema``); results reach the model as text (``results``). Whatever goes
wrong (a server that is down, a call that times out, an error result,
arguments the server rejects) reaches the model as the text of a tool error,
never as an exception out of the loop. Connections, losses and reconnections
are published as ``Notice`` events.
"""
