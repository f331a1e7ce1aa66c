"""The compaction zoo: each preset's trigger, what it keeps verbatim and what replaces the rest, against its source.

Every test names the source line it pins (commit and path as in docs/presets.md):

* Codex CLI — openai/codex: compact.rs @ 0100b103, openai_models.rs @ 8db07003
* Gemini CLI — google-gemini/gemini-cli @ 5411f113
* opencode — anomalyco/opencode @ fd78ec63
* Roo Code — RooCodeInc/Roo-Code @ cb836567

Two presets follow Anthropic's documentation instead of source (pages as published on 2026-08-22):

* Claude Code — code.claude.com/docs/en/model-config, context-window, costs
* Tool-result clearing — platform.claude.com/docs/en/build-with-claude/context-editing
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.cli import main
from hermeslab.context.policy import CompressionPolicy
from hermeslab.context.pipeline import CompressionState
from hermeslab.context.types import SummaryOutcome, is_summary_message
from hermeslab.context.zoo_common import ZooInput
from hermeslab.core.config import ConfigError
from hermeslab.core.messages import validate_messages
from hermeslab.eval.metrics import role_order_problems
from hermeslab.policies.claude import CLAUDE_CODE, CLEAR_TOOL_USES, CLEARED as CLAUDE_CLEARED, KEEP_TOOL_USES
from hermeslab.policies.codex import NAME as CODEX, OPENING, USER_MESSAGE_BUDGET, approx_tokens, select_user_messages
from hermeslab.policies.gemini import ACK, FAILED_FLAG, NAME as GEMINI, TOOL_OUTPUT_BUDGET, estimate_text, split_point
from hermeslab.policies.loading import load_config, preset_values
from hermeslab.policies.opencode import ASK, CLEARED, GO_ON, NAME as OPENCODE, estimate_tokens, outputs_to_clear
from hermeslab.policies.registry import registry
from hermeslab.policies.roo import NAME as ROO, condense_refusal, hide_older_half
from hermeslab.policies.running import budgets_of, make_compactor
from hermeslab.eval.replay_compression import FixedSummariser

from test_context_conversations import conversations

ZOO = (CODEX, GEMINI, OPENCODE, ROO, CLAUDE_CODE, CLEAR_TOOL_USES)
#: Each zoo preset's strategy, as its policy module registers it.
STRATEGIES = {preset_values(name)["compression.strategy"]: registry().strategies[
    preset_values(name)["compression.strategy"]][0].run for name in ZOO}
PROJECT_RECORDINGS = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"


class Failing:
    """A summariser that never produces a summary."""

    def summarise(self, request):
        return SummaryOutcome(body="", error="no model")


def _threshold(preset: str, window: int, max_tokens: int | None = None, **overrides) -> int:
    config = load_config(preset, {"model.context_length": window, "model.max_tokens": max_tokens, **overrides})
    return budgets_of(config.compression, window, max_tokens).threshold_tokens


def _fires_exactly_at(preset: str, window: int, max_tokens: int | None, expected: int) -> None:
    config = load_config(preset, {"model.context_length": window, "model.max_tokens": max_tokens})
    budgets = budgets_of(config.compression, window, max_tokens)
    policy = CompressionPolicy(config.compression, budgets, CompressionState())
    assert budgets.threshold_tokens == expected
    assert policy.should_compress(expected, "pressure")
    assert not policy.should_compress(expected - 1, "pressure")


def _zoo(preset: str, window: int = 1_000_000, summariser=None, max_tokens: int | None = None) -> ZooInput:
    config = load_config(preset, {"model.context_length": window, "model.max_tokens": max_tokens})
    compactor = make_compactor(config, summariser or FixedSummariser("THE SUMMARY"))
    return ZooInput(cfg=config.compression, budgets=compactor.budgets, summariser=compactor.summariser,
                    estimate=compactor._estimate_message, max_tokens=max_tokens)


def _call(call_id: str, name: str = "read_file") -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]}


def _tool(call_id: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _conversation() -> list[dict]:
    return [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "fix the bug in parser.py"},
            _call("c1"), _tool("c1", "def parse(): ..." * 20),
            {"role": "assistant", "content": "Found it; patching."},
            {"role": "user", "content": "also add a test"},
            _call("c2", "write_file"), _tool("c2", "ok"),
            {"role": "assistant", "content": "Done."}]


# ---------------------------------------------------------------- the presets as configs


def test_every_zoo_preset_loads_by_name_and_in_a_spec():
    for name in ZOO:
        assert load_config(name).compression.preset == name
        config = load_config(f"{name},model.context_length=8000")
        assert config.model.context_length == 8000 and config.compression.strategy in STRATEGIES


def test_each_zoo_preset_names_a_strategy_of_its_own_policy_module():
    for name in ZOO:
        preset, entry = registry().presets[name]
        assert registry().strategies[preset.overrides["compression.strategy"]][1] is entry


def test_an_unknown_strategy_is_still_refused():
    with pytest.raises(ConfigError, match="compression.strategy"):
        load_config("seed,compression.strategy=codex")


# ---------------------------------------------------------------- Codex CLI


def test_codex_fires_at_nine_tenths_of_the_window():
    """openai_models.rs (ModelInfo::auto_compact_token_limit): ``(context_window * 9) / 10``; codex.rs compares
    ``total_usage_tokens >= auto_compact_limit``."""
    _fires_exactly_at(CODEX, 272_000, None, 244_800)
    _fires_exactly_at(CODEX, 8_000, 4_000, 7_200)  # the whole window: the output cap plays no part


def test_codex_keeps_the_instructions_and_the_users_messages_then_the_summary():
    """compact.rs 162-165 (user messages collected, history rebuilt from the initial context) and 268-288
    (each kept user message, then the summary as the last user message, after SUMMARY_PREFIX, line 161)."""
    messages = _conversation()
    result = STRATEGIES["codex_user_messages"](messages, _zoo(CODEX), {})
    out = result.messages
    assert out[0] == messages[0]
    assert [m["content"] for m in out[1:-1]] == ["fix the bug in parser.py", "also add a test"]
    assert all(m["role"] == "user" for m in out[1:])
    assert is_summary_message(out[-1]) and out[-1]["content"] == f"{OPENING}\nTHE SUMMARY"
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in out)
    assert result.condensed == len(messages) - 1


def test_codex_takes_user_messages_newest_first_up_to_20000_tokens_cutting_the_oldest_taken():
    """compact.rs 33 (COMPACT_USER_MESSAGE_MAX_TOKENS = 20_000) and 249-265 (newest first; the first that does
    not fit is cut to what remains, then the walk stops; the selection is put back in order)."""
    assert USER_MESSAGE_BUDGET == 20_000
    old, middle, new = "o" * 400, "m" * 40_000, "n" * 40_000  # 100, 10,000 and 10,000 tokens
    assert [approx_tokens(t) for t in (old, middle, new)] == [100, 10_000, 10_000]
    assert select_user_messages([old, middle, new]) == [middle, new]
    cut = select_user_messages([middle, "x" * 79_000, new], budget=10_100)
    assert cut[1] == new and cut[0] != "x" * 79_000 and approx_tokens(cut[0]) < 200
    assert select_user_messages(["a" * 9, "b" * 8], budget=2) == ["b" * 8]


def test_codex_earlier_summaries_are_not_kept_as_user_messages():
    """compact.rs 209-227: collect_user_messages skips messages that start with the summary prefix."""
    zoo = _zoo(CODEX)
    first = STRATEGIES["codex_user_messages"](_conversation(), zoo, {}).messages
    second = STRATEGIES["codex_user_messages"](first + [{"role": "user", "content": "next"}], zoo, {}).messages
    assert [m["content"] for m in second[1:-1]] == ["fix the bug in parser.py", "also add a test", "next"]


def test_codex_without_a_summary_still_compacts_with_a_placeholder():
    """compact.rs 278-282: an empty summary becomes a fixed placeholder, the history is replaced anyway."""
    result = STRATEGIES["codex_user_messages"](_conversation(), _zoo(CODEX, summariser=Failing()), {})
    assert result.messages[-1]["content"].startswith(OPENING) and result.record["summary_missing"]
    assert not result.aborted


# ---------------------------------------------------------------- Gemini CLI


def test_gemini_fires_at_half_the_window():
    """chatCompressionService.ts 41 (DEFAULT_COMPRESSION_TOKEN_THRESHOLD = 0.5) and 275 (no compression while
    ``originalTokenCount < threshold * tokenLimit(model)``)."""
    _fires_exactly_at(GEMINI, 8_000, None, 4_000)
    _fires_exactly_at(GEMINI, 8_001, None, 4_001)  # 4,000 < 4,000.5 still waits
    _fires_exactly_at(GEMINI, 1_048_576, 8_192, 524_288)


def test_gemini_splits_at_a_user_message_past_seventy_percent_of_the_characters():
    """chatCompressionService.ts 47 (keep 0.3) and 60-100: the first user message (not a tool result) with at least
    70% of the characters before it; else everything when the history ends in a reply without tool calls."""
    history = [{"role": "user", "content": "a" * 100}, {"role": "assistant", "content": "b" * 500},
               {"role": "user", "content": "c" * 10}, {"role": "assistant", "content": "d" * 300},
               {"role": "user", "content": "e" * 10}, {"role": "assistant", "content": "f" * 10}]
    assert split_point(history) == 4
    assert split_point(history[:4]) == 4  # no user message past 70%: ends in a plain reply, compress it all
    assert split_point(history[:2] + [_call("x"), _tool("x", "t" * 900)]) == 0


def test_gemini_keeps_the_newest_part_behind_a_snapshot_and_an_acknowledgement():
    """chatCompressionService.ts 431-441: [user: summary, model: acknowledgement, ...kept history]."""
    messages = _conversation() + [{"role": "user", "content": "and update the docs"},
                                  {"role": "assistant", "content": "Updated."}]
    result = STRATEGIES["gemini_state_snapshot"](messages, _zoo(GEMINI), {})
    out = result.messages
    cut = split_point(messages[1:])
    assert out[0] == messages[0]
    assert is_summary_message(out[1]) and out[1]["role"] == "user" and out[1]["content"] == "THE SUMMARY"
    assert out[2] == {"role": "assistant", "content": ACK}
    assert out[3:] == messages[1 + cut:] and out[3]["role"] == "user"


def test_gemini_refuses_a_compression_that_grows_the_prompt_and_then_only_shortens_outputs():
    """chatCompressionService.ts 462-471 (a larger result is refused) and 296-321 with client.ts 1216-1221 (after
    that failure automatic compressions only truncate tool outputs)."""
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    memory: dict = {}
    zoo = _zoo(GEMINI, summariser=FixedSummariser("long " * 500))
    refused = STRATEGIES["gemini_state_snapshot"](messages, zoo, memory)
    assert refused.messages == messages and refused.record["outcome"] == "inflated" and memory[FAILED_FLAG]
    again = STRATEGIES["gemini_state_snapshot"](messages + [{"role": "user", "content": "more"}], zoo, memory)
    assert again.record["outcome"] == "nothing_to_summarise" and again.summary_text is None


def test_gemini_shortens_tool_outputs_older_than_the_newest_50000_tokens():
    """chatCompressionService.ts 52 (50,000-token budget) and 145-224 (newest first; an output that would pass the
    budget is shortened, fileUtils.ts 704-724: first 20% and last 80% of the allowance, config.ts 478: 40,000)."""
    assert TOOL_OUTPUT_BUDGET == 50_000 and estimate_text("a" * 4) == 1 and estimate_text("é") == 1.5
    big = "x" * 120_000  # 30,000 tokens each
    messages = [{"role": "user", "content": "go"}, _call("1"), _tool("1", big), _call("2"), _tool("2", big),
                _call("3"), _tool("3", big), {"role": "assistant", "content": "done"}]
    result = STRATEGIES["gemini_state_snapshot"](messages, _zoo(GEMINI, window=10_000_000), {})
    assert result.record["shortened_outputs"] == [2, 4]  # the newest output fits the budget whole


# ---------------------------------------------------------------- opencode


def test_opencode_fires_at_the_window_less_the_output_reserve():
    """compaction.ts 42-47: usable = context - maxOutputTokens(model), compaction when ``count >= usable``;
    transform.ts 21: OUTPUT_TOKEN_MAX = 32,000 caps the reserve."""
    _fires_exactly_at(OPENCODE, 100_000, 4_000, 96_000)
    _fires_exactly_at(OPENCODE, 100_000, 64_000, 68_000)
    _fires_exactly_at(OPENCODE, 100_000, None, 68_000)


def test_opencode_estimates_a_quarter_token_per_utf16_unit_rounded_half_up():
    """token.ts @ 0f7d18ad 2-6: Math.round(length / 4), where a JavaScript length counts UTF-16 code units."""
    assert [estimate_tokens("a" * n) for n in (0, 1, 2, 5, 6, 10)] == [0, 0, 1, 1, 2, 3]
    assert estimate_tokens("\U0001F600" * 2) == 1  # two astral characters are four code units


def test_opencode_clears_outputs_past_the_newest_40000_tokens_when_that_frees_over_20000():
    """compaction.ts 50-51 (PRUNE_MINIMUM 20,000, PRUNE_PROTECT 40,000), 53 (``skill`` protected), 68-90
    (backwards, the last two user turns left alone, stop at a summary; once the count passes 40,000 that
    output and every older one is cleared, and only when together they pass 20,000)."""
    chunk = "a" * 86_400  # a quarter token per character: 21,600 tokens
    t = estimate_tokens(chunk)
    assert t == 21_600
    history = [{"role": "user", "content": "start"}]
    for n in range(4):
        history += [_call(f"r{n}"), _tool(f"r{n}", chunk)]
    history += [_call("s", "skill"), _tool("s", chunk), {"role": "user", "content": "next"},
                _call("p1"), _tool("p1", chunk), {"role": "user", "content": "last"}, _call("p2"), _tool("p2", chunk)]
    chosen, counted, pruned = outputs_to_clear(history)
    assert chosen == [2, 4, 6]  # index 8 stays under 40,000; skill and the last two turns never count
    assert counted == 4 * t and pruned == 3 * t
    old, newest = "a" * 76_000, "a" * 72_000  # 19,000 and 18,000 tokens
    small = [{"role": "user", "content": "start"}, _call("x"), _tool("x", old),
             _call("y"), _tool("y", chunk), _call("z"), _tool("z", newest),
             {"role": "user", "content": "u1"}, {"role": "user", "content": "u2"}]
    total = estimate_tokens(old) + t + estimate_tokens(newest)
    assert outputs_to_clear(small) == ([], total, estimate_tokens(old))  # ~19,000 freed: not over 20,000
    summary = [{"role": "assistant", "content": "old summary", "_compressed_summary": True}]
    assert outputs_to_clear(history[:1] + summary + history[1:])[0] == [3, 5, 7]
    assert outputs_to_clear(history[:7] + summary + history[7:])[0] == []  # stops at the earlier summary
    result = STRATEGIES["opencode_prune_summary"]([{"role": "system", "content": "s"}] + history,
                                                       _zoo(OPENCODE), {})
    assert result.record["cleared_outputs"] == chosen


def test_opencode_replaces_the_whole_conversation_with_request_summary_and_go_on():
    """compaction.ts process(): the summary is an assistant message answering the compaction request
    (message-v2.ts turns the compaction part into a user question; filterCompacted starts the history there);
    an automatic compaction adds a synthetic user message asking to continue."""
    messages = _conversation()
    out = STRATEGIES["opencode_prune_summary"](messages, _zoo(OPENCODE), {}).messages
    assert out[0] == messages[0]
    assert [(m["role"], m["content"]) for m in out[1:]] == [("user", ASK), ("assistant", "THE SUMMARY"),
                                                              ("user", GO_ON)]
    assert is_summary_message(out[2])
    assert CLEARED not in json.dumps(out)


# ---------------------------------------------------------------- Roo Code


def test_roo_fires_at_the_percent_or_past_the_room_left_by_the_reserve():
    """context-management/index.ts 26 (TOKEN_BUFFER_PERCENTAGE 0.1), 270 and anthropic.ts 204 (reserve: maxTokens
    or 8,192), 284 (allowed = window * 0.9 - reserve), 306-308 (percent >= threshold or tokens > allowed);
    Task.ts 3999 (autoCondenseContextPercent defaults to 100)."""
    _fires_exactly_at(ROO, 100_000, 4_000, 86_001)
    _fires_exactly_at(ROO, 200_000, None, 171_809)
    assert _threshold(ROO, 100_000, 4_000, **{"compression.threshold": 0.5}) == 50_000
    assert _threshold(ROO, 8_000, None) == 1  # the reserve exceeds 90% of the window: every request condenses


def test_roo_condenses_everything_into_one_user_summary():
    """condense/index.ts 458-487 (the summary, a user message, is appended and every earlier message is hidden)
    and 546-553 (the model then sees the summary onwards: a fresh start)."""
    messages = _conversation()
    result = STRATEGIES["roo_condense"](messages, _zoo(ROO), {})
    assert result.messages[0] == messages[0] and len(result.messages) == 2
    summary = result.messages[1]
    assert summary["role"] == "user" and is_summary_message(summary) and summary["content"].endswith("THE SUMMARY")


def test_roo_will_not_condense_right_after_a_condense():
    """condense/index.ts 279-295: nothing but the last summary (and at most one more message) is not condensed."""
    condensed = STRATEGIES["roo_condense"](_conversation(), _zoo(ROO), {}).messages[1:]
    assert condense_refusal(condensed) is not None
    assert condense_refusal(condensed + [{"role": "user", "content": "x"}]) == "condensed recently"
    assert condense_refusal(condensed + [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]) is None


def test_roo_falls_back_to_hiding_the_older_half_when_condensing_fails():
    """context-management/index.ts 333-335 (fallback when tokens > allowed, fraction 0.5) and 83-84, 96, 113-119
    (keep the first message, hide an even count after it, a marker where they were)."""
    history = [{"role": "user", "content": "task"}]
    for n in range(5):
        history += [_call(f"c{n}"), _tool(f"c{n}", "out")]
    history.append({"role": "assistant", "content": "done"})
    kept, hidden = hide_older_half(history)
    assert hidden == 4  # 11 of Roo's messages after the first: floor(11 * 0.5) = 5, made even
    # The marker is a user turn right behind the first message, which the API joins to it.
    assert kept[0] == {"role": "user", "content": "task\n\n[4 earlier messages hidden to fit the context window]"}
    assert kept[1:] == history[5:]
    messages = [{"role": "system", "content": "s"}] + history
    result = STRATEGIES["roo_condense"](messages, _zoo(ROO, window=8_000, summariser=Failing()), {})
    assert result.record["outcome"] == "truncated" and result.messages[1:] == kept
    wide = STRATEGIES["roo_condense"](messages, _zoo(ROO, summariser=Failing()), {})
    assert wide.messages == messages and wide.aborted  # under the room: nothing is hidden


def test_roo_s_sliding_window_ends_its_gap_before_an_assistant_message_in_any_history():
    """Roo's even count assumes strict alternation; with two user messages in a row the gap steps back."""
    history = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "a1"},
               {"role": "user", "content": "q2"}, {"role": "user", "content": "q3 (queued)"},
               {"role": "assistant", "content": "a3"}, {"role": "user", "content": "q4"},
               {"role": "assistant", "content": "a4"}]
    kept, hidden = hide_older_half(history)  # floor(6 * 0.5) = 3; Roo's even 2 would put "q3" behind the marker
    assert hidden == 3 and kept[1:] == history[4:] and role_order_problems(kept) == 0


