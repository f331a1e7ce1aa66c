"""The offline model: requests → tool calls, answers from results, summaries, determinism, usage."""

from __future__ import annotations

import json
import re

import pytest

from hermeslab.core.config import TerminalConfig, ToolsConfig
from hermeslab.core.tokens import count_text, default_counter
from hermeslab.core.provider import ChatRequest, ChatResponse, ProviderError, StreamDelta
from hermeslab.providers.offline import MODEL_NAME, OfflineModel, parse_intents


def schema(name: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


STRING = {"type": "string"}
BUILTIN_TOOLS = [
    schema("read_file", {"path": STRING, "offset": {"type": "integer"}, "limit": {"type": "integer"}}, ["path"]),
    schema("write_file", {"path": STRING, "content": STRING}, ["path", "content"]),
    schema("list_dir", {"path": STRING}, []),
    schema("search_files", {"pattern": STRING, "path": STRING, "glob": STRING}, ["pattern"]),
    schema("terminal", {"command": STRING, "timeout": {"type": "number"}}, ["command"]),
    schema("todo", {
        "action": {"type": "string", "enum": ["add", "list", "update", "clear"]},
        "items": {"type": "array", "items": STRING},
        "id": {"type": "integer"},
        "status": {"type": "string", "enum": ["pending", "in_progress", "done"]},
    }, ["action"]),
]
MEMORY_TOOL = schema("memory", {"action": STRING, "target": STRING, "content": STRING, "old_text": STRING},
                     ["action", "target"])
ALL_TOOLS = [*BUILTIN_TOOLS, MEMORY_TOOL]

model = OfflineModel()


def ask(text: str, tools: list[dict] | None = ALL_TOOLS, **request) -> ChatResponse:
    messages = [{"role": "system", "content": "You are a helpful agent."}, {"role": "user", "content": text}]
    return model.complete(ChatRequest(messages=messages, tools=tools, **request))


def calls_of(response: ChatResponse) -> list[tuple[str, dict]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in response.message.get("tool_calls") or []]


# ---------------------------------------------------------------- requests → tool calls


@pytest.mark.parametrize("text, expected", [
    ("read notes.txt", [("read_file", {"path": "notes.txt"})]),
    ("Please show me src/app.py", [("read_file", {"path": "src/app.py"})]),
    ("cat docs/guide.md", [("read_file", {"path": "docs/guide.md"})]),
    ("open file Makefile", [("read_file", {"path": "Makefile"})]),
    ("What's in notes.txt?", [("read_file", {"path": "notes.txt"})]),
    ("list files", [("list_dir", {"path": "."})]),
    ("List the directory src", [("list_dir", {"path": "src"})]),
    ("ls", [("list_dir", {"path": "."})]),
    ("what files are there?", [("list_dir", {"path": "."})]),
    ("what's in src/", [("list_dir", {"path": "src"})]),
    ('write "hello" to notes.txt', [("write_file", {"path": "notes.txt", "content": "hello"})]),
    ("Create a file notes.txt with content: first line\nsecond line",
     [("write_file", {"path": "notes.txt", "content": "first line\nsecond line"})]),
    ("save the meeting notes to minutes.md", [("write_file", {"path": "minutes.md", "content": "the meeting notes"})]),
    ('search for "TODO" in src', [("search_files", {"pattern": "TODO", "path": "src"})]),
    ("grep foo", [("search_files", {"pattern": "foo"})]),
    ("find files containing bar", [("search_files", {"pattern": "bar"})]),
    ("run `ls -la`", [("terminal", {"command": "ls -la"})]),
    ("Run the command: pytest -q", [("terminal", {"command": "pytest -q"})]),
    ("execute `echo done`", [("terminal", {"command": "echo done"})]),
    ("add a todo: write tests", [("todo", {"action": "add", "items": ["write tests"]})]),
    ("add todos: a; b; c", [("todo", {"action": "add", "items": ["a", "b", "c"]})]),
    ("show my todos", [("todo", {"action": "list"})]),
    ("mark todo 2 done", [("todo", {"action": "update", "id": 2, "status": "done"})]),
    ("mark task #3 as in progress", [("todo", {"action": "update", "id": 3, "status": "in_progress"})]),
    ("clear my todo list", [("todo", {"action": "clear"})]),
    ("remember that the staging port is 8443.",
     [("memory", {"action": "add", "target": "memory", "content": "the staging port is 8443"})]),
    ("Note that we deploy on Fridays", [("memory", {"action": "add", "target": "memory", "content": "we deploy on Fridays"})]),
    ("save to memory: builds use uv", [("memory", {"action": "add", "target": "memory", "content": "builds use uv"})]),
])
def test_each_request_becomes_the_right_tool_call(text, expected):
    response = ask(text)
    assert calls_of(response) == expected
    assert response.finish_reason == "tool_calls"
    assert response.message["content"] is None


@pytest.mark.parametrize("text, expected", [
    ("read a.txt and b.txt", [("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"})]),
    ("read a.txt then list files", [("read_file", {"path": "a.txt"}), ("list_dir", {"path": "."})]),
    ("Hi! Could you read notes.txt, b.txt and c.md?",
     [("read_file", {"path": "notes.txt"}), ("read_file", {"path": "b.txt"}), ("read_file", {"path": "c.md"})]),
    ('write "x = 1" to a.py and then run `python a.py`',
     [("write_file", {"path": "a.py", "content": "x = 1"}), ("terminal", {"command": "python a.py"})]),
])
def test_several_requests_become_parallel_calls_with_distinct_deterministic_ids(text, expected):
    first, second = ask(text), ask(text)
    assert calls_of(first) == expected
    ids = [call["id"] for call in first.message["tool_calls"]]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"call_[0-9a-f]{12}", call_id) for call_id in ids)
    assert ids == [call["id"] for call in second.message["tool_calls"]]


