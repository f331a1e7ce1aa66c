"""Answer JSON-line requests by running hermes-agent's own ContextCompressor.

This script runs under the Python of the dedicated hermes-agent virtualenv,
never under hermeslab's, because hermes-agent pins library versions that
hermeslab must not inherit. It therefore imports only the standard library
and Hermes itself; `hermeslab.eval.hermes_reference` starts it and talks to it.

Protocol: one JSON object per line on stdin,
``{"id": <any>, "op": <name>, "args": {...}}``, and exactly one JSON line per
request on stdout: ``{"id", "ok": true, "result"}`` or
``{"id", "ok": false, "error", "traceback"}``. A bad request never stops the
worker; it answers with an error and reads the next line. Anything Hermes
prints goes to stderr, so stdout carries replies only.

Hermes is only called here, never re-implemented. Its summary call is
answered by a local stand-in with fixed text, so no request leaves the
machine, and every decision is read from what Hermes itself did during one
``compress()`` call (see `CompressProbe`).
"""

from __future__ import annotations

import copy
import gc
import io
import json
import os
import platform
import sys
import time
import traceback
import types
from collections.abc import Callable
from importlib import metadata
from typing import Any, TextIO

HERMES_DISTRIBUTION = "hermes-agent"

# The stand-in summariser's answer: a fixed text about the size of a short real
# summary (Hermes's template headings, neutral placeholder lines). Its length
# matters, because the summary stays in the context and is counted by every
# later trigger check. Hermes still post-processes it (grounds the task
# snapshot, adds its prefix and end marker), exactly as it would a model's.
_STUB_SECTIONS = (
    ("Historical Task Snapshot", "Placeholder; Hermes replaces this section with the newest real user request."),
    ("Goal", "Carry on with the task described by the user, continuing from the current state of the work."),
    ("Constraints & Preferences", "None recorded beyond what the user wrote in the kept messages."),
    (
        "Completed Actions",
        "1. INSPECT the working tree and the relevant sources - outcome noted [tool: unknown]\n"
        "2. RUN the commands the task needed - results are in the kept messages [tool: unknown]",
    ),
    (
        "Active State",
        "Working directory, modified files and running processes as left by the earlier turns of this conversation.",
    ),
    ("Historical In-Progress State", "Earlier work was still in progress when these turns were compacted."),
    ("Blocked", "Nothing is known to be blocked; errors seen earlier were handled or are repeated below."),
    ("Key Decisions", "Keep following the approach the assistant had chosen before this point in the conversation."),
    ("Resolved Questions", "None recorded in the compacted turns."),
    ("Historical Pending User Asks", "Stale; the newest user message after this summary wins."),
    ("Relevant Files", "The files named in the kept messages and in the commands that were run earlier."),
    ("Historical Remaining Work", "Stale; re-derive the next step from the latest messages."),
    (
        "Critical Context",
        "Fixed stand-in text from the hermeslab reference worker; no model wrote it, so it holds no facts.",
    ),
)
STUB_SUMMARY = "\n\n".join(f"## {title}\n{line}" for title, line in _STUB_SECTIONS) + "\n"


class RequestError(ValueError):
    """A request the worker cannot serve as asked; the message says what to fix."""


# ---------------------------------------------------------------- one compress() call


class CompressProbe:
    """What Hermes decided during one ``compress()`` call, read from its own calls.

    - ``head_size``: the value ``_protect_head_size`` returned.
    - ``compress_start`` / ``compress_end``: the ``head_end`` argument and the
      return value of ``_find_tail_cut_by_tokens``; ``compress()`` passes its
      aligned start in and uses the result as its end.
    - ``pruned``: the list ``_prune_old_tool_results`` returned. It has the
      input's length and order, so its indices are the input's indices.
    - ``prune_walk_steps``: how many messages the prune pass's backward budget
      walk sized (one ``_estimate_msg_budget_tokens`` call per visited message),
      so the walk stopped at index ``n - prune_walk_steps``.
    - ``one_liners``: every text ``_summarize_tool_result`` produced while pruning.
    - ``summary_index``: what ``_find_latest_context_summary`` returned.
    - ``turns``: the exact list handed to ``_generate_summary``; its items are
      the pruned list's own objects, so identity locates the summarised span.
    """

    def __init__(self) -> None:
        self.head_size: int | None = None
        self.compress_start: int | None = None
        self.compress_end: int | None = None
        self.pruned: list[dict] | None = None
        self.pruning = False
        self.prune_walk_steps = 0
        self.one_liners: set[str] = set()
        self.summary_index: int | None = None
        self.turns: list[dict] | None = None


