"""``hermeslab chat``: the conversation in a terminal, with the same commands as ``%hermes`` in a notebook.

A line starting with ``/`` is a command (``/help`` lists them); anything else
is a message to the agent. On a terminal, input is read with prompt_toolkit:
line editing, history (↑/↓, kept in ``~/.hermeslab/chat_history`` for inputs
of a typed size) and a paste of several lines arriving as one message, with or
without bracketed paste; the line is bounded (see ``terminal_input``). Esc then
Enter (or Alt+Enter) also inserts a line break. When input is not a terminal (a pipe, a script), each
line is one message. A mistaken command or setting prints one line and
changes nothing.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, Iterator


from .core.config import Config, ConfigError, parse_overrides
from .context.budget import explain_threshold

PROMPT = "you> "
HELP = """\
commands:
  /new                      start a new conversation
  /compress [focus]         compress the context now, optionally focused on a topic
  /resume <session id>      continue a logged session (following its compressions)
  /branch                   continue in a child session; the current one stays as it was
  /status                   session, lineage, turns, tokens, threshold, compressions
  /config key=value ...     rebuild the chat with config overrides (values are YAML)
  /export md|jsonl PATH     write the conversation (jsonl: the recorded-session format)
  /help                     this list
  /quit                     leave (also Ctrl+D)"""
HISTORY_FILE = Path("~/.hermeslab/chat_history")


class CommandError(ValueError):
    """A command the user mistyped: shown as one line, and nothing changed."""


class TerminalChat:
    """One conversation in a terminal: a Runtime, the overrides set with /config, and the commands."""

    def __init__(self, config: Config):
        from .console import ConsoleTranscript
        from .runtime import Runtime

        self.config, self.overrides = config, {}
        self._transcript = ConsoleTranscript
        self.runtime = Runtime(config, source="cli")
        self.runtime.bus.subscribe(ConsoleTranscript(context_length=config.model.context_length))

    def close(self) -> None:
        self.runtime.close()

    def handle(self, text: str) -> bool:
        """One line of input (a message or a command); False when the user leaves."""
        text = text.strip()
        if not text:
            return True
        if not text.startswith("/"):
            print("hermes> ", end="", flush=True)
            self.runtime.agent.chat(text)
            return True
        command, _, rest = text[1:].partition(" ")
        if command in ("quit", "exit"):
            return False
        handler = getattr(self, f"_cmd_{command}", None)
        try:
            if handler is None:
                raise CommandError(f"unknown command /{command}; /help lists them")
            handler(rest.strip())
        except (CommandError, ConfigError, ValueError, OSError, RuntimeError) as exc:
            print(f"error: {exc}")
        return True

    # ------------------------------------------------------------ commands

    def _cmd_help(self, rest: str) -> None:
        print(HELP)

    def _cmd_new(self, rest: str) -> None:
        _no_arguments("new", rest)
        print(f"new conversation: session {self.runtime.agent.new_session()}")

    def _cmd_compress(self, rest: str) -> None:
        agent = self.runtime.agent
        before = len(agent.messages)
        compaction = agent.compress(rest or None)
        if compaction is None or not compaction.changed:
            print("nothing to compress yet")
        else:
            print(f"compressed: {before} → {len(agent.messages)} messages, session {agent.session.id}")

    def _cmd_resume(self, rest: str) -> None:
        words = _split(rest)
        if len(words) != 1:
            raise CommandError("usage: /resume <session id>  (hermeslab sessions lists them)")
        target = self.runtime.resume(words[0])
        note = "" if target == words[0] else f" (the newest continuation of {words[0]})"
        print(f"resumed session {target}{note}: {len(self.runtime.agent.messages)} messages")

    def _cmd_branch(self, rest: str) -> None:
        _no_arguments("branch", rest)
        parent = self.runtime.agent.session.id
        print(f"branched: session {self.runtime.agent.branch()} continues from {parent}, which stays as it was")

    def _cmd_status(self, rest: str) -> None:
        _no_arguments("status", rest)
        agent = self.runtime.agent
        context = agent.context
        tokens = context.measure(agent.messages, agent.tools.schemas() or None)
        window = context.window
        line = f"context      {tokens:,} / {window:,} tokens ({tokens / window:.1%}; {context.counter.encoding})"
        if agent.compactor is not None:
            threshold = agent.compactor.resolution.threshold_tokens
            line += f" · compression threshold {threshold:,} ({tokens / threshold:.0%} of it)"
        compressions = agent.compactor.state.compression_count if agent.compactor is not None else 0
        if self.runtime.writer is not None:  # over the whole lineage: a resumed session's compactor starts at 0
            from .store import open as open_lab

            self.runtime.writer.flush()
            compressions = open_lab(self.runtime.lab_path).compression_count(agent.session.id)
        print("\n".join([
            f"session      {agent.session.id}" + (f" · {agent.session.title}" if agent.session.title else ""),
            f"turns        {agent.session.turns} · compressions {compressions}",
            line,
            f"model        {self.runtime.config.model.name} · lab {self.runtime.lab_path}",
            *([f"server       {agent.calls.server_note}"] if agent.calls.server_note else []),
        ]))

    def _cmd_config(self, rest: str) -> None:
        words = _split(rest)
        if not words:
            shown = ", ".join(f"{key}={value!r}" for key, value in self.overrides.items()) or "none"
            print(f"config overrides: {shown}\nusage: /config key=value ...  e.g. compression.threshold=0.6")
            return
        merged = {**self.overrides, **parse_overrides(words)}
        from .policies.loading import load_config
        from .runtime import Runtime

        config = load_config(self.config, merged)  # a refused value stops here: nothing has changed
        old = self.runtime
        resume = old.agent.session.id if old.agent.session.turns and old.writer is not None else None
        runtime = Runtime(config, source="cli")
        old.close()
        runtime.bus.subscribe(self._transcript(context_length=config.model.context_length))
        self.runtime, self.overrides = runtime, merged
        note = f"; the conversation continues in session {runtime.resume(resume)}" if resume else ""
        print("config: " + ", ".join(words) + note + "\n" + explain_threshold(runtime.resolution))

    def _cmd_export(self, rest: str) -> None:
        words = _split(rest)
        if len(words) != 2 or words[0] not in ("md", "jsonl"):
            raise CommandError("usage: /export md|jsonl PATH")
        from .notebook.export import session_record, write_export

        if self.runtime.writer is not None:
            self.runtime.writer.flush()
        record = session_record(self.runtime)
        path = write_export(record, words[0], words[1])
        print(f"exported session {record['id']} ({len(record['messages'])} messages) to {path}")


def read_inputs(stdin: Any = None) -> Iterator[str]:
    """The user's inputs: edited lines with history on a terminal, plain lines otherwise; ends at end of input."""
    stdin = stdin or sys.stdin
    if not stdin.isatty():
        while True:
            try:
                yield input(PROMPT)
            except EOFError:
                print()
                return
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import InMemoryHistory

    from .terminal_input import BoundedFileHistory, InputLimit, cap_drawing, key_bindings

    path = HISTORY_FILE.expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        history: Any = BoundedFileHistory(str(path))
    except OSError:
        history = InMemoryHistory()
    limit = InputLimit()
    session: PromptSession = PromptSession(history=history, key_bindings=key_bindings(limit),
                                           bottom_toolbar=limit.toolbar)
    cap_drawing(session)
    while True:
        limit.reset()
        try:
            yield session.prompt(PROMPT)
        except KeyboardInterrupt:  # Ctrl+C clears the line, as in a shell
            continue
        except EOFError:
            return


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise CommandError(f"cannot read the arguments: {exc}") from None


def _no_arguments(command: str, rest: str) -> None:
    if rest:
        raise CommandError(f"/{command} takes no arguments (got {rest!r})")