# ---------------------------------------------------------------- Claude Code (documentation, not source)


class Recorder:
    """A summariser that keeps every span it was asked to summarise."""

    def __init__(self):
        self.spans: list[list[dict]] = []

    def summarise(self, request):
        self.spans.append(list(request.span))
        return SummaryOutcome(body="THE SUMMARY")


def test_claude_code_compacts_when_the_conversation_reaches_the_window():
    """model-config "Default auto-compact thresholds": with no auto-compact window set, Claude Code compacts when
    the conversation reaches the model's context limit; "Set the auto-compact window": a window set lower is how
    full the context gets first (here ``compression.threshold`` of the window)."""
    _fires_exactly_at(CLAUDE_CODE, 200_000, None, 200_000)
    _fires_exactly_at(CLAUDE_CODE, 200_000, 32_000, 200_000)  # the output cap plays no part
    assert _threshold(CLAUDE_CODE, 1_000_000, None, **{"compression.threshold": 0.5}) == 500_000


def test_claude_code_replaces_everything_after_the_system_prompt_with_one_summary():
    """context-window "What survives compaction": the system prompt is unchanged, not part of the history, and the
    conversation is replaced by a structured summary of all of it; the tool outputs reach the summary whole, since
    the clearing how-claude-code-works "When context fills up" mentions has no published rule and is left out."""
    messages = _conversation()
    recorder = Recorder()
    result = STRATEGIES["claude_code_summary"](messages, _zoo(CLAUDE_CODE, summariser=recorder), {})
    assert result.messages[0] == messages[0] and len(result.messages) == 2
    summary = result.messages[1]
    assert summary["role"] == "user" and is_summary_message(summary) and summary["content"] == "THE SUMMARY"
    assert recorder.spans == [messages[1:]] and result.condensed == len(messages) - 1


