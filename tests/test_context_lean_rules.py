"""The pure pieces of lean-era Hermes compaction, each against the rule it reproduces.

Rules were read in NousResearch/hermes-agent ``agent/context_compressor.py`` at
commit 042431a7; each test names the symbol and its line(s), counted in the
whole stored text of the file at that commit.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.context import anchor_index, failure_ladder, lean_summary, lean_tail, record_sampling
from hermeslab.context.anchor_index import CATEGORIES, INDEX_BUDGET_CHARS, index_lines, ranked_values
from hermeslab.context.lean_summary import (
    RECOVERY_HEADING,
    USER_MESSAGES_HEADING,
    augment_summary,
    user_messages_section,
)
from hermeslab.context.lean_tail import demote_stale_tail_tools, lean_tail_tokens, protected_rounds
from hermeslab.context.record_sampling import GAP_MARKER, bound_record, sample_records

# ---------------------------------------------------------------- anchor index (_build_anchor_index)


def test_each_category_finds_its_identifiers():
    """_ANCHOR_PATTERNS (1080-1088): PR/issue numbers, commit SHAs, branches, files, error lines, handles, URLs."""
    text = ("Fixed #12345 in a1b2c3d4e5f on fix/tail-budget, edited agent/context_compressor.py; "
            "ValueError: bad tail\nping @alice see https://example.com/pull/12345")
    lines = index_lines([{"role": "user", "content": text}])
    labels = [line.split(":")[0] for line in lines]
    assert labels == ["PRs/issues", "commits", "branches", "files", "errors", "handles", "urls"]
    assert "#12345" in lines[0] and "a1b2c3d4e5f" in lines[1] and "fix/tail-budget" in lines[2]
    assert "agent/context_compressor.py" in lines[3] and lines[4].startswith("errors: ValueError: bad tail")


def test_most_frequent_first_then_most_recent_and_counts_shown():
    """_build_anchor_index (1094-1125): sorted by (-count, -last_seen); a value seen more than once reads ``v(xN)``."""
    text = "#1001 #2002 #2002 #3003 #1001 #2002"
    category = CATEGORIES[0]
    assert ranked_values(category, text) == [("#2002", 3), ("#1001", 2), ("#3003", 1)]
    assert index_lines([{"role": "tool", "content": text}])[0] == "PRs/issues: #2002(x3), #1001(x2), #3003"


def test_owner_handle_is_noise_and_trailing_punctuation_is_dropped():
    """_ANCHOR_NOISE (1089-1091) leaves out @teknium; values are stripped of trailing '.,;:'."""
    lines = index_lines([{"role": "user", "content": "thanks @teknium and @bob-smith. Fixed #4242."}])
    assert lines == ["PRs/issues: #4242", "handles: @bob-smith"]


def test_the_budget_stops_at_the_first_category_that_would_pass_it():
    """_LEAN_ANCHOR_BUDGET_CHARS = 7_000 (1079; checked at 1114): a line that would pass it ends the index
    (later ones too)."""
    issues = " ".join(f"#{n}" for n in range(1000, 1120))
    shas = " ".join(f"{n:040x}" for n in range(1, 41))
    turns = [{"role": "user", "content": f"{issues}\n{shas}\n@carol"}]
    small = index_lines(turns, budget_chars=len(index_lines(turns)[0]) + 10)
    assert len(small) == 1 and small[0].startswith("PRs/issues")
    assert len(index_lines(turns)) == 3


def test_only_string_contents_are_read_and_empty_gives_nothing():
    assert anchor_index.anchor_index([{"role": "user", "content": [{"type": "text", "text": "#12345"}]}]) == ""
    assert anchor_index.anchor_index([]) == ""


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="#@/._-abcdef0123456789 :ErorxcptionVaTBk\n", max_size=300), max_size=6))
def test_index_values_come_from_the_text_and_respect_caps_and_budget(contents):
    """Every listed value occurs in the messages verbatim; no category passes its cap; lines fit the budget."""
    turns = [{"role": "user", "content": c} for c in contents]
    text = "\n".join(c for c in contents if c)
    lines = index_lines(turns)
    assert sum(len(line) for line in lines) <= INDEX_BUDGET_CHARS
    for category in CATEGORIES:
        values = ranked_values(category, text)
        assert len(values) <= category.cap
        for value, count in values:
            assert value in text and count >= 1


# ---------------------------------------------------------------- the user's own words (_build_verbatim_user_section)


def _user(text):
    return {"role": "user", "content": text}


def test_real_user_messages_newest_first_quoted_and_scaffolding_left_out():
    """_build_verbatim_user_section (1004-1032): reversed order, '> ' quoting, synthetic rows skipped."""
    turns = [_user("first ask"), {"role": "assistant", "content": "ok"}, _user("second\nask"),
             {"role": "user", "content": "[todo list]", "_synthetic": True}]
    section = user_messages_section(turns)
    assert section.startswith("\n\n" + USER_MESSAGES_HEADING + "\n")
    assert section.index("> second\n> ask") < section.index("> first ask")
    assert "todo list" not in section


def test_per_message_cap_and_budget_straddler():
    """_LEAN_USER_MESSAGE_MAX_CHARS = 4_000 per message (949); _LEAN_USER_MESSAGES_BUDGET_CHARS = 24_000 (948), the
    message reaching past it cut to what is left and nothing older after it."""
    turns = [_user("o" * 10), _user("x" * 9_000), _user("y" * 100)]
    used = 100 + 4_000 + len(lean_summary.CUT_MARK)  # a quote counts with its cut mark
    section = user_messages_section(turns, budget_chars=used)
    assert section.index("> " + "y" * 100) < section.index("> " + "x" * 4_000)
    assert "x" * 4_000 in section and "x" * 4_001 not in section and "o" * 10 not in section
    assert "> o" + lean_summary.CUT_MARK in user_messages_section(turns, budget_chars=used + 1)
    straddled = user_messages_section([_user("a" * 300), _user("b" * 300)], budget_chars=400)
    assert "b" * 300 in straddled and "a" * 101 not in straddled and "> a" in straddled


def test_augment_appends_index_words_and_footer_once():
    """_augment_summary_lean (3597-3608): anchor index, user messages, recovery footer, each unless its
    heading is there."""
    turns = [_user("please fix #31337 in src/app.py")]
    once = augment_summary("## Goal\nfix it", turns)
    assert once.index(anchor_index.HEADING) < once.index(USER_MESSAGES_HEADING) < once.index(RECOVERY_HEADING)
    assert "session_search" in once and "1 summarised message(s)" in once
    assert augment_summary(once, turns) == once


def test_without_a_session_no_pointer_is_written():
    """_build_recovery_footer returns "" and _lean_recovery_stub leaves out its session_search hint when the
    compressor has no session id (context_compressor.py @ e03d7158, 1016-1017 and 962): ``history_pointers``
    off."""
    turns = [_user("please fix #31337 in src/app.py")]
    bare = augment_summary("## Goal\nfix it", turns, history_pointer=False)
    assert RECOVERY_HEADING not in bare and "session_search" not in bare and "#31337" in bare
    stub = lean_tail.stub_text("terminal", 5_000, history_pointer=False)
    assert "session_search" not in stub and lean_tail.is_stub(stub) and "5,000 chars" in stub


def test_augment_redacts_what_it_quotes():
    """_redact_compaction_text (1221-1225) runs over the index and the quoted messages."""
    key = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    out = augment_summary("body", [_user(f"use key {key} for #12345")])
    assert key not in out and "#12345" in out


# ---------------------------------------------------------------- even sampling (_sample_summary_records)


def test_records_that_fit_are_joined_whole():
    text, coverage = sample_records(["a" * 10, "b" * 10], cap=100)
    assert text == "a" * 10 + "\n\n" + "b" * 10 and coverage.omitted_chars == 0 and coverage.elided_records == 0


def test_oversized_input_keeps_every_region_and_the_newest_record():
    """_SAMPLED_INPUT_SLICES = 8 (3632) slices spread over the records, the last anchored at the newest one."""
    records = [f"[USER]\nmessage {i:03d} " + "z" * 200 for i in range(200)]
    text, coverage = sample_records(records, cap=20_000)
    assert len(text) <= 20_000
    assert "message 199" in text and "message 000" in text and "message 100" in text
    assert coverage.elided_records > 0 and coverage.sampled_records + coverage.elided_records == 200
    gaps = re.findall(r"\[records ([\d,]+)-([\d,]+) left out here", text)
    assert 1 <= len(gaps) <= 7


def test_a_record_longer_than_its_share_keeps_head_and_tail():
    """_bound_oversized_record (3634-3649): head and tail halves around an intra-record marker, within the limit."""
    bounded = bound_record("H" * 500 + "T" * 500, 300)
    assert len(bounded) <= 300 and bounded.startswith("H") and bounded.endswith("T") and "left out" in bounded


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="abc\n ", min_size=1, max_size=400), min_size=1, max_size=60),
       st.integers(min_value=400, max_value=6_000))
def test_sampling_never_passes_the_cap_and_ends_with_the_newest_record(records, cap):
    joined = "\n\n".join(records)
    text, coverage = sample_records(records, cap=cap)
    if len(joined) <= cap:
        assert text == joined
        return
    assert len(text) <= cap
    assert text.endswith(bound_record(records[-1], record_sampling.slice_share(records, cap)))
    assert coverage.sampled_chars <= coverage.input_chars


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=2_000), st.integers(min_value=1, max_value=2_500))
def test_bound_record_fits_its_limit(record, limit):
    assert len(bound_record(record, limit)) <= max(limit, 0) or len(record) <= limit


def test_gap_markers_count_what_they_leave_out():
    records = ["r" * 100 for _ in range(50)]
    text, coverage = sample_records(records, cap=1_500)
    elided = sum(int(n.replace(",", "")) for n in re.findall(r"left out here, ([\d,]+) chars", text))
    assert elided >= coverage.elided_records * 100
    assert GAP_MARKER.format(first=1, last=2, elided=3).startswith("\n\n[records 1-2")


# ---------------------------------------------------------------- lean tail (tail_token_budget, _demote_stale_tail_tools)


@pytest.mark.parametrize("window, tokens", [(16_000, 10_000), (128_000, 10_000), (400_000, 10_000),
                                            (600_000, 15_000), (1_000_000, 25_000), (2_000_000, 25_000)])
def test_lean_tail_is_two_and_a_half_percent_clamped(window, tokens):
    """tail_token_budget (2178): max(LEAN_TAIL_FLOOR_TOKENS, min(LEAN_TAIL_CAP_TOKENS, int(ctx * 0.025))),
    the constants at 941-942."""
    assert lean_tail_tokens(window) == tokens


@given(st.integers(min_value=1, max_value=10_000_000))
def test_lean_tail_stays_within_its_clamp(window):
    assert lean_tail.LEAN_TAIL_FLOOR_TOKENS <= lean_tail_tokens(window) <= lean_tail.LEAN_TAIL_CAP_TOKENS


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=1, max_value=10**7))
def test_capped_tail_never_passes_a_fifth_of_the_window(tail, window):
    """TAIL_MAX_CONTEXT_FRACTION = 0.20 (946), applied after either formula, at least 1 (2181-2183)."""
    capped = lean_tail.capped_tail_tokens(tail, window, 0.20)
    assert 1 <= capped <= max(1, int(window * 0.20)) and capped <= max(tail, 1)
    assert lean_tail.capped_tail_tokens(tail, window, None) == tail


def _round(call_id, size, name="read_file"):
    return [{"role": "assistant", "content": "", "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": "x" * size}]


def test_tool_results_older_than_six_rounds_become_stubs():
    """_LEAN_TAIL_KEEP_TOOL_ROUNDS = 6 (954); _LEAN_TAIL_DEMOTE_MIN_CHARS = 1_500 (955); stubs name the tool
    and size."""
    messages = [{"role": "user", "content": "go"}]
    for n in range(8):
        messages += _round(f"c{n}", 2_000 if n != 1 else 100)
    out, cut = demote_stale_tail_tools(messages, 1)
    assert cut == [2]  # round 0 is long and old; round 1 is short; rounds 2-7 are the newest six
    assert out[2]["content"].startswith("[read_file output cut at compaction: 2,000 chars")
    assert all(out[i] is messages[i] for i in range(len(messages)) if i != 2)
    assert demote_stale_tail_tools(out, 1)[1] == []


def test_adjacent_results_are_one_round_and_rows_before_the_tail_stay():
    messages = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "t", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "1" * 2_000},
        {"role": "tool", "tool_call_id": "b", "content": "2" * 2_000}]
    assert protected_rounds(messages, 0, rounds=1) == {1, 2}
    assert demote_stale_tail_tools(messages, 3)[1] == []


# ---------------------------------------------------------------- failure ladder (_TIMEOUT_COOLDOWN_LADDER)


def test_cooldown_ladder_escalates_and_stays_on_its_last_rung():
    """_TIMEOUT_COOLDOWN_LADDER = (60, 300, 900) (811) via _next_timeout_cooldown (814-821)."""
    assert [failure_ladder.rung(n) for n in (1, 2, 3, 4, 9)] == [60.0, 300.0, 900.0, 900.0, 900.0]
    with pytest.raises(ValueError):
        failure_ladder.rung(0)


@pytest.mark.parametrize("categories, kind", [((), "other"), (("auth",), "terminal"), (("overloaded",), "terminal"),
                                              (("empty_response",), "terminal"), (("network",), "terminal"),
                                              (("timeout",), "stall"), (("auth", "rate_limit"), "stall"),
                                              (("bad_request",), "other")])
def test_failure_kinds(categories, kind):
    """_classify_summary_failure (734-764) / _TERMINAL_SUMMARY_FAILURES (769-805): the last call's class decides."""
    assert failure_ladder.failure_kind(categories) == kind


def test_first_stall_aborts_a_repeated_stall_falls_back_terminal_always_aborts():
    """DETERMINISTIC_SUMMARY_ROUTE (99): a stall after a stall gets the deterministic summary; terminal ones abort."""
    assert failure_ladder.decide("stall", 0) == failure_ladder.ABORT
    assert failure_ladder.decide("stall", 1) == failure_ladder.FALLBACK
    assert failure_ladder.decide("terminal", 5) == failure_ladder.ABORT
    assert failure_ladder.decide("other", 0) == failure_ladder.FALLBACK


def test_modules_name_their_wording_as_hermeslabs_own():
    for module in (anchor_index, lean_summary, lean_tail, record_sampling):
        assert "hermeslab's own" in (module.__doc__ or "")
