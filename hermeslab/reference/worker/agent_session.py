"""A whole recorded session replayed the way Hermes 0.19.0's agent drives its compressor.

``ReferenceEngine.replay`` asks ``should_compress`` on a rough estimate before
every call; Hermes's agent does more. This module walks the session turn by
turn with the agent's own checks, calling Hermes wherever Hermes has the
function:

* turn prologue (``agent.turn_context``): the cheap gate
  ``_should_run_preflight_estimate``, the request estimate, the deferral
  ``should_defer_preflight_to_real_usage`` (and raising ``last_prompt_tokens``
  to the estimate, never over the -1 sentinel), then ``should_compress`` and
  up to 3 passes judged by ``_compression_made_progress``;
* before every call (``conversation_loop``): the pressure estimate (messages
  with the system message, plus the tool schemas), more than one message,
  fewer than 3 compressions this turn (the counter the overflow path shares),
  no deferral, no cooldown, ``should_compress``;
* the provider: the request billed exactly (``session_billing``), refused
  above the window with an OpenAI-style message, else the billed count is
  reported through ``update_from_response``;
* overflow: ``get_context_length_from_provider_error`` (a lower limit updates
  the model), the shared counter (> 3 ends the turn), compression, then retry
  on fewer rows, < 95% of the rough estimate or a lowered window, else the
  turn ends ("cannot compress further");
* after tools: the token source (``last_prompt_tokens`` > 0, 0 for the -1
  sentinel, else the request estimate without the system prompt), then
  ``should_compress``.

Every compression goes through Hermes's own agent wrapper
``conversation_compression.compress_context`` on a minimal stand-in agent (no
session database, no memory provider, no todo list, the system prompt kept
byte for byte), so its no-progress check, its real-user-turn guarantee and
its bookkeeping (-1 sentinel, awaiting real usage, the verdict latch) are
Hermes's. The turns and recorded replies come from the client, planned the
way hermeslab's replay plans them, so both sides send the same calls.

Hermes's request normalisation is reproduced at the two points its loop
applies it: the pressure estimate and the send see a copy of the
conversation with every text content stripped and tool-call arguments
re-serialised as compact JSON with sorted keys (non-JSON arguments go through
Hermes's own repair); the transcript keeps what it holds. Hermes does this
inline in its loop, so ``_normalised`` restates it; everything else is
Hermes's own code.
"""

from __future__ import annotations

import copy
import json
import types
from typing import Any

from message_digest import compared
from session_billing import RequestBill


def _refusal_text(limit: int, prompt: int) -> str:
    return (f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
            f"{prompt} tokens. Please reduce the length of the messages.")


def _normalised(messages: list[dict], repair: Any) -> list[dict]:
    """The request copy Hermes's loop sends: texts stripped, arguments compact with sorted keys."""
    out = []
    for message in messages:
        message = dict(message)
        if isinstance(message.get("content"), str):
            message["content"] = message["content"].strip()
        calls = message.get("tool_calls")
        if calls:
            normalised = []
            for call in calls:
                if isinstance(call, dict) and "function" in call:
                    function = dict(call["function"])
                    try:
                        function["arguments"] = json.dumps(json.loads(function["arguments"]), separators=(",", ":"),
                                                           sort_keys=True)
                    except Exception:
                        function["arguments"] = repair(function["arguments"], function.get("name", "?"))
                    call = {**call, "function": function}
                normalised.append(call)
            message["tool_calls"] = normalised
        out.append(message)
    return out


class _StandInAgent:
    """What ``compress_context`` reads from an agent: no database, no memory, no todos, a fixed prompt."""

    api_mode = None
    session_id = None
    platform = "cli"
    model = "hermeslab-reference"
    log_prefix = ""
    event_callback = None
    _session_db = None
    _memory_manager = None
    _memory_store = None
    _compression_feasibility_checked = True
    compression_in_place = True

    def __init__(self, compressor: Any, system_prompt: str, tools: list | None):
        self.context_compressor = compressor
        self.tools = tools
        self._system_prompt = system_prompt
        self._cached_system_prompt = system_prompt
        self._todo_store = types.SimpleNamespace(format_for_injection=lambda: None)
        self._compression_warning = None

    def _build_system_prompt(self, _system_message: str) -> str:
        return self._system_prompt

    def _invalidate_system_prompt(self) -> None:
        self._cached_system_prompt = None

    def _emit_status(self, _text: str) -> None:
        pass

    def _emit_warning(self, _text: str) -> None:
        pass