def test_claude_code_has_nothing_to_compact_without_history():
    """costs "Reduce token usage": in a fresh session /compact prints "Not enough messages to compact."."""
    system = [{"role": "system", "content": "You are a coding agent."}]
    result = STRATEGIES["claude_code_summary"](system, _zoo(CLAUDE_CODE), {})
    assert result.messages == system and result.condensed == 0 and not result.aborted
    assert result.record["outcome"] == "nothing_to_summarise"


def test_claude_code_without_a_summary_keeps_the_conversation():
    """Not documented: what Claude Code does when the summary fails. hermeslab's assumption: nothing changes."""
    messages = _conversation()
    result = STRATEGIES["claude_code_summary"](messages, _zoo(CLAUDE_CODE, summariser=Failing()), {})
    assert result.messages == messages and result.aborted and result.summary_error == "no model"


# ---------------------------------------------------------------- Anthropic API tool-result clearing (documentation)


def _tool_session(uses: int) -> list[dict]:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "inspect the repository"}]
    for n in range(uses):
        messages += [_call(f"t{n}", "grep" if n % 2 else "read_file"), _tool(f"t{n}", f"output {n} " * (n + 20))]
    return messages + [{"role": "assistant", "content": "Done."}]


def test_clear_tool_uses_fires_once_the_prompt_exceeds_100000_input_tokens():
    """context-editing "Configuration options for tool result clearing": ``trigger`` defaults to 100,000 input
    tokens, and clearing begins once the prompt exceeds it, whatever the window."""
    _fires_exactly_at(CLEAR_TOOL_USES, 200_000, None, 100_001)
    _fires_exactly_at(CLEAR_TOOL_USES, 1_000_000, 8_192, 100_001)
    assert _threshold(CLEAR_TOOL_USES, 200_000, None, **{"compression.min_threshold_tokens": 30_000}) == 30_001


