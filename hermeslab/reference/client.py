"""``HermesReference``: drive the Hermes reference worker from hermeslab, one JSON line per call.

The worker (``hermeslab.reference.worker``) runs the real hermes-agent 0.19.0
compressor in a child process under the Python of its own virtualenv
(``hermeslab.reference.venv``). It gets an empty temporary ``HERMES_HOME`` (no
user config can reroute anything) and an environment without ``*_API_KEY``
variables, and Hermes's summary call is answered by a fixed stand-in text, so
nothing ever leaves the machine. Arguments are checked here, before they
cross the process boundary, so a mistake reads as a ``HermesInputError`` from
the call that made it rather than as an error from inside Hermes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hermeslab.core.messages import MessageValidationError, validate_messages
from hermeslab.reference.errors import HermesInputError, HermesReferenceError
from hermeslab.reference.venv import hermes_venv, venv_python
from hermeslab.reference.worker_client import JsonLinesWorker

#: The worker program: a directory run as ``python -I WORKER_DIR`` (see ``hermeslab.reference.worker``).
WORKER_DIR = Path(__file__).with_name("worker")


# ---------------------------------------------------------------- input checks


def _check_messages(messages: Any, what: str = "messages") -> list[dict]:
    try:
        validate_messages(messages, check_pairs=False)
    except MessageValidationError as exc:
        raise HermesInputError(f"{what} are not valid chat messages: {exc}") from None
    return messages


def _check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise HermesInputError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise HermesInputError(f"{name} must be at least {minimum}, got {value}")
    return value


def _check_tools(tools: Any, what: str) -> list | None:
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise HermesInputError(f"{what} must be a list of tool schema objects or None")
    return tools


def _check_session(session: Any, index: int) -> dict:
    if not isinstance(session, dict) or "messages" not in session:
        raise HermesInputError(f"session {index} must be an object with a 'messages' list")
    _check_messages(session["messages"], f"messages of session {index}")
    _check_tools(session.get("tools"), f"tools of session {index}")
    return {"id": session.get("id"), "messages": session["messages"], "tools": session.get("tools")}


# ---------------------------------------------------------------- the worker process


class HermesReference(JsonLinesWorker):
    """A running Hermes reference worker; use it as a context manager.

    Each method sends one JSON line and waits for one reply, so calls are
    sequential. ``timeout`` bounds the wait for a single reply (None waits
    forever); a worker that times out is stopped.
    """

    def __init__(self, venv_path: Path | None = None, *, timeout: float | None = 600.0):
        if timeout is not None and timeout <= 0:
            raise HermesInputError(f"timeout must be positive or None, got {timeout}")
        super().__init__("Hermes", HermesReferenceError, timeout=timeout)
        self._venv_path = venv_path

    def _command(self) -> list[str]:
        """The installed venv's Python (``ReferenceNotInstalledError`` names the command that installs it)."""
        return [str(venv_python(hermes_venv(self._venv_path))), "-I", str(WORKER_DIR)]

    def _environment(self, folder: str) -> dict[str, str]:
        return {"HERMES_HOME": folder}  # empty: no user config can reroute anything

    # -- operations

    def ping(self) -> float:
        """Round-trip time of an empty request in milliseconds (the bridge's own cost)."""
        started = time.perf_counter()
        self.request("ping")
        return (time.perf_counter() - started) * 1000.0

    def plan(
        self,
        messages: list[dict],
        *,
        context_length: int,
        compression_count: int = 0,
        previous_summary: str | None = None,
    ) -> dict:
        """Hermes's decisions for one ``compress()`` call on a fresh compressor.

        ``compression_count`` and ``previous_summary`` preset the compressor's
        state (both switch Hermes's head protection off). Returns the budgets,
        ``outcome`` ("compressed", "too_small", "nothing_to_compress" or
        "aborted"), ``head_size``, ``compress_start``, ``compress_end``,
        ``prune_boundary``, ``pruned`` (``[{"index", "action"}]``),
        ``previous_summary_index``, ``summarised_indices`` (``[start, end)``),
        ``input_len`` and ``output_len``. Indices refer to ``messages``;
        boundaries are None when Hermes found too few messages to start.
        """
        if previous_summary is not None and not isinstance(previous_summary, str):
            raise HermesInputError(f"previous_summary must be a string or None, got {type(previous_summary).__name__}")
        return self.request("plan", {
            "messages": _check_messages(messages),
            "context_length": _check_int(context_length, "context_length", 1),
            "compression_count": _check_int(compression_count, "compression_count", 0),
            "previous_summary": previous_summary,
        })

    def compress(self, messages: list[dict], *, context_length: int) -> dict:
        """Hermes's output for one ``compress()`` call: ``{"messages", "elapsed_ms"}``."""
        return self.request("compress", {
            "messages": _check_messages(messages),
            "context_length": _check_int(context_length, "context_length", 1),
        })

    def time_compress(self, messages: list[dict], *, context_length: int, repeats: int) -> list[float]:
        """Milliseconds per warm ``compress()`` inside the worker, one fresh compressor each."""
        return self.request("time_compress", {
            "messages": _check_messages(messages),
            "context_length": _check_int(context_length, "context_length", 1),
            "repeats": _check_int(repeats, "repeats", 1),
        })

    def time_compress_cpu(self, messages: list[dict], *, context_length: int, repeats: int) -> dict:
        """As `time_compress`, with the worker's CPU time of each call: ``{"ms": [...], "cpu_ms": [...]}``."""
        return self.request("time_compress", {
            "messages": _check_messages(messages),
            "context_length": _check_int(context_length, "context_length", 1),
            "repeats": _check_int(repeats, "repeats", 1),
            "with_cpu": True,
        })

    def worker_cpu_seconds(self) -> float:
        """CPU seconds the worker process has used so far (its ``time.process_time``)."""
        return float(self.request("usage")["cpu_seconds"])

    def replay(
        self, session_messages: list[dict], *, context_length: int, tools: list[dict] | None = None
    ) -> dict:
        """Replay one recording through Hermes's trigger and compressor (see `replay_many`)."""
        return self.replay_many([{"messages": session_messages, "tools": tools}], context_length=context_length)[0]

    def replay_many(self, sessions: Iterable[dict], *, context_length: int) -> list[dict]:
        """Replay recordings (``{"messages", "tools"?, "id"?}``) in one round trip.

        Before each recorded assistant message the prompt is estimated with
        Hermes's ``estimate_request_tokens_rough`` (system prompt held apart,
        tool schemas included); when ``should_compress`` fires, ``compress()``
        runs and its output becomes the context. Each result has ``calls``
        (per call: ``prompt_before``, ``prompt_after``, ``compressed`` and, if
        so, a ``compress`` record) and ``totals`` (``calls``,
        ``compress_calls``, ``ineffective_compress_calls``,
        ``over_window_after_compress``, ``two_summary_outputs``,
        ``missing_latest_user_outputs``, ``summary_only_compressions``).
        """
        if isinstance(sessions, (str, bytes, dict)):
            raise HermesInputError("sessions must be an iterable of session objects")
        checked = [_check_session(session, index) for index, session in enumerate(sessions)]
        return self.request("replay_many", {
            "sessions": checked,
            "context_length": _check_int(context_length, "context_length", 1),
        })

    def replay_many_timed(self, sessions: Iterable[dict], *, context_length: int) -> dict:
        """`replay_many` timed inside the worker: ``{"results", "seconds", "cpu_seconds"}``, where the
        seconds cover the replays alone (not sending, decoding or answering the request)."""
        if isinstance(sessions, (str, bytes, dict)):
            raise HermesInputError("sessions must be an iterable of session objects")
        checked = [_check_session(session, index) for index, session in enumerate(sessions)]
        return self.request("replay_many_timed", {
            "sessions": checked,
            "context_length": _check_int(context_length, "context_length", 1),
        })

    def agent_replay_many(self, sessions: Iterable[dict], *, context_length: int, encoding: str) -> list[dict]:
        """Replay planned sessions through Hermes's own agent triggers, prompts billed exactly in ``encoding``.

        Each session is ``{"id", "system_prompt", "tools", "turns", "results"}``: the turns as
        ``{"users": [...], "replies": [assistant messages], "stop_after": call id or None}`` and every
        tool result by call id (``hermeslab.eval.session_parity.planned_session`` builds them as
        hermeslab's replay plans a recording). The worker runs Hermes's preflight, pressure,
        per-turn and overflow checks and its ``compress_context`` wrapper; each result has
        ``calls`` (``prompt_tokens`` billed, ``rough`` estimate), ``compressions`` (``call``,
        ``trigger``, ``input_len``, ``output_len``, ``changed``), ``refusals``, ``statuses`` and
        ``prompt_tokens_total``. The worker counts with hermeslab's own tokenizer build (bpe-openai's
        compiled module, loaded by path) and must agree with it on probe texts first.
        """
        if isinstance(sessions, (str, bytes, dict)):
            raise HermesInputError("sessions must be an iterable of planned session objects")
        checked = []
        for index, session in enumerate(sessions):
            if not isinstance(session, dict) or not isinstance(session.get("turns"), list):
                raise HermesInputError(f"session {index} must be a planned session with a 'turns' list")
            checked.append(session)
        return self.request("agent_replay_many", {
            "sessions": checked,
            "context_length": _check_int(context_length, "context_length", 1),
            "counter": _counter_spec(encoding),
        })


def _counter_spec(encoding: str) -> dict:
    """Where the worker loads hermeslab's tokenizer from, and probe counts it must reproduce."""
    import importlib.machinery
    import importlib.util

    from hermeslab.core.tokens import PROBE_TEXTS, bpe_openai_agrees, counter_for

    counter = counter_for(encoding)  # whichever backend counts here, its counts are tiktoken's, as bpe-openai's are
    if not bpe_openai_agrees(encoding):
        raise HermesReferenceError("session replays in the worker need the bpe-openai tokenizer in hermeslab's "
                                   "environment (the worker loads its compiled module)")
    spec = importlib.util.find_spec("bpe_openai")
    for folder in spec.submodule_search_locations or ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_bindings{suffix}"
            if path.is_file():
                return {"bindings_path": str(path), "encoding": encoding,
                        "probe": [[text, counter.count_text(text)] for text in PROBE_TEXTS]}
    raise HermesReferenceError("bpe-openai's compiled module was not found")
