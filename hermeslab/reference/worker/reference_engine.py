"""Hermes's own ContextCompressor, instrumented, and the operations the worker offers on it.

Hermes is only called here, never re-implemented. Its summary call is
answered by a local stand-in with fixed text (``stub_summary``), so no request
leaves the machine; the compressor's boundary and summary methods and two
module helpers are wrapped so that each ``compress()`` call fills a
``CompressProbe``, from which ``compress_probe`` reads every decision.

Replays follow Hermes's agent: the system prompt is held apart from the
transcript handed to ``compress()`` but counted in every prompt estimate, and
the stand-in summary has the size of a short real one, because it stays in the
context and is counted by every later trigger check. With these two choices a
16K replay of the mini-swe-agent recordings reproduces the figures measured
independently for Hermes 0.19.0 (648 compress() calls, 87 still over the window, 62 outputs with two
summaries, 62 missing the latest user message, 143 summarising only the
previous summary).

Its siblings are imported by their top-level names, as in the worker process,
where this directory comes first on ``sys.path`` (see
``hermeslab.reference.worker``); Hermes itself is imported only when an
engine is built.
"""

from __future__ import annotations

import copy
import gc
import time
import types
from typing import Any

from compress_probe import CompressProbe, budgets, decisions
from stub_summary import STUB_SUMMARY


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

    def is_summary(self, message: dict) -> bool:
        """Hermes's own test for a handoff summary (by text or by in-process flag)."""
        cls = self.compressor_class
        return cls._is_context_summary_content(message.get("content")) or cls._has_compressed_summary_metadata(
            message
        )

    # -- operations

    def plan(self, messages: list[dict], context_length: int, compression_count: int,
             previous_summary: str | None) -> dict:
        compressor = self.new_compressor(context_length)
        compressor.compression_count = compression_count
        compressor._previous_summary = previous_summary
        output, probe = self.observe(compressor, copy.deepcopy(messages))
        return {
            **budgets(compressor),
            **decisions(compressor, messages, probe, self.dedupe_marker),
            "input_len": len(messages),
            "output_len": len(output),
        }

    def compress(self, messages: list[dict], context_length: int) -> dict:
        compressor = self.new_compressor(context_length)
        started = time.perf_counter()
        output = compressor.compress(messages)
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        return {"messages": output, "elapsed_ms": elapsed_ms}

    def time_compress(self, messages: list[dict], context_length: int, repeats: int,
                      with_cpu: bool = False) -> list[float] | dict:
        """Milliseconds per ``compress()`` on a fresh compressor, after one untimed warm-up call.

        With ``with_cpu`` the answer is ``{"ms": [...], "cpu_ms": [...]}``: each
        call's wall time and this worker's CPU time (``time.process_time``) in it.
        """
        self.new_compressor(context_length).compress(copy.deepcopy(messages))
        timings, cpu = [], []
        for _ in range(repeats):
            compressor = self.new_compressor(context_length)
            sample = copy.deepcopy(messages)
            gc.collect()  # start each timed call without the previous copies' garbage
            cpu_started = time.process_time()
            started = time.perf_counter()
            compressor.compress(sample)
            timings.append((time.perf_counter() - started) * 1000.0)
            cpu.append((time.process_time() - cpu_started) * 1000.0)
        return {"ms": timings, "cpu_ms": cpu} if with_cpu else timings

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
        decided = decisions(compressor, before, probe, self.dedupe_marker)
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

    def agent_replay_many(self, sessions: list[dict], context_length: int, counter: dict) -> list[dict]:
        """Whole sessions through Hermes's agent triggers (``agent_session``), prompts billed exactly.

        ``counter`` names the tokenizer: ``bindings_path`` of bpe-openai's compiled module, ``encoding``,
        and ``probe`` pairs [text, tokens] the loaded counter must reproduce before anything is replayed.
        """
        from agent_session import AgentSessionReplay
        from session_billing import RequestBill, load_text_counter

        text_tokens = load_text_counter(counter["bindings_path"], counter["encoding"])
        for text, expected in counter.get("probe") or ():
            if text_tokens(text) != expected:
                raise RuntimeError(f"the worker's token counter disagrees with hermeslab's on {text!r}")
        bill = RequestBill(text_tokens)
        return [AgentSessionReplay(self, session, context_length, bill).run() for session in sessions]

    def replay_many(self, sessions: list[dict], context_length: int) -> list[dict]:
        return [self.replay(session, context_length) for session in sessions]

    def replay_many_timed(self, sessions: list[dict], context_length: int) -> dict:
        """``replay_many`` with the wall and CPU seconds of the replays alone (decoding the request
        and encoding the answer happen outside the timed region)."""
        cpu_started = time.process_time()
        started = time.perf_counter()
        results = self.replay_many(sessions, context_length)
        return {"results": results, "seconds": time.perf_counter() - started,
                "cpu_seconds": time.process_time() - cpu_started}


def replay_totals(calls: list[dict], context_length: int) -> dict:
    """The counts a replay reports over its model calls (see ``ReferenceEngine.replay``)."""
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