def test_clear_tool_uses_keeps_the_newest_three_results_and_every_call():
    """context-editing "Tool result clearing" (oldest results first, each replaced by a placeholder; only results
    unless ``clear_tool_inputs``) and "Configuration options": ``keep`` 3 tool uses, ``exclude_tools`` none,
    ``clear_tool_inputs`` false."""
    assert KEEP_TOOL_USES == 3
    messages = _tool_session(5)
    result = STRATEGIES["anthropic_clear_tool_uses"](messages, _zoo(CLEAR_TOOL_USES), {})
    out = result.messages
    results = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    assert [out[i]["content"] for i in results[:2]] == [CLAUDE_CLEARED, CLAUDE_CLEARED]
    assert [out[i] for i in results[2:]] == [messages[i] for i in results[2:]]
    assert [m for i, m in enumerate(out) if i not in results[:2]] == [
        m for i, m in enumerate(messages) if i not in results[:2]]  # calls, texts and the system prompt stay
    assert all(out[i]["tool_call_id"] == messages[i]["tool_call_id"] for i in results)
    assert result.condensed == 2 and result.summary_text is None and result.record["cleared_results"] == results[:2]


def test_clear_tool_uses_frees_any_amount_and_stops_when_only_the_newest_are_left():
    """context-editing "Configuration options": ``clear_at_least`` defaults to none, so a result of a few tokens is
    cleared too (here some 60 tokens); once only the newest three hold output, an edit changes nothing."""
    messages = _tool_session(4)
    first = STRATEGIES["anthropic_clear_tool_uses"](messages, _zoo(CLEAR_TOOL_USES), {})
    assert first.condensed == 1 and first.effective
    again = STRATEGIES["anthropic_clear_tool_uses"](first.messages, _zoo(CLEAR_TOOL_USES), {})
    assert again.messages == first.messages and again.condensed == 0
    few = _tool_session(3)
    assert STRATEGIES["anthropic_clear_tool_uses"](few, _zoo(CLEAR_TOOL_USES), {}).messages == few