def test_call_ids_differ_between_conversation_positions():
    one = ask("read a.txt")
    longer = model.complete(ChatRequest(messages=[
        {"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "read a.txt"}], tools=ALL_TOOLS))
    assert calls_of(one) == calls_of(longer)
    assert one.message["tool_calls"][0]["id"] != longer.message["tool_calls"][0]["id"]


def test_sentences_without_requests_are_skipped_and_ordinary_prose_is_not_a_request():
    assert calls_of(ask("I am tidying the project today. Please list the directory docs")) == [
        ("list_dir", {"path": "docs"})]
    assert parse_intents("the cat sat on the mat") == []
    assert parse_intents("I read books in the evening") == []


def test_a_tool_that_is_not_offered_is_named_instead_of_called():
    response = ask("remember that the build number is 4711", tools=BUILTIN_TOOLS)
    assert calls_of(response) == []
    assert "`memory` tool" in response.message["content"] and "not available" in response.message["content"]
    assert "`read_file`" in response.message["content"]
    assert response.finish_reason == "stop"

    no_tools = ask("read notes.txt", tools=None)
    assert "no tools are available" in no_tools.message["content"].lower()


def test_offered_tools_are_still_called_when_another_request_is_unavailable():
    response = ask("read a.txt and remember that it matters", tools=BUILTIN_TOOLS)
    assert calls_of(response) == [("read_file", {"path": "a.txt"})]
    assert "`memory` tool" in response.message["content"]


def test_argument_names_come_from_the_offered_schema():
    tools = [
        schema("read_file", {"file_path": STRING}, ["file_path"]),
        schema("grep", {"query": STRING, "directory": STRING}, ["query"]),
        schema("bash", {"script": STRING}, ["script"]),
    ]
    response = ask("read a.txt and grep needle in lib then run `make`", tools=tools)
    assert calls_of(response) == [
        ("read_file", {"file_path": "a.txt"}),
        ("grep", {"query": "needle", "directory": "lib"}),
        ("bash", {"script": "make"}),
    ]


def test_an_unknown_argument_name_fills_the_single_required_property():
    response = ask("run `uptime`", tools=[schema("terminal", {"shell_line": STRING}, ["shell_line"])])
    assert calls_of(response) == [("terminal", {"shell_line": "uptime"})]


# ---------------------------------------------------------------- answers from tool results


def answer_to(calls: list[tuple[str, dict]], results: list[str], tools: list[dict] = ALL_TOOLS) -> str:
    tool_calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, (name, args) in enumerate(calls)
    ]
    messages = [
        {"role": "user", "content": "do it"},
        {"role": "assistant", "content": None, "tool_calls": tool_calls},
        *({"role": "tool", "tool_call_id": f"call_{i}", "content": text} for i, text in enumerate(results)),
    ]
    response = model.complete(ChatRequest(messages=messages, tools=tools))
    assert response.finish_reason == "stop" and "tool_calls" not in response.message
    return response.message["content"]


def test_answer_from_a_file_read_shows_its_first_lines_and_line_count():
    body = "\n".join(f"{n:>5}| line {n}" for n in range(1, 31))
    answer = answer_to([("read_file", {"path": "notes.txt"})], [f"notes.txt: 30 lines\n{body}"])
    assert "`notes.txt` has 30 lines" in answer
    assert "    1| line 1" in answer and "   10| line 10" in answer and "line 11" not in answer


def test_answer_from_a_listing_search_and_command():
    listing = answer_to([("list_dir", {"path": "src"})], ["src/: 3 entries\napp.py  (1.2 KB)\nlib/\nREADME.md  (80 B)"])
    assert "`src` contains 3 entries" in listing and "- lib/" in listing

    hits = "2 matches in 2 files under src\nsrc/a.py:3: # TODO one\nsrc/b.py:9: # TODO two"
    search = answer_to([("search_files", {"pattern": "TODO", "path": "src"})], [hits])
    assert "Found 2 matches for `TODO`" in search and "`src/b.py:9: # TODO two`" in search

    output = "exit code 2\n" + "\n".join(f"out {n}" for n in range(1, 21))
    command = answer_to([("terminal", {"command": "make test"})], [output])
    assert "`make test` failed with exit code 2" in command
    assert "The last 12 of 20 output lines" in command
    assert "out 9\n" in command and "out 20" in command and "out 8\n" not in command


def test_answer_from_todo_and_memory_results():
    todo = answer_to([("todo", {"action": "add", "items": ["a", "b"]})],
                     ["todo list: 2 items, 0 done\n- [ ] 1. a (pending)\n- [ ] 2. b (pending)"])
    assert todo.startswith("Added 2 items") and "- [ ] 2. b (pending)" in todo
    memory = answer_to([("memory", {"action": "add", "target": "memory", "content": "port 8443"})],
                       ['{"success": true, "entries": 3}'])
    assert "Saved to memory" in memory and "port 8443" in memory


def test_tool_errors_are_reported_plainly_with_their_text():
    answer = answer_to(
        [("read_file", {"path": "a.txt"}), ("read_file", {"path": "missing.txt"}), ("list_dir", {"path": "x"})],
        ["a.txt: 1 line\n    1| alpha", "no such file: missing.txt", '{"error": "permission denied for x"}'],
    )
    sections = answer.split("\n\n")
    assert sections[0].startswith("`a.txt` has 1 line")
    assert "The `read_file` call failed: no such file: missing.txt" in answer
    assert "The `list_dir` call failed: permission denied for x" in answer


def test_a_tool_the_model_does_not_know_is_shown_as_returned():
    answer = answer_to([("weather", {"city": "Oslo"})], ["4 degrees, light rain"], tools=[])
    assert "`weather` returned" in answer and "4 degrees, light rain" in answer


def test_end_to_end_with_the_real_builtin_tools(tmp_path):
    from hermeslab.tools import builtin_registry, execute_tool_calls

    registry = builtin_registry(ToolsConfig(workspace=str(tmp_path), terminal=TerminalConfig(enabled=True)))
    messages: list[dict] = [{"role": "user", "content": 'write "alpha beta" to notes.txt and then run `cat notes.txt`'}]
    response = model.complete(ChatRequest(messages=messages, tools=registry.schemas()))
    results = execute_tool_calls(response.message["tool_calls"], registry)
    assert not any(result.is_error for result in results)
    messages += [response.message, *(result.message() for result in results)]
    final = model.complete(ChatRequest(messages=messages, tools=registry.schemas()))
    assert (tmp_path / "notes.txt").read_text() == "alpha beta"
    assert "notes.txt" in final.message["content"]
    assert "`cat notes.txt` succeeded (exit code 0)" in final.message["content"]
    assert "alpha beta" in final.message["content"]


# ---------------------------------------------------------------- summaries


SUMMARY_PROMPT = """You are writing a handoff summary. Output only the structured summary.

Turns to summarise:
[USER]
Fix the failing parser test in tests/test_parser.py (ticket #1234, see https://example.org/t/1234).
[ASSISTANT]
read_file({"path": "tests/test_parser.py"})
[TOOL RESULT call_1]
tests/test_parser.py: 40 lines
[ASSISTANT]
terminal({"command": "pytest -q"})
[TOOL RESULT call_2]
exit code 1
FAILED tests/test_parser.py::test_tokens - AssertionError: expected 3.5
[USER]
Also look at src/lexer.py for order_4711.

Use exactly this template:
## Active Task
The newest unfulfilled ask.
## Goal
## Constraints & Preferences
## Completed Actions
## Active State
## Blocked
## Key Decisions
## Resolved Questions
## Pending User Asks
## Relevant Files
## Remaining Work
## Critical Context

Target ~2000 tokens.
"""


def test_a_summary_request_gets_every_template_heading_in_order_filled_from_the_turns():
    text = ask(SUMMARY_PROMPT).message["content"]
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert headings == [line[3:] for line in SUMMARY_PROMPT.splitlines() if line.startswith("## ")]
    sections = dict(re.findall(r"^## (.+?)\n(.*?)(?=\n\n## |\Z)", text, re.MULTILINE | re.DOTALL))
    assert "Fix the failing parser test" in sections["Active Task"] and "Fix the failing" in sections["Goal"]
    assert sections["Completed Actions"] == (
        '1. read_file({"path": "tests/test_parser.py"})\n2. terminal({"command": "pytest -q"})')
    assert "AssertionError: expected 3.5" in sections["Blocked"]
    assert sections["Relevant Files"] == "- tests/test_parser.py\n- src/lexer.py"
    for fact in ("#1234", "https://example.org/t/1234", "order_4711", "3.5"):
        assert fact in sections["Critical Context"]
    assert sections["Key Decisions"] == "None." and sections["Remaining Work"] == "None."


def test_a_summary_template_after_quoted_headings_uses_only_the_template():
    prompt = SUMMARY_PROMPT.replace(
        "[TOOL RESULT call_1]\n", "[TOOL RESULT call_1]\n## Installation\nRun make.\n\n\n\n\n## Usage\n")
    headings = re.findall(r"^## (.+)$", ask(prompt).message["content"], re.MULTILINE)
    assert headings[0] == "Active Task" and "Installation" not in headings and len(headings) == 12


def test_an_iterative_summary_reads_the_new_turns_between_the_old_summary_and_the_template():
    prompt = (
        "Update the summary below with the new turns.\n"
        "## Goal\nShip v2.\n## Relevant Files\n- old/path.py\n"
        "[USER] deploy build 9917 to staging\n"
        "[TOOL CALL] terminal({\"command\": \"make deploy\"})\n"
        "## Goal\n## Completed Actions\n## Relevant Files\n## Critical Context\n"
    )
    text = ask(prompt).message["content"]
    assert re.findall(r"^## (.+)$", text, re.MULTILINE) == ["Goal", "Completed Actions", "Relevant Files",
                                                            "Critical Context"]
    assert "\u201cdeploy build 9917 to staging\u201d" in text
    assert '1. terminal({"command": "make deploy"})' in text
    assert "- 9917" in text


# ---------------------------------------------------------------- text answers


def test_identity_is_plain_about_being_rule_based():
    for question in ("Who are you?", "what can you do", "help", "Are you an LLM?"):
        text = ask(question).message["content"]
        assert "hermeslab's offline model" in text and "not a language model" in text
        assert "read a file" in text and "run a shell command" in text


def test_unrecognised_messages_get_useful_text_and_say_which_tools_are_missing():
    text = ask("Tell me about the weather in Oslo", tools=BUILTIN_TOOLS).message["content"]
    assert text.startswith("I could not match your message")
    assert "not a language model" in text
    assert "needs a `memory` tool, which is not offered here" in text


def test_a_conversation_already_answered_gets_a_clear_non_empty_reply():
    response = model.complete(ChatRequest(messages=[
        {"role": "user", "content": "read a.txt"}, {"role": "assistant", "content": "Done."}], tools=ALL_TOOLS))
    assert response.message["content"].startswith("There is no new user request")
    assert "tool_calls" not in response.message


def test_asked_to_check_its_answer_it_repeats_the_answer_unchanged():
    draft = "`a.txt` has 1 line. Here it is:\n```\n    1| alpha\n```"
    response = model.complete(ChatRequest(messages=[
        {"role": "user", "content": "read a.txt"},
        {"role": "assistant", "content": draft},
        {"role": "user", "content": "Before you finish: check your answer against the conversation. "
                                    "If something is wrong, correct it; otherwise repeat the answer unchanged."},
    ], tools=ALL_TOOLS))
    assert response.message == {"role": "assistant", "content": draft}


def test_synthetic_user_messages_and_handoff_summaries_are_not_requests():
    messages = [
        {"role": "user", "content": "read real.txt"},
        {"role": "user", "content": "read synthetic.txt", "_todo_snapshot_synthetic": True},
        {"role": "user", "content": "[HANDOFF SUMMARY - REFERENCE ONLY] read old.txt"},
    ]
    response = model.complete(ChatRequest(messages=messages, tools=ALL_TOOLS))
    assert calls_of(response) == [("read_file", {"path": "real.txt"})]


def test_long_answers_for_stream_tests():
    counted = ask("count to 500").message["content"]
    assert counted.startswith("1, 2, 3, ") and counted.endswith("499, 500.")
    assert len(re.findall(r"\d+", counted)) == 500
    story = ask("tell me a long story").message["content"]
    assert len(story.split()) > 400
    assert ask("write a long answer").message["content"] == story


def test_max_tokens_cuts_text_and_reports_length():
    response = ask("count to 500", max_tokens=20)
    assert response.finish_reason == "length"
    assert response.usage.completion_tokens == count_text(response.message["content"]) == 20
    assert "1, 2, 3" in response.message["content"]


# ---------------------------------------------------------------- determinism, usage, streaming


@pytest.mark.parametrize("text", ["read a.txt and b.txt", "who are you", SUMMARY_PROMPT, "count to 40"])
def test_same_request_same_bytes(text):
    first, second = ask(text), ask(text)
    assert json.dumps(first.message) == json.dumps(second.message)
    assert first == second
    assert list(model.stream(ChatRequest(messages=[{"role": "user", "content": text}], tools=ALL_TOOLS))) == list(
        model.stream(ChatRequest(messages=[{"role": "user", "content": text}], tools=ALL_TOOLS)))


def test_usage_is_counted_with_tiktoken():
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "who are you?"}]
    response = model.complete(ChatRequest(messages=messages, tools=ALL_TOOLS))
    assert response.usage.prompt_tokens == default_counter.count_request(messages, ALL_TOOLS)
    assert response.usage.completion_tokens == count_text(response.message["content"])
    assert response.model == MODEL_NAME

    calls = ask("read a.txt and grep foo")
    expected = sum(count_text(c["function"]["name"]) + count_text(c["function"]["arguments"])
                   for c in calls.message["tool_calls"])
    assert calls.usage.completion_tokens == expected


def test_stream_yields_word_sized_deltas_then_the_complete_response():
    request = ChatRequest(messages=[{"role": "user", "content": "count to 30"}])
    items = list(model.stream(request))
    deltas, final = items[:-1], items[-1]
    assert all(isinstance(item, StreamDelta) for item in deltas) and isinstance(final, ChatResponse)
    assert "".join(d.text for d in deltas) == final.message["content"]
    assert len(deltas) == 30 and all(len(d.text.split()) == 1 for d in deltas)
    assert final == model.complete(request)


def test_tool_call_responses_stream_no_text():
    items = list(model.stream(ChatRequest(messages=[{"role": "user", "content": "ls"}], tools=ALL_TOOLS)))
    assert len(items) == 1 and calls_of(items[0]) == [("list_dir", {"path": "."})]


def test_invalid_requests_are_rejected_like_an_api_would():
    with pytest.raises(ProviderError) as excinfo:
        model.complete(ChatRequest(messages=[{"role": "tool", "tool_call_id": "x", "content": "orphan"}]))
    assert excinfo.value.status == 400 and "answers no open tool call" in excinfo.value.message
    with pytest.raises(ProviderError, match="max_tokens"):
        ask("hello", max_tokens=0)