class ReferenceEngine:
    """Hermes's compressor, instrumented so each decision can be reported."""

    def __init__(self) -> None:
        import agent.context_compressor as compressor_module
        import agent.model_metadata as metadata_module
        from agent.context_compressor import ContextCompressor
        from agent.conversation_compression import _is_real_user_message
        from agent.model_metadata import estimate_request_tokens_rough

        self.module = compressor_module
        self.metadata_module = metadata_module
        self.compressor_class = ContextCompressor
        self.is_real_user = _is_real_user_message
        self.estimate_request = estimate_request_tokens_rough
        self.active_probe: CompressProbe | None = None
        self._install_module_hooks()
        self.dedupe_marker = self._learn_dedupe_marker()

    # -- wiring

    def _install_module_hooks(self) -> None:
        """Replace the summary call and watch two module-level helpers.

        ``compress()`` reaches these through the compressor module's globals,
        so the replacements are seen by every compressor in this process.
        """
        module = self.module
        budget_tokens = module._estimate_msg_budget_tokens
        one_liner = module._summarize_tool_result

        def counted_budget_tokens(message: dict) -> int:
            probe = self.active_probe
            if probe is not None and probe.pruning:
                probe.prune_walk_steps += 1
            return budget_tokens(message)

        def recorded_one_liner(tool_name: str, tool_args: str, content: str) -> str:
            text = one_liner(tool_name, tool_args, content)
            probe = self.active_probe
            if probe is not None and probe.pruning:
                probe.one_liners.add(text)
            return text

        def stub_call_llm(**_kwargs: Any) -> Any:
            message = types.SimpleNamespace(content=STUB_SUMMARY)
            return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])

        module._estimate_msg_budget_tokens = counted_budget_tokens
        module._summarize_tool_result = recorded_one_liner
        module.call_llm = stub_call_llm

    def _learn_dedupe_marker(self) -> str:
        """Ask Hermes's prune pass what it writes over an older duplicate result."""
        repeated = "reference output line\n" * 20
        calls = [
            {"id": f"probe_{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
            for i in range(2)
        ]
        sample = [
            {"role": "user", "content": "read it twice"},
            {"role": "assistant", "content": "", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "probe_0", "content": repeated},
            {"role": "tool", "tool_call_id": "probe_1", "content": repeated},
        ]
        pruned, _count = self.new_compressor(128_000)._prune_old_tool_results(
            sample, protect_tail_count=len(sample)
        )
        marker = pruned[2]["content"]
        if not isinstance(marker, str) or marker == repeated:
            raise RuntimeError("this Hermes build did not replace an older duplicate tool result")
        return marker

    def new_compressor(self, context_length: int) -> Any:
        """A fresh compressor with Hermes's defaults and an explicit window (no probing)."""
        return self.compressor_class(
            model="hermeslab-reference",
            provider="custom",
            base_url="http://127.0.0.1:9/v1",
            api_key="unused-by-the-stub-summariser",
            config_context_length=context_length,
            quiet_mode=True,
        )

    def _instrument(self, compressor: Any) -> None:
        """Wrap the compressor's own boundary and summary methods, once per instance."""
        if getattr(compressor, "_hermeslab_instrumented", False):
            return
        head_size = compressor._protect_head_size
        prune = compressor._prune_old_tool_results
        tail_cut = compressor._find_tail_cut_by_tokens
        find_summary = compressor._find_latest_context_summary
        summarise = compressor._generate_summary

        def probe() -> CompressProbe:
            current = self.active_probe
            if current is None:
                raise RuntimeError("compressor used outside an observed compress() call")
            return current

        def watched_head_size(messages: list) -> int:
            size = head_size(messages)
            probe().head_size = size
            return size

        def watched_prune(messages: list, *args: Any, **kwargs: Any) -> tuple:
            current = probe()
            current.pruning = True
            try:
                result, count = prune(messages, *args, **kwargs)
            finally:
                current.pruning = False
            current.pruned = result
            return result, count

        def watched_tail_cut(messages: list, head_end: int, *args: Any, **kwargs: Any) -> int:
            end = tail_cut(messages, head_end, *args, **kwargs)
            current = probe()
            current.compress_start, current.compress_end = head_end, end
            return end

        def watched_find_summary(messages: list, start: int, end: int) -> tuple:
            index, body = find_summary(messages, start, end)
            probe().summary_index = index
            return index, body

        def watched_summarise(turns: list, *args: Any, **kwargs: Any) -> Any:
            probe().turns = turns
            return summarise(turns, *args, **kwargs)

        compressor._protect_head_size = watched_head_size
        compressor._prune_old_tool_results = watched_prune
        compressor._find_tail_cut_by_tokens = watched_tail_cut
        compressor._find_latest_context_summary = watched_find_summary
        compressor._generate_summary = watched_summarise
        compressor._hermeslab_instrumented = True

    def observe(self, compressor: Any, messages: list[dict]) -> tuple[list[dict], CompressProbe]:
        """Run ``compressor.compress(messages)`` and return its output and what it decided."""
        self._instrument(compressor)
        current = CompressProbe()
        self.active_probe = current
        try:
            output = compressor.compress(messages)
        finally:
            self.active_probe = None
        return output, current

    # -- reading a probe

    def is_summary(self, message: dict) -> bool:
        """Hermes's own test for a handoff summary (by text or by in-process flag)."""
        cls = self.compressor_class
        return cls._is_context_summary_content(message.get("content")) or cls._has_compressed_summary_metadata(
            message
        )

    def outcome(self, compressor: Any, probe: CompressProbe) -> str:
        if probe.pruned is None:
            return "too_small"
        if probe.compress_start is None or probe.compress_end is None:
            raise RuntimeError("compress() pruned the messages but never chose a tail cut")
        if probe.compress_start >= probe.compress_end:
            return "nothing_to_compress"
        if compressor._last_compress_aborted:
            return "aborted"
        return "compressed"

    def prune_boundary(self, compressor: Any, n: int, probe: CompressProbe) -> int | None:
        """Index below which the prune pass rewrote old results and arguments.

        The budget walk stopped at ``n - prune_walk_steps``; Hermes then keeps
        at least ``protect_last_n`` messages protected, which can only move the
        boundary earlier.
        """
        if probe.pruned is None:
            return None
        walk_stop = n - probe.prune_walk_steps
        return min(walk_stop, n - min(compressor.protect_last_n, n))

    def prune_actions(self, original: list[dict], probe: CompressProbe) -> list[dict]:
        """Classify every message the prune pass changed, by what changed in it."""
        if probe.pruned is None:
            return []
        actions = []
        for index, (before, after) in enumerate(zip(original, probe.pruned)):
            if before == after:
                continue
            actions.append({"index": index, "action": self._prune_action(index, before, after, probe)})
        return actions

    def _prune_action(self, index: int, before: dict, after: dict, probe: CompressProbe) -> str:
        changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
        role = before.get("role")
        if role == "assistant" and changed == ["tool_calls"]:
            return "shrink_args"
        if role == "tool" and changed == ["content"]:
            old, new = before.get("content"), after.get("content")
            if isinstance(old, (list, dict)):
                return "image_placeholder"
            if new == self.dedupe_marker:
                return "dedupe"
            if new in probe.one_liners:
                return "one_line"
        raise RuntimeError(f"the prune pass changed message {index} ({role}, fields {changed}) in an unrecognised way")

    def summarised_span(self, probe: CompressProbe) -> list[int] | None:
        """``[start, end)`` of the messages passed to the summariser, located by identity."""
        if probe.turns is None or probe.pruned is None:
            return None
        if not probe.turns:
            return [probe.compress_end, probe.compress_end]
        first = next((i for i, message in enumerate(probe.pruned) if message is probe.turns[0]), None)
        end = None if first is None else first + len(probe.turns)
        if first is None or any(a is not b for a, b in zip(probe.pruned[first:end], probe.turns)):
            raise RuntimeError("the summarised turns are not a contiguous slice of the pruned messages")
        return [first, end]

    def decisions(self, compressor: Any, original: list[dict], probe: CompressProbe) -> dict:
        """Everything one compress() call decided, indexed against ``original``."""
        n = len(original)
        boundary = self.prune_boundary(compressor, n, probe)
        actions = self.prune_actions(original, probe)
        for action in actions:
            if action["action"] != "dedupe" and boundary is not None and action["index"] >= boundary:
                raise RuntimeError(
                    f"message {action['index']} was rewritten ({action['action']}) above the "
                    f"prune boundary {boundary}"
                )
        return {
            "outcome": self.outcome(compressor, probe),
            "head_size": probe.head_size,
            "compress_start": probe.compress_start,
            "compress_end": probe.compress_end,
            "prune_boundary": boundary,
            "pruned": actions,
            "previous_summary_index": probe.summary_index,
            "summarised_indices": self.summarised_span(probe),
        }

    @staticmethod
    def budgets(compressor: Any) -> dict:
        return {
            "context_length": compressor.context_length,
            "threshold_percent": compressor.threshold_percent,
            "threshold_tokens": compressor.threshold_tokens,
            "tail_token_budget": compressor.tail_token_budget,
            "max_summary_tokens": compressor.max_summary_tokens,
        }

    # -- operations

    def plan(self, messages: list[dict], context_length: int, compression_count: int,
             previous_summary: str | None) -> dict:
        compressor = self.new_compressor(context_length)
        compressor.compression_count = compression_count
        compressor._previous_summary = previous_summary
        output, probe = self.observe(compressor, copy.deepcopy(messages))
        return {
            **self.budgets(compressor),
            **self.decisions(compressor, messages, probe),
            "input_len": len(messages),
            "output_len": len(output),
        }

    def compress(self, messages: list[dict], context_length: int) -> dict:
        compressor = self.new_compressor(context_length)
        started = time.perf_counter()
        output = compressor.compress(messages)
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        return {"messages": output, "elapsed_ms": elapsed_ms}

    def time_compress(self, messages: list[dict], context_length: int, repeats: int) -> list[float]:
        """Milliseconds per ``compress()`` on a fresh compressor, after one untimed warm-up call."""
        self.new_compressor(context_length).compress(copy.deepcopy(messages))
        timings = []
        for _ in range(repeats):
            compressor = self.new_compressor(context_length)
            sample = copy.deepcopy(messages)
            gc.collect()  # start each timed call without the previous copies' garbage
            started = time.perf_counter()
            compressor.compress(sample)
            timings.append((time.perf_counter() - started) * 1000.0)
        return timings

    def replay(self, session: dict, context_length: int) -> dict:
        """Walk a recording call by call, compressing whenever Hermes's trigger fires.

        As in Hermes's agent, a leading system message is held apart from the
        transcript: it counts toward every prompt estimate but is never handed
        to ``compress()``. Before each recorded assistant message (one model
        call) the transcript is the compressor's current list plus the
        recorded messages that arrived since the previous call.
        """
        recording = session["messages"]
        tools = session.get("tools") or None
        system_prompt = ""
        if recording and recording[0].get("role") == "system":
            system_prompt = self.module._content_text_for_contains(recording[0].get("content"))
            recording = recording[1:]
        # Hermes caches tool-schema estimates by id(tools); ids of lists from
        # earlier requests can be reused, so start each recording uncached.
        self.metadata_module._TOOLS_TOKENS_CACHE.clear()
        compressor = self.new_compressor(context_length)
        transcript: list[dict] = []
        fed = 0
        calls = []

        def prompt_tokens() -> int:
            return self.estimate_request(transcript, system_prompt=system_prompt, tools=tools)

        for position, message in enumerate(recording):
            if message.get("role") != "assistant":
                continue
            transcript.extend(recording[fed:position])
            fed = position
            before = prompt_tokens()
            record: dict[str, Any] = {
                "message_index": position + (1 if system_prompt else 0),
                "prompt_before": before,
                "prompt_after": before,
                "compressed": False,
            }
            if compressor.should_compress(before):
                output, probe = self.observe(compressor, transcript)
                record["compress"] = self.compress_record(compressor, transcript, output, probe)
                record["compressed"] = True
                transcript = output
                record["prompt_after"] = prompt_tokens()
            calls.append(record)
        return {
            "id": session.get("id"),
            "context_length": context_length,
            "threshold_tokens": compressor.threshold_tokens,
            "calls": calls,
            "totals": replay_totals(calls, context_length),
        }

    def summaries_in(self, messages: list[dict]) -> int:
        """Handoff summaries held by a list, counting each one merged into another message."""
        prefix = self.module.SUMMARY_PREFIX
        text_of = self.module._content_text_for_contains
        return sum(text_of(m.get("content")).count(prefix) for m in messages)

    def compress_record(self, compressor: Any, before: list[dict], after: list[dict],
                        probe: CompressProbe) -> dict:
        decided = self.decisions(compressor, before, probe)
        start, end = decided["compress_start"], decided["compress_end"]
        window = probe.pruned[start:end] if probe.pruned is not None and start is not None else []
        latest_user = next((m for m in reversed(before) if self.is_real_user(m)), None)
        return {
            "outcome": decided["outcome"],
            "input_len": len(before),
            "output_len": len(after),
            "compress_start": start,
            "compress_end": end,
            "summarised_indices": decided["summarised_indices"],
            "previous_summary_index": decided["previous_summary_index"],
            "summaries_in_output": self.summaries_in(after),
            "latest_user_missing": latest_user is not None and not any(
                m.get("role") == "user" and m.get("content") == latest_user.get("content") and self.is_real_user(m)
                for m in after
            ),
            "summary_only": bool(window) and all(self.is_summary(m) for m in window),
        }

    def replay_many(self, sessions: list[dict], context_length: int) -> list[dict]:
        return [self.replay(session, context_length) for session in sessions]


def replay_totals(calls: list[dict], context_length: int) -> dict:
    compressions = [call["compress"] for call in calls if call["compressed"]]
    return {
        "calls": len(calls),
        "compress_calls": len(compressions),
        "ineffective_compress_calls": sum(1 for c in compressions if c["outcome"] != "compressed"),
        "over_window_after_compress": sum(
            1 for call in calls if call["compressed"] and call["prompt_after"] > context_length
        ),
        "two_summary_outputs": sum(1 for c in compressions if c["summaries_in_output"] > 1),
        "missing_latest_user_outputs": sum(1 for c in compressions if c["latest_user_missing"]),
        "summary_only_compressions": sum(1 for c in compressions if c["summary_only"]),
    }


# ---------------------------------------------------------------- request checking


def _messages(args: dict, key: str = "messages") -> list[dict]:
    value = args.get(key)
    if not isinstance(value, list):
        raise RequestError(f"'{key}' must be a list of message objects, got {type(value).__name__}")
    for index, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(f"'{key}'[{index}] must be an object with a string 'role'")
    return value


def _integer(args: dict, key: str, *, minimum: int, default: int | None = None) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"'{key}' must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise RequestError(f"'{key}' must be at least {minimum}, got {value}")
    return value


def _sessions(args: dict) -> list[dict]:
    sessions = args.get("sessions")
    if not isinstance(sessions, list):
        raise RequestError(f"'sessions' must be a list, got {type(sessions).__name__}")
    for index, session in enumerate(sessions):
        if not isinstance(session, dict):
            raise RequestError(f"sessions[{index}] must be an object")
        _messages(session)
        tools = session.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise RequestError(f"sessions[{index}]['tools'] must be a list or null")
    return sessions


def _optional_text(args: dict, key: str) -> str | None:
    value = args.get(key)
    if value is not None and not isinstance(value, str):
        raise RequestError(f"'{key}' must be a string or null, got {type(value).__name__}")
    return value


def build_handlers(engine: ReferenceEngine) -> dict[str, Callable[[dict], Any]]:
    """Map each operation name to a function of the request's ``args``."""
    started = time.time()
    return {
        "hello": lambda args: {
            "hermes_version": metadata.version(HERMES_DISTRIBUTION),
            "python": platform.python_version(),
            "pid": os.getpid(),
            "started_at": started,
        },
        "ping": lambda args: {},
        "plan": lambda args: engine.plan(
            _messages(args),
            _integer(args, "context_length", minimum=1),
            _integer(args, "compression_count", minimum=0, default=0),
            _optional_text(args, "previous_summary"),
        ),
        "compress": lambda args: engine.compress(_messages(args), _integer(args, "context_length", minimum=1)),
        "time_compress": lambda args: engine.time_compress(
            _messages(args),
            _integer(args, "context_length", minimum=1),
            _integer(args, "repeats", minimum=1),
        ),
        "replay_many": lambda args: engine.replay_many(_sessions(args), _integer(args, "context_length", minimum=1)),
    }


# ---------------------------------------------------------------- serving


def answer(line: str, handlers: dict[str, Callable[[dict], Any]]) -> dict:
    """The reply to one request line; never raises."""
    try:
        request = json.loads(line)
    except ValueError as exc:
        return {"id": None, "ok": False, "error": f"malformed request line (not JSON): {exc}", "traceback": ""}
    if not isinstance(request, dict):
        return {"id": None, "ok": False, "error": "a request must be a JSON object", "traceback": ""}
    request_id = request.get("id")
    op, args = request.get("op"), request.get("args", {})
    handler = handlers.get(op) if isinstance(op, str) else None
    if handler is None:
        known = ", ".join(sorted(handlers))
        return {"id": request_id, "ok": False, "error": f"unknown op {op!r}; known ops: {known}", "traceback": ""}
    if not isinstance(args, dict):
        return {"id": request_id, "ok": False, "error": "'args' must be a JSON object", "traceback": ""}
    try:
        return {"id": request_id, "ok": True, "result": handler(args)}
    except RequestError as exc:
        return {"id": request_id, "ok": False, "error": f"{op}: {exc}", "traceback": ""}
    except Exception as exc:
        return {
            "id": request_id,
            "ok": False,
            "error": f"{op} failed inside Hermes: {type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }


def encode(reply: dict) -> str:
    try:
        return json.dumps(reply, ensure_ascii=True)
    except (TypeError, ValueError) as exc:
        return json.dumps({
            "id": reply.get("id"),
            "ok": False,
            "error": f"the result could not be encoded as JSON: {exc}",
            "traceback": traceback.format_exc(),
        })


def serve(requests: TextIO, replies: TextIO, handlers: dict[str, Callable[[dict], Any]]) -> None:
    for line in requests:
        if not line.strip():
            continue
        replies.write(encode(answer(line, handlers)) + "\n")
        replies.flush()


def claim_reply_stream() -> TextIO:
    """Keep the real stdout for replies and send everything else written there to stderr."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return io.TextIOWrapper(os.fdopen(reply_fd, "wb"), encoding="utf-8", write_through=True)


def require_isolation() -> None:
    """Refuse to start where a user config or a provider key could reach Hermes."""
    if not os.environ.get("HERMES_HOME"):
        raise SystemExit("hermes_worker: set HERMES_HOME to an empty directory before starting the worker")
    keys = sorted(name for name in os.environ if name.endswith("_API_KEY"))
    if keys:
        raise SystemExit(f"hermes_worker: remove provider keys from the environment first: {', '.join(keys)}")


def main() -> int:
    replies = claim_reply_stream()
    require_isolation()
    handlers = build_handlers(ReferenceEngine())
    requests = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    serve(requests, replies, handlers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
