"""``%%hermes`` (a message to the agent) and ``%hermes <command>`` (everything else).

The magics only parse and report; the work is NotebookChat's. Mistakes in a
command become IPython UsageErrors: one clear line, no traceback.
"""

from __future__ import annotations

import shlex

from IPython.core.error import UsageError
from IPython.display import display

from ..context.budget import explain_threshold
from ..core.config import ConfigError, parse_overrides
from ..runtime import lab_path
from ..store import StoreError
from .chat import ChatBusyError, NotebookChat
from .export import FORMATS, session_record, write_export
from .timeline import show_timeline

USAGE = """\
%%hermes + a message in the cell body: one turn with the agent (streams below the cell).
%hermes commands:
  new                       start a new conversation
  compress [focus]          compress the context now, optionally focused on a topic
  stop                      stop the running turn and the queued ones (Kernel → Interrupt does too)
  attach                    show the running turn live in this cell (after a page reload), else the last one
  resume <session id>       continue a logged session (following its compressions)
  branch                    continue in a child session; the current one stays as it was
  status                    session, lineage, turns, tokens, threshold, compressions
  config key=value ...      rebuild the chat with config overrides (values are YAML)
  export md|jsonl PATH      write the conversation (jsonl: the recorded-session format)
  timeline [session id]     each compaction of the conversation: the context before and after, the summary
Settings: %config Hermes"""

#: Errors that are the user's to fix (a busy chat, a bad key or value, a missing file); shown as one line.
_USER_ERRORS = (ChatBusyError, ConfigError, StoreError, ValueError, OSError)


class HermesMagics:
    """The two magic functions, bound to one chat."""

    def __init__(self, chat: NotebookChat):
        self.chat = chat

    def cell(self, line: str, cell: str) -> None:
        """%%hermes: the cell body is the message; the turn runs in the background."""
        if line.strip():
            raise UsageError(f"%%hermes takes no options (got {line.strip()!r}); write the message in the cell body")
        if not cell.strip():
            raise UsageError("the cell is empty: write the message under %%hermes")
        try:
            self.chat.ask(cell)
        except _USER_ERRORS as exc:
            raise UsageError(str(exc)) from None

    def line(self, line: str) -> None:
        """%hermes <command> [arguments]; without a command, the list of commands."""
        command, _, rest = line.strip().partition(" ")
        if not command:
            print(USAGE)
            return
        handler = getattr(self, f"_cmd_{command}", None)
        if handler is None:
            raise UsageError(f"unknown %hermes command {command!r}\n{USAGE}")
        try:
            handler(rest.strip())
        except _USER_ERRORS as exc:
            raise UsageError(str(exc)) from None

    # ------------------------------------------------------------ commands

    def _cmd_new(self, rest: str) -> None:
        _no_arguments("new", rest)
        print(f"new conversation: session {self.chat.new_session()}")

    def _cmd_compress(self, rest: str) -> None:
        self.chat.compress(rest or None)

    def _cmd_stop(self, rest: str) -> None:
        _no_arguments("stop", rest)
        jobs = self.chat.stop_all()
        if not jobs:
            print("nothing to stop: no turn is running in this chat")
            return
        running, queued = jobs[0], len(jobs) - 1
        what = ("stopping the running turn (its partial answer is kept)" if running.kind == "turn"
                else "the running compression cannot be cut short; it ends on its own")
        print(what + (f"; {queued} queued job{'s' if queued > 1 else ''} will not start" if queued else ""))

    def _cmd_attach(self, rest: str) -> None:
        _no_arguments("attach", rest)
        jobs = self.chat.pending or ([self.chat.last_job] if self.chat.last_job is not None else [])
        if not jobs:
            print("nothing to show: this chat has not run a turn yet")
            return
        for job in jobs:
            job.attach()

    def _cmd_resume(self, rest: str) -> None:
        words = _split(rest)
        if len(words) != 1:
            raise UsageError("usage: %hermes resume <session id>  (ids are in hermeslab.store.open().sessions())")
        target = self.chat.resume(words[0])
        note = "" if target == words[0] else f" (the newest continuation of {words[0]})"
        print(f"resumed session {target}{note}: {len(self.chat.runtime.agent.messages)} messages")

    def _cmd_branch(self, rest: str) -> None:
        _no_arguments("branch", rest)
        parent = self.chat.runtime.agent.session.id
        print(f"branched: session {self.chat.branch()} continues from {parent}, which stays as it was")

    def _cmd_status(self, rest: str) -> None:
        _no_arguments("status", rest)
        print("\n".join(self.chat.status().lines()))

    def _cmd_config(self, rest: str) -> None:
        words = _split(rest)
        if not words:
            shown = ", ".join(f"{key}={value!r}" for key, value in self.chat.overrides.items()) or "none"
            print(f"config overrides: {shown}\nusage: %hermes config key=value ...  e.g. compression.threshold=0.6")
            return
        note = self.chat.configure(parse_overrides(words))
        print("config: " + ", ".join(words) + (f"\n{note}" if note else "") + "\n"
              + explain_threshold(self.chat.runtime.resolution))

    def _cmd_export(self, rest: str) -> None:
        words = _split(rest)
        if len(words) != 2 or words[0] not in FORMATS:
            raise UsageError("usage: %hermes export md|jsonl PATH")
        self.chat.require_idle("export")
        record = session_record(self.chat.runtime)
        path = write_export(record, words[0], words[1])
        print(f"exported session {record['id']} ({len(record['messages'])} messages) to {path}")

    def _cmd_timeline(self, rest: str) -> None:
        words = _split(rest)
        if len(words) > 1:
            raise UsageError("usage: %hermes timeline [session id]  (default: this chat's session)")
        if words:
            session, lab = words[0], lab_path(self.chat.settings.build_config(self.chat.overrides))
        else:
            self.chat.require_idle("timeline")
            runtime = self.chat.runtime
            if runtime.writer is None:
                raise UsageError("the lab is off (store.enabled is false): there is no log to read compactions from")
            session, lab = runtime.agent.session.id, runtime.lab_path
            if not runtime.agent.session.started:
                print(f"session {session}: no compactions (nothing logged yet)")
                return
            runtime.writer.flush()
        display(show_timeline(lab, session=session))


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"cannot read the arguments: {exc}") from None


def _no_arguments(command: str, rest: str) -> None:
    if rest:
        raise UsageError(f"%hermes {command} takes no arguments (got {rest!r})")