class AgentSessionReplay:
    """One session through Hermes's agent triggers; ``run`` returns what happened, call by call."""

    def __init__(self, engine: Any, session: dict, context_length: int, bill: RequestBill):
        from agent import conversation_compression, conversation_loop, model_metadata, turn_context

        self.engine = engine
        self.compress_context = conversation_compression.compress_context
        self.rough_messages = model_metadata.estimate_messages_tokens_rough
        self.rough_request = model_metadata.estimate_request_tokens_rough
        self.rough_tools = model_metadata._estimate_tools_tokens_rough
        self.provider_limit = model_metadata.get_context_length_from_provider_error
        self.preflight_gate = turn_context._should_run_preflight_estimate
        self.made_progress = turn_context._compression_made_progress
        self.repair_arguments = conversation_loop._repair_tool_call_arguments
        self.session = session
        self.system_prompt = session.get("system_prompt") or ""
        self.tools = session.get("tools") or None
        self.results = session.get("results") or {}
        self.bill = bill
        model_metadata._TOOLS_TOKENS_CACHE.clear()
        self.compressor = engine.new_compressor(context_length)
        self.agent = _StandInAgent(self.compressor, self.system_prompt, self.tools)
        self.messages: list[dict] = []
        self.calls: list[dict] = []
        self.compressions: list[dict] = []
        self.refusals: list[dict] = []
        self.statuses: list[str] = []
        self._compress_invocations = 0
        original = self.compressor.compress

        def counted_compress(*args: Any, **kwargs: Any) -> Any:
            self._compress_invocations += 1
            return original(*args, **kwargs)

        self.compressor.compress = counted_compress

    # -- measuring

    def _api_messages(self) -> list[dict]:
        """The request as Hermes's loop sends it (and measures its pressure on): normalised."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return _normalised(system + self.messages, self.repair_arguments)

    def _request_estimate(self) -> int:
        return self.rough_request(self.messages, system_prompt=self.system_prompt, tools=self.tools)

    # -- compressing

    def _compress(self, trigger: str, approx_tokens: int | None) -> bool:
        """Hermes's agent wrapper on the transcript; True when it returned a new list."""
        before = self.messages
        invoked = self._compress_invocations
        output, _prompt = self.compress_context(self.agent, before, self.system_prompt, approx_tokens=approx_tokens)
        changed = output is not before
        if self._compress_invocations > invoked:
            self.compressions.append({"call": len(self.calls), "trigger": trigger, "input_len": len(before),
                                      "output_len": len(output), "changed": changed, **compared(output)})
        self.messages = output
        return changed

    # -- the turn

    def run(self) -> dict:
        for turn in self.session["turns"]:
            self.statuses.append(self._turn(turn))
        return {
            "id": self.session.get("id"),
            "calls": self.calls,
            "compressions": self.compressions,
            "refusals": self.refusals,
            "statuses": self.statuses,
            "threshold_tokens": self.compressor.threshold_tokens,
            "prompt_tokens_total": sum(call["prompt_tokens"] for call in self.calls),
        }

    def _turn(self, turn: dict) -> str:
        for text in turn.get("users") or ():
            self.messages.append({"role": "user", "content": text})
        attempts = 0
        self._preflight()
        replies = turn.get("replies") or []
        stop_after = turn.get("stop_after")
        position = 0
        while position < len(replies):
            attempts, ended = self._pressure(attempts)
            request = self._api_messages()
            billed = self.bill.request(request, self.tools)
            if billed > self.compressor.context_length:
                self.refusals.append({"call": len(self.calls), "prompt_tokens": billed})
                attempts, retry = self._overflow(attempts, billed)
                if not retry:
                    return "failed"
                continue
            self.calls.append({"reply": position, "prompt_tokens": billed, "rough": self._request_estimate(),
                               "messages": len(self.messages)})
            self.compressor.update_from_response({"prompt_tokens": billed, "completion_tokens": 0,
                                                  "total_tokens": billed})
            reply = copy.deepcopy(replies[position])
            position += 1
            self.messages.append(reply)
            calls = reply.get("tool_calls") or []
            if not calls:
                return "completed"
            ids = [call.get("id") for call in calls]
            for call_id in ids:
                self.messages.append({"role": "tool", "tool_call_id": call_id, "content": self.results[call_id]})
            if stop_after is not None and stop_after in ids:
                return "interrupted"
            self._after_tools()
        return "completed"

    def _preflight(self) -> None:
        compressor = self.compressor
        if not self.preflight_gate(self.messages, compressor.protect_first_n, compressor.protect_last_n,
                                   compressor.threshold_tokens):
            return
        tokens = self._request_estimate()
        deferred = compressor.should_defer_preflight_to_real_usage(tokens)
        if not deferred:
            last = compressor.last_prompt_tokens
            if last >= 0 and tokens > last:
                compressor.last_prompt_tokens = tokens
        if deferred or compressor.get_active_compression_failure_cooldown():
            return
        if not compressor.should_compress(tokens):
            return
        for _ in range(3):
            count_before, tokens_before = len(self.messages), tokens
            self._compress("preflight", tokens)
            tokens = self._request_estimate()
            if not self.made_progress(count_before, len(self.messages), tokens_before, tokens):
                break
            if not compressor.should_compress(tokens):
                break

    def _pressure(self, attempts: int) -> tuple[int, bool]:
        compressor = self.compressor
        pressure = self.rough_messages(self._api_messages()) + (self.rough_tools(self.tools) if self.tools else 0)
        if (len(self.messages) > 1 and attempts < 3
                and not compressor.should_defer_preflight_to_real_usage(pressure)
                and not compressor.get_active_compression_failure_cooldown()
                and compressor.should_compress(pressure)):
            attempts += 1
            self._compress("pressure", pressure)
        return attempts, False

    def _overflow(self, attempts: int, billed: int) -> tuple[int, bool]:
        compressor = self.compressor
        old = compressor.context_length
        lowered = self.provider_limit(_refusal_text(old, billed), old)
        if lowered is not None:
            compressor.update_model(model=compressor.model, context_length=lowered, base_url=compressor.base_url,
                                    api_key=compressor.api_key, provider=compressor.provider,
                                    api_mode=getattr(compressor, "api_mode", None))
        attempts += 1
        if attempts > 3:
            return attempts, False
        count_before = len(self.messages)
        tokens_before = self.rough_messages(self.messages)
        self._compress("overflow", None)
        tokens_after = self.rough_messages(self.messages)
        progress = (len(self.messages) < count_before or (0 < tokens_after < tokens_before * 0.95)
                    or (lowered is not None and lowered < old))
        return attempts, progress

    def _after_tools(self) -> None:
        compressor = self.compressor
        if compressor.last_prompt_tokens > 0:
            tokens = compressor.last_prompt_tokens
        elif compressor.last_prompt_tokens == -1:
            tokens = 0
        else:
            tokens = self.rough_request(self.messages, tools=self.tools)
        if compressor.should_compress(tokens):
            self._compress("turn", compressor.last_prompt_tokens)