# ---------------------------------------------------------------- every strategy on any conversation


@pytest.mark.parametrize("preset", ZOO)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), window=st.sampled_from([2_000, 8_000, 1_000_000]), fails=st.booleans())
def test_a_zoo_compaction_leaves_a_valid_conversation_and_its_input_alone(preset, messages, window, fails):
    """Whatever the conversation and the summariser's luck: the input is not mutated, the result is a valid
    message list (every tool call beside its result), the system prompt stays first, a summary-less attempt
    that changed nothing says so."""
    snapshot = json.dumps(messages, sort_keys=True)
    zoo = _zoo(preset, window=window, summariser=Failing() if fails else None)
    result = STRATEGIES[preset_values(preset)["compression.strategy"]](messages, zoo, {})
    assert json.dumps(messages, sort_keys=True) == snapshot
    validate_messages(result.messages)
    if messages and messages[0]["role"] == "system":
        assert result.messages[0] == messages[0]
    if result.condensed == 0:
        assert result.messages == messages


@pytest.mark.parametrize("preset", ZOO)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), window=st.sampled_from([1_000, 2_000, 4_000, 8_000, 16_000]),
       max_tokens=st.sampled_from([None, 256, 1_024, 4_096]), fails=st.booleans())
def test_a_zoo_compaction_at_a_small_window_breaks_no_message_order(preset, messages, window, max_tokens, fails):
    """Whatever the conversation, the window, the output reserve and the summariser's luck, a compaction adds no
    role-order problem (a system message after the start, a result away from its call, two user or two
    assistant messages in a row) that its input did not have."""
    zoo = _zoo(preset, window=window, summariser=Failing() if fails else None, max_tokens=max_tokens)
    result = STRATEGIES[preset_values(preset)["compression.strategy"]](messages, zoo, {})
    if preset == CODEX:  # its compacted history is the user's own messages then the summary, one user item each
        assert role_order_problems(_users_joined(result.messages)) <= role_order_problems(_users_joined(messages))
    else:
        assert role_order_problems(result.messages) <= role_order_problems(messages)


