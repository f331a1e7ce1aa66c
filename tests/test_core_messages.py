import json
import re

import pytest
from hypothesis import given, settings, strategies as st

from hermeslab.core.messages import (
    MessageValidationError,
    has_surrogates,
    parse_tool_arguments,
    repair_messages,
    repair_tool_arguments,
    strip_surrogates,
    text_of,
    validate_messages,
    wire_messages,
)


def call(call_id, name="read_file", arguments='{"path": "a.txt"}'):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_valid_conversation_with_parallel_calls_and_multimodal_parts():
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]},
        {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "assistant", "content": "done"},
    ]
    validate_messages(messages)
    assert text_of(messages[1]) == "look"


@pytest.mark.parametrize(
    "messages, index, reason",
    [
        ([{"role": "wizard", "content": "x"}], 0, "unknown role 'wizard'"),
        ([{"role": "user", "content": 42}], 0, "content must be a string or a list of parts, got int"),
        ([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "zz", "content": "r"}], 1,
         "tool result 'zz' answers no open tool call"),
        ([{"role": "tool", "content": "r"}], 0, "tool message without tool_call_id"),
        ([{"role": "user", "content": "x", "tool_calls": [call("a")]}], 0, "user message carries tool_calls"),
        ([{"role": "assistant", "content": "", "tool_calls": [call("a")]},
          {"role": "tool", "tool_call_id": "a", "content": "1"},
          {"role": "assistant", "content": "", "tool_calls": [call("a")]}], 2, "tool call id 'a' is used twice"),
        ([{"role": "user", "content": [{"type": "video"}]}], 0, "content part 0 has an unknown type"),
        ("not a list", -1, "expected a list of messages, got str"),
    ],
)
def test_validation_names_index_and_reason(messages, index, reason):
    with pytest.raises(MessageValidationError) as info:
        validate_messages(messages)
    assert info.value.index == index
    assert info.value.reason == reason


def test_repair_drops_orphans_and_stubs_missing_results():
    messages = [
        {"role": "user", "content": "go"},
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan"},
        {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b", arguments="{oops")]},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "user", "content": "bad \ud800 char"},
    ]
    repaired, report = repair_messages(messages)
    validate_messages(repaired)
    assert report.removed_orphan_results == [1]
    assert report.stubbed_missing_results == ["b"]
    assert report.fixed_surrogates == [4]
    assert report.fixed_arguments == ["b"]
    assert json.loads(repaired[1]["tool_calls"][1]["function"]["arguments"]) == {"_unparsed_arguments": "{oops"}
    assert [m["role"] for m in repaired] == ["user", "assistant", "tool", "tool", "user"]
    assert messages[2]["tool_calls"][1]["function"]["arguments"] == "{oops"  # input untouched


def test_parse_tool_arguments_errors_are_readable():
    assert parse_tool_arguments("") == {}
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_tool_arguments('{"path": ')
    with pytest.raises(ValueError, match="must be a JSON object, got list"):
        parse_tool_arguments("[1]")
    assert repair_tool_arguments('{"a": 1}') == '{"a": 1}'


def test_wire_messages_strip_private_keys():
    assert wire_messages([{"role": "user", "content": "x", "_synthetic": True}]) == [{"role": "user", "content": "x"}]


#: Any text, lone surrogates included (hypothesis leaves them out unless asked).
ANY_TEXT = st.text(st.characters(exclude_categories=())) | st.text(st.sampled_from(["a", "é", "\ud800", "\udfff",
                                                                                    "\ud83d", "\ude00", "😀"]))


@settings(max_examples=500)
@given(ANY_TEXT)
def test_strip_surrogates_always_encodable(text):
    strip_surrogates(text).encode("utf-8")


@settings(max_examples=1_000)
@given(ANY_TEXT)
def test_surrogates_are_found_and_replaced_exactly_where_the_pattern_finds_them(text):
    assert has_surrogates(text) == bool(re.search("[\ud800-\udfff]", text))
    assert strip_surrogates(text) == re.sub("[\ud800-\udfff]", "\ufffd", text)


roles = st.sampled_from(["user", "assistant", "tool"])


@given(st.lists(st.tuples(roles, st.integers(0, 3)), max_size=30))
def test_repair_always_produces_valid_pairs(shape):
    messages = []
    counter = 0
    for role, n in shape:
        if role == "assistant" and n:
            ids = [f"c{counter + i}" for i in range(n)]
            counter += n
            messages.append({"role": "assistant", "content": "", "tool_calls": [call(i) for i in ids]})
        elif role == "tool":
            messages.append({"role": "tool", "tool_call_id": f"c{max(counter - n, 0)}", "content": "r"})
        else:
            messages.append({"role": role, "content": "t"})
    repaired, _ = repair_messages(messages)
    validate_messages(repaired)
    again, report = repair_messages(repaired)
    assert again == repaired and not report.changed
