"""Phase 1: the prune boundary and each of the three passes, under both presets."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.core.config import Config
from hermeslab.policies.loading import apply_preset
from hermeslab.context.prune import (DUPLICATE_MARKER, IMAGE_PLACEHOLDER, TRUNCATION_MARKER, compute_prune_boundary,
                                     one_line_description, prune_messages)

from test_context_conversations import IMAGE_URL, assistant, call, system, text, tool, tool_turn, user


def cfg(preset: str = "seed"):
    return apply_preset(Config(), preset).compression


def by_length(message: dict) -> int:
    return len(message["content"])


# ---------------------------------------------------------------- boundary


def test_prune_boundary_keeps_the_message_that_crosses_the_budget():
    messages = [user("x" * 10) for _ in range(30)]
    # 30 messages of 10 tokens, budget 95: the 10th message crosses it and stays protected.
    assert compute_prune_boundary(messages, tail_token_budget=95, protect_last_n=5, estimate=by_length) == 20
    assert compute_prune_boundary(messages, tail_token_budget=100, protect_last_n=5, estimate=by_length) == 19


def test_prune_boundary_protects_at_least_protect_last_n():
    messages = [user("x" * 1000) for _ in range(30)]
    assert compute_prune_boundary(messages, tail_token_budget=10, protect_last_n=20, estimate=by_length) == 10
    assert compute_prune_boundary(messages[:12], tail_token_budget=10, protect_last_n=20, estimate=by_length) == 0


# ---------------------------------------------------------------- pass 1: dedupe


def _with_duplicates():
    output = text(80)
    return [system(), user("task"),
            *tool_turn("c1", "read_file", {"path": "a.py"}, output),
            *tool_turn("c2", "read_file", {"path": "a.py"}, output),
            *tool_turn("c3", "read_file", {"path": "b.py"}, "short"),
            *tool_turn("c4", "read_file", {"path": "b.py"}, "short")]


def test_older_copies_become_a_back_reference_naming_the_newer_call():
    messages = _with_duplicates()
    pruned, decisions = prune_messages(messages, prune_boundary=0, cfg=cfg(), head_end=2)
    assert [(d.index, d.action) for d in decisions] == [(3, "dedupe")]
    assert pruned[3]["content"].startswith(DUPLICATE_MARKER)
    assert "read_file call c2" in pruned[3]["content"]
    assert pruned[5] == messages[5]
    assert pruned[7]["content"] == "short"  # under 200 chars: never deduplicated


def test_hermes_back_reference_has_the_length_its_budget_walk_counts():
    pruned, decisions = prune_messages(_with_duplicates(), prune_boundary=0, cfg=cfg("hermes-0.19"))
    assert [(d.index, d.action) for d in decisions] == [(3, "dedupe")]
    assert len(pruned[3]["content"]) // 4 == 15


def test_seed_never_rewrites_the_protected_head_hermes_does():
    messages = [system(), *tool_turn("c1", "terminal", {"command": "ls"}, text(100)), user("go on")] + \
        [user(f"m{i}") for i in range(25)]
    _, seed_decisions = prune_messages(messages, prune_boundary=10, cfg=cfg(), head_end=4)
    _, hermes_decisions = prune_messages(messages, prune_boundary=10, cfg=cfg("hermes-0.19"), head_end=0)
    assert seed_decisions == []
    assert [(d.index, d.action) for d in hermes_decisions] == [(2, "one_line")]


# ---------------------------------------------------------------- pass 2: one-liners and images


def test_old_results_become_one_line_descriptions_before_the_boundary_only():
    messages = [system(), user("task"),
                *tool_turn("c1", "terminal", {"command": "npm test"}, json.dumps({"exit_code": 0, "output": text(100)})),
                *tool_turn("c2", "terminal", {"command": "npm run lint"}, text(100))]
    pruned, decisions = prune_messages(messages, prune_boundary=4, cfg=cfg())
    assert [(d.index, d.action) for d in decisions] == [(3, "one_line")]
    assert pruned[3]["content"] == "[terminal] ran npm test -> exit 0, 1 lines"
    assert pruned[5] == messages[5]


def test_image_parts_in_old_tool_results_become_placeholders():
    image_result = tool("c1", [{"type": "text", "text": "screenshot"}, {"type": "image_url", "image_url": {"url": IMAGE_URL}}])
    messages = [user("look"), assistant("", [call("c1", "browser_vision", {"question": "what?"})]), image_result]
    pruned, decisions = prune_messages(messages, prune_boundary=3, cfg=cfg())
    assert [(d.index, d.action) for d in decisions] == [(2, "image_placeholder")]
    assert pruned[2]["content"] == [{"type": "text", "text": "screenshot"}, {"type": "text", "text": IMAGE_PLACEHOLDER}]


@pytest.mark.parametrize("name, args, result, expected", [
    ("terminal", {"command": "pytest -q"}, '{"exit_code": 1, "output": "a\\nb"}', "[terminal] ran pytest -q -> exit 1, 1 lines"),
    ("read_file", {"path": "src/app.py", "offset": 40}, "x" * 1234, "[read_file] read src/app.py from line 40 (1,234 chars)"),
    ("write_file", {"path": "a.txt", "content": "1\n2\n3"}, "ok", "[write_file] wrote a.txt (3 lines)"),
    ("search_files", {"pattern": "TODO", "path": "src"}, '{"total_count": 7}', "[search_files] content search for 'TODO' in src -> 7 matches"),
    ("web_extract", {"urls": [{"url": "https://a.example"}, "https://b.example"]}, "x" * 10, "[web_extract] https://a.example +1 more (10 chars)"),
    ("memory", {"action": "add", "target": "user"}, "saved", "[memory] add on user"),
    ("get_order_details", {"order_id": "#W123", "verbose": True, "third": 3}, "x" * 500, "[get_order_details] order_id=#W123 verbose=true (500 chars result)"),
    ("lookup", {"query": "q" * 100}, "x", "[lookup] query=" + "q" * 37 + "... (1 chars result)"),
    ("browser_click", {}, "x" * 5, "[browser_click] (5 chars)"),
])
def test_one_line_descriptions_per_tool(name, args, result, expected):
    assert one_line_description(name, args, result) == expected


@pytest.mark.parametrize("result, code", [
    ("<returncode>2</returncode>\n<output>\n" + "x" * 5000 + '"exit_code": 0', "2"),
    ('{"exit_code": 0, "output": "<returncode>5</returncode>"}', "0"),
    ('"exit_code": oops, later "exit_code": 3', "3"),
    ("<returncode> -1 </returncode>", "-1"),
    ("no status here", None),
])
def test_the_first_stated_exit_code_is_reported(result, code):
    line = one_line_description("terminal", {"command": "make"}, result)
    assert (f"exit {code}," in line) if code is not None else ("exit" not in line)


@settings(max_examples=300, deadline=None)
@given(name=st.one_of(st.text(max_size=30), st.none(), st.integers()),
       args=st.one_of(st.dictionaries(st.text(max_size=10), st.recursive(st.none() | st.integers() | st.text(max_size=50),
                                                                          lambda c: st.lists(c) | st.dictionaries(st.text(max_size=5), c),
                                                                          max_leaves=8), max_size=4), st.none(), st.text()),
       result=st.one_of(st.text(max_size=400), st.none(), st.integers()))
def test_one_line_description_never_raises_and_stays_one_short_line(name, args, result):
    line = one_line_description(name, args, result)
    assert isinstance(line, str) and "\n" not in line and len(line) <= 180


# ---------------------------------------------------------------- pass 3: tool-call arguments


def test_long_arguments_keep_valid_json_with_long_values_cut():
    args = {"path": "big.py", "content": "y" * 900, "lines": ["z" * 300, "short"], "n": 3}
    messages = [user("write it"), assistant("", [call("c1", "write_file", args)]), tool("c1", "ok"), user("next")]
    pruned, decisions = prune_messages(messages, prune_boundary=3, cfg=cfg())
    assert [(d.index, d.action) for d in decisions] == [(1, "shrink_args")]
    shrunk = json.loads(pruned[1]["tool_calls"][0]["function"]["arguments"])
    assert shrunk == {"path": "big.py", "content": "y" * 200 + TRUNCATION_MARKER,
                      "lines": ["z" * 200 + TRUNCATION_MARKER, "short"], "n": 3}
    assert json.loads(messages[1]["tool_calls"][0]["function"]["arguments"]) == args


def test_non_json_arguments_are_left_alone():
    broken = "{" + "x" * 900
    messages = [user("go"), assistant("", [call("c1", "terminal", broken)]), tool("c1", "ok")]
    pruned, decisions = prune_messages(messages, prune_boundary=3, cfg=cfg("hermes-0.19"))
    assert decisions == [] and pruned == messages


def test_compact_json_is_rewritten_only_by_the_hermes_preset():
    compact = json.dumps({f"k{i}": "v" * 20 for i in range(30)}, separators=(",", ":"))
    messages = [user("go"), assistant("", [call("c1", "book", compact)]), tool("c1", "ok")]
    assert prune_messages(messages, prune_boundary=3, cfg=cfg())[1] == []
    pruned, decisions = prune_messages(messages, prune_boundary=3, cfg=cfg("hermes-0.19"))
    assert [d.action for d in decisions] == ["shrink_args"]
    assert json.loads(pruned[1]["tool_calls"][0]["function"]["arguments"]) == json.loads(compact)


def test_pruning_never_mutates_its_input():
    messages = _with_duplicates() + [assistant("", [call("c9", "write_file", {"content": "q" * 900})]), tool("c9", "x" * 300)]
    snapshot = copy.deepcopy(messages)
    pruned, decisions = prune_messages(messages, prune_boundary=len(messages), cfg=cfg("hermes-0.19"))
    assert messages == snapshot
    rewritten = {d.index for d in decisions}
    assert rewritten and all((pruned[i] is messages[i]) is (i not in rewritten) for i in range(len(messages)))