def _users_joined(messages: list[dict]) -> list[dict]:
    """``messages`` with each run of user messages counted once (as Anthropic's API joins such turns)."""
    return [m for i, m in enumerate(messages) if not (i and m["role"] == "user" == messages[i - 1]["role"])]


# ---------------------------------------------------------------- through the engine and the command line


@pytest.mark.parametrize("preset", ZOO)
def test_ab_runs_each_zoo_preset_against_seed(preset, capsys):
    code = main(["ab", str(PROJECT_RECORDINGS), "--config", f"{preset},model.context_length=8000",
                 "--config", "seed,model.context_length=8000", "--limit", "3", "--executor", "serial"])
    out = capsys.readouterr().out
    assert code == 0 and "0 failed cell(s)" in out and preset in out


@pytest.mark.parametrize("preset", ZOO)
def test_the_fast_replay_decides_as_the_loop_under_each_zoo_preset(preset):
    from test_one_engine import _assert_same, _load

    assert _assert_same(_load(PROJECT_RECORDINGS), preset, 8_000) > 0


def test_presets_lists_every_preset_with_its_source(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    for name in registry().presets:
        assert f"\n{name}\n" in f"\n{out}"
    assert "RooCodeInc/Roo-Code @ cb836567" in out and "google-gemini/gemini-cli @ 5411f113" in out


def test_a_preset_whose_reserve_leaves_no_room_is_named_and_roo_keeps_a_valid_order_there():
    """Roo Code at 8,000 tokens without model.max_tokens keeps its 8,192-token default reserve and compacts before
    every call; the run says so, and its sliding window breaks no message order while doing it."""
    from hermeslab.eval.ab import CompactingEveryCallWarning, run_ab

    with pytest.warns(CompactingEveryCallWarning):
        frame = run_ab([PROJECT_RECORDINGS], {"roo": f"{ROO},model.context_length=8000"}, executor="serial",
                       progress=False, limit=6)
    [line] = frame.attrs["compacting_every_call"]
    assert line.startswith("roo compressed ") and ("keeping 8,192 tokens for the reply (the agent's default, "
                                                   "model.max_tokens being unset); at this window that leaves no "
                                                   "room for a prompt") in line
    assert frame["compressions"].sum() >= frame["api_calls"].sum() and frame["role_order_violations"].sum() == 0
    capped = run_ab([PROJECT_RECORDINGS], {"roo": f"{ROO},model.context_length=8000,model.max_tokens=1024"},
                    executor="serial", progress=False, limit=6)
    assert capped.attrs["compacting_every_call"] == []
