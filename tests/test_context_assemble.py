"""Phase 4: the summary's role (incl. the merge case), tool-pair repair and the Hermes-only touches."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.core.config import Config
from hermeslab.context.assemble import (MISSING_RESULT_STUB, REMOVED_CALL_TEXT, SYSTEM_NOTE, assemble,
                                        choose_summary_role, merge_summary, sanitize_tool_pairs, split_summary,
                                        strip_historical_media, summary_text)
from hermeslab.policies.loading import apply_preset
from hermeslab.context.types import LEGACY_SUMMARY_PREFIX, SUMMARY_END_MARKER, SUMMARY_PREFIX, is_summary_message

from test_context_conversations import IMAGE_URL, assistant, call, system, tool, user


def cfg(preset: str = "seed"):
    return apply_preset(Config(), preset).compression


@pytest.mark.parametrize("head_roles, tail_roles, expected", [
    (["system"], ["assistant"], "user"),               # Anthropic needs a user turn first
    (["system", "user", "assistant"], ["assistant"], "user"),
    (["system", "user", "tool"], ["assistant"], "user"),
    (["system", "user"], ["user"], "assistant"),
    (["system", "user", "tool"], ["user"], "assistant"),  # flipped away from the tail's user
    (["system", "user", "assistant"], ["user"], None),    # user would repeat the tail, assistant the head
    (["system", "user"], ["assistant"], None),
    (["system"], ["user"], None),                         # forced user, tail starts with user
    ([], ["assistant"], "user"),
    (["assistant"], ["assistant"], "user"),               # no user anywhere: forced
])
def test_summary_role(head_roles, tail_roles, expected):
    head = [{"role": r, "content": "x"} for r in head_roles]
    tail = [{"role": r, "content": "y"} for r in tail_roles]
    assert choose_summary_role(head, tail)[0] == expected


def test_merge_puts_the_summary_before_the_message_it_joins():
    text = summary_text("notes")
    merged = merge_summary(user("please continue"), text)
    assert merged["content"] == f"{text}\n\nplease continue" and merged["_compressed_summary"]
    assert is_summary_message(merged)
    assert split_summary(merged) == ("notes", "please continue")
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": IMAGE_URL}}]
    merged_parts = merge_summary(user(parts), text)
    assert merged_parts["content"][1:] == parts
    assert split_summary(merged_parts) == ("notes", parts)
    assert merge_summary(assistant("", [call("c1", "x", {})]), text)["content"] == text


def test_summary_bodies_are_recovered_from_every_form():
    assert split_summary({"role": "user", "content": summary_text("body")}) == ("body", None)
    assert split_summary({"role": "user", "content": f"{LEGACY_SUMMARY_PREFIX} old body"}) == ("old body", None)
    assert is_summary_message({"role": "user", "content": f"{LEGACY_SUMMARY_PREFIX} old body"})
    assert not is_summary_message(user("a normal request"))


def test_assembly_merges_when_no_role_fits():
    head = [system(), user("task"), assistant("done")]
    tail = [user("next please")]
    out, record = assemble(head, "the notes", tail, cfg=cfg())
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert record["summary_role"] == "merged"
    assert out[3]["content"].startswith(SUMMARY_PREFIX) and out[3]["content"].endswith("next please")
    assert f"the notes\n\n{SUMMARY_END_MARKER}" in out[3]["content"]
    # Unchanged messages pass through as they are; the merged one is new and the input is left alone.
    assert all(a is b for a, b in zip(out[:3], head)) and tail == [user("next please")]


def test_assembly_standalone_summary_is_flagged():
    out, record = assemble([system()], "notes", [assistant("hi")], cfg=cfg())
    assert out[1] == {"role": "user", "content": summary_text("notes"), "_compressed_summary": True}
    assert record["summary_role"] == "user"


# ---------------------------------------------------------------- tool pairs


def _split_pairs():
    return [user("go"), tool("gone", "orphan result"),
            assistant("", [call("c1", "a", {}), call("c2", "b", {})]), tool("c1", "r1"),
            assistant("thinking", [call("c3", "a", {})]),
            assistant("", [call("c4", "a", {})]), tool("c4", "r4"), user("end")]


def test_seed_stubs_calls_whose_results_were_summarised():
    out, report = sanitize_tool_pairs(_split_pairs(), missing="stub")
    assert report["removed_orphan_results"] == [1]
    assert report["unanswered_calls"] == ["c2", "c3"]
    assert out[2] == tool("c1", "r1") and out[3] == tool("c2", MISSING_RESULT_STUB)
    assert out[5] == tool("c3", MISSING_RESULT_STUB)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant", "tool",
                                        "user"]


def test_hermes_drops_calls_whose_results_were_summarised():
    out, _ = sanitize_tool_pairs(_split_pairs(), missing="drop")
    assert out[1]["tool_calls"] == [call("c1", "a", {})]
    assert out[3] == {"role": "assistant", "content": "thinking"}
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "assistant", "assistant", "tool", "user"]
    lone = sanitize_tool_pairs([user("x"), assistant("", [call("c9", "a", {})]), user("y")], missing="drop")[0]
    assert lone[1] == {"role": "assistant", "content": REMOVED_CALL_TEXT}


def test_sanitize_rejects_unknown_modes():
    with pytest.raises(ValueError, match="missing must be 'stub' or 'drop', got 'keep'"):
        sanitize_tool_pairs([], missing="keep")


_MESSY = st.lists(st.one_of(
    st.builds(lambda i: tool(f"c{i}", "r"), st.integers(0, 5)),
    st.builds(lambda ids: assistant("", [call(f"c{i}", "t", {}) for i in ids]),
              st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True)),
    st.just(user("u")), st.just(assistant("a"))), max_size=25)


@settings(max_examples=300, deadline=None)
@given(messages=_MESSY, mode=st.sampled_from(["stub", "drop"]))
def test_sanitize_is_idempotent_on_any_sequence(messages, mode):
    once, _ = sanitize_tool_pairs(messages, missing=mode)
    twice, report = sanitize_tool_pairs(once, missing=mode)
    assert twice == once
    assert report["removed_orphan_results"] == [] and report["unanswered_calls"] == []


# ---------------------------------------------------------------- Hermes-only touches


def test_hermes_notes_the_compaction_in_the_system_prompt_once():
    out, record = assemble([system("base")], "notes", [assistant("a")], cfg=cfg("hermes-0.19"))
    assert out[0]["content"] == f"base\n\n{SYSTEM_NOTE}" and record["system_note_added"]
    again, record = assemble(out[:1], "notes", [assistant("a")], cfg=cfg("hermes-0.19"))
    assert again[0]["content"].count(SYSTEM_NOTE) == 1 and not record["system_note_added"]
    seed_out, _ = assemble([system("base")], "notes", [assistant("a")], cfg=cfg())
    assert seed_out[0] == system("base")


def test_images_before_the_newest_image_message_are_stripped():
    picture = [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": IMAGE_URL}}]
    messages = [user(picture), assistant("seen"), user(picture), assistant("again")]
    out, replaced = strip_historical_media(messages)
    assert replaced == 1 and out[2] == messages[2]
    assert out[0]["content"][1]["type"] == "text"
    assert strip_historical_media([user("no images")]) == ([user("no images")], 0)


#: The ways providers name a call and its result: chat-completions ids, Responses-style calls carrying an
#: item id and a call_id (answered by either), and calls with only a call_id.
CALL_ID_SHAPES = [
    ({"id": "call_1"}, "call_1"),
    ({"id": "fc_1", "call_id": "call_1"}, "call_1"),
    ({"id": "fc_1", "call_id": "call_1"}, "fc_1"),
    ({"call_id": "call_1"}, "call_1"),
]


@pytest.mark.parametrize("ids, answered_by", CALL_ID_SHAPES, ids=[f"{sorted(i)}-{a}" for i, a in CALL_ID_SHAPES])
@pytest.mark.parametrize("missing", ["stub", "drop"])
def test_a_result_answers_the_call_whose_id_or_call_id_it_names(ids, answered_by, missing):
    made = {**ids, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [user("go"), {"role": "assistant", "content": "", "tool_calls": [made]},
                {"role": "tool", "tool_call_id": answered_by, "content": "a.txt"}, assistant("done")]
    out, record = sanitize_tool_pairs(messages, missing=missing)
    assert out == messages
    assert record["removed_orphan_results"] == [] and record["unanswered_calls"] == []


@pytest.mark.parametrize("missing", ["stub", "drop"])
def test_a_result_naming_neither_id_is_an_orphan_and_its_call_is_unanswered(missing):
    made = {"id": "fc_1", "call_id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [user("go"), {"role": "assistant", "content": "", "tool_calls": [made]},
                {"role": "tool", "tool_call_id": "call_2", "content": "a.txt"}]
    out, record = sanitize_tool_pairs(messages, missing=missing)
    assert record["removed_orphan_results"] == [2] and record["unanswered_calls"] == ["call_1"]
    if missing == "stub":
        assert out[-1] == {"role": "tool", "tool_call_id": "call_1", "content": MISSING_RESULT_STUB}
    else:
        assert out[-1] == {"role": "assistant", "content": REMOVED_CALL_TEXT}
