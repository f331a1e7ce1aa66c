"""The deterministic summariser and the entity extractor it relies on."""

from __future__ import annotations

import copy
import json
import re

import pytest
from shared_data import DATASETS, dataset

from hermeslab.context.entities import extract_entities, uncovered_entities
from hermeslab.context.extractive import ExtractiveSummariser, strip_think, user_asks
from hermeslab.context.template import HEADINGS, parse_sections
from hermeslab.context.types import SUMMARY_PREFIX, SummaryRequest
from hermeslab.core.tokens import count_text

TAU_BENCH = DATASETS / "tau_bench_airline_gpt4o.jsonl"

NEWEST_ASK = "Now rename order_4711 in /srv/shop/orders.csv to ORD-4711-B\nand keep the backup under ./backups/ please."


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def span() -> list[dict]:
    return [
        {"role": "user", "content": "Find why the nightly export for order_4711 fails. Do not touch the prod database."},
        {
            "role": "assistant",
            "content": "<think>maybe the config</think>Let me look at the config first.",
            "tool_calls": [call("c1", "read_file", path="/srv/shop/config.yaml"), call("c2", "terminal", command="cd /srv/shop && pytest -q")],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "export:\n  batch_size: 512\n  target: s3://exports-7f3a9c2/nightly\n  timeout: 30 s"},
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": "collected 12 items\nTraceback (most recent call last):\n  File \"export.py\", line 88\nKeyError: 'customer_ref'\n=== 1 failed, 11 passed in 2.31s ===",
        },
        {"role": "assistant", "content": "The cause is a missing customer_ref column; I decided to add a default because old rows lack it."},
        {"role": "user", "content": "Which reservation uses ZFA04Y?"},
        {"role": "assistant", "content": "Reservation ZFA04Y belongs to mia_li_3668. It costs $1,234.56 for 2 passengers."},
        {"role": "user", "content": "Also check the 512 MB limit on disk quota.", "_todo_snapshot_synthetic": True},
        {"role": "user", "content": NEWEST_ASK},
    ]


def summarise(messages, *, budget=2_000, previous=None, focus=None, kept=None):
    return ExtractiveSummariser().summarise(SummaryRequest(span=messages, previous_summary=previous, focus=focus,
                                                          budget_tokens=budget, kept=kept))


def headings_of(body: str) -> list[str]:
    return re.findall(r"(?m)^## (.+)$", body)


# ---------------------------------------------------------------- the summary


def test_all_13_headings_in_order_with_active_task_first():
    body = summarise(span()).body
    assert headings_of(body) == list(HEADINGS)
    assert len(HEADINGS) == 13 and HEADINGS[0] == "Active Task"


def test_active_task_quotes_the_newest_real_user_ask_verbatim():
    sections = parse_sections(summarise(span()).body)
    assert sections["Active Task"] == NEWEST_ASK
    assert sections["Goal"].startswith("Find why the nightly export for order_4711 fails")


def test_entities_of_the_span_survive():
    body = summarise(span()).body
    for entity in ("/srv/shop/config.yaml", "order_4711", "ZFA04Y", "mia_li_3668", "$1,234.56", "s3://exports-7f3a9c2/nightly", "KeyError"):
        assert entity in body, entity


def test_tool_errors_fill_blocked_with_their_exact_text():
    sections = parse_sections(summarise(span()).body)
    assert "KeyError: 'customer_ref'" in sections["Blocked"]
    actions = sections["Completed Actions"].splitlines()
    assert actions[0].startswith("1. read_file(path=/srv/shop/config.yaml) - ok")
    assert actions[1].startswith("2. terminal(command=cd /srv/shop && pytest -q) - error: ")


def test_state_decisions_questions_and_constraints_are_extracted():
    sections = parse_sections(summarise(span()).body)
    assert "Working directory: /srv/shop" in sections["Active State"]
    assert "1 failed, 11 passed" in sections["Active State"]
    assert "decided to add a default" in sections["Key Decisions"]
    assert "Which reservation uses ZFA04Y?" in sections["Resolved Questions"]
    assert "Do not touch the prod database." in sections["Constraints & Preferences"]


def test_synthetic_user_messages_and_think_blocks_are_ignored():
    body = summarise(span()).body
    assert "512 MB limit" not in body
    assert "maybe the config" not in body


def test_pending_user_asks_are_those_without_an_answer():
    messages = [
        {"role": "user", "content": "Please export the Q3 report."},
        {"role": "user", "content": "And email it to ops@example.com."},
    ]
    sections = parse_sections(summarise(messages).body)
    assert "Please export the Q3 report." in sections["Pending User Asks"]
    assert sections["Active Task"] == "And email it to ops@example.com."


def test_focus_is_kept_next_to_the_active_task():
    sections = parse_sections(summarise(span(), focus="Original task: fix the nightly export").body)
    assert sections["Active Task"].startswith(NEWEST_ASK)
    assert "Focus: Original task: fix the nightly export" in sections["Active Task"]


def test_a_carried_active_task_gets_the_focus_once_however_often_it_is_carried():
    focus = "Original task: fix the nightly export"
    body = summarise(span(), focus=focus).body
    for round_ in range(3):
        tools_only = [{"role": "assistant", "content": "", "tool_calls": [call(f"r{round_}", "terminal", command="ls")]},
                      {"role": "tool", "tool_call_id": f"r{round_}", "content": "a.txt"}]
        body = summarise(tools_only, previous=body, focus=focus).body
    active = parse_sections(body)["Active Task"]
    assert active.startswith(NEWEST_ASK) and active.count("Focus: ") == 1


def test_budget_is_respected_by_dropping_whole_lines():
    messages = span()
    for i in range(40):
        messages.append({"role": "assistant", "content": "", "tool_calls": [call(f"x{i}", "terminal", command=f"grep -n item_{i} data/file_{i}.txt")]})
        messages.append({"role": "tool", "tool_call_id": f"x{i}", "content": f"{i * 37 + 1000}: item_{i} value={i * 1.5} ref=R{i:04d}X"})
    messages.append({"role": "user", "content": NEWEST_ASK})
    full = summarise(messages, budget=20_000).body
    assert count_text(full) > 600
    trimmed = summarise(messages, budget=600).body
    assert count_text(trimmed) <= 600
    assert headings_of(trimmed) == list(HEADINGS)
    assert parse_sections(trimmed)["Active Task"] == NEWEST_ASK
    full_lines = set(full.splitlines())
    assert all(line in full_lines or line == "None." for line in trimmed.splitlines())
    # Recent actions outlive old ones.
    assert "ref=R0039X" in trimmed and "ref=R0000X" not in trimmed


def test_output_is_deterministic_and_the_input_is_not_modified():
    messages = span()
    before = copy.deepcopy(messages)
    first = summarise(messages).body
    assert summarise(copy.deepcopy(messages)).body == first
    assert messages == before


def test_iterative_merge_keeps_earlier_entities_and_continues_numbering():
    first = summarise(span()).body
    later = [
        {"role": "assistant", "content": "", "tool_calls": [call("d1", "write_file", path="/srv/shop/export.py", content="...")]},
        {"role": "tool", "tool_call_id": "d1", "content": "wrote 42 lines"},
        {"role": "user", "content": "Great, now run the export for batch B-2024-17."},
    ]
    merged = summarise(later, previous=SUMMARY_PREFIX + "\n" + first)
    sections = parse_sections(merged.body)
    for entity in ("order_4711", "ZFA04Y", "/srv/shop/config.yaml"):
        assert entity in merged.body, entity
    numbers = [int(m) for m in re.findall(r"(?m)^(\d+)\.", sections["Completed Actions"])]
    assert numbers == [1, 2, 3]
    assert "3. write_file(path=/srv/shop/export.py" in sections["Completed Actions"]
    assert sections["Goal"].startswith("Find why the nightly export")
    assert sections["Active Task"] == "Great, now run the export for batch B-2024-17."


def test_secrets_in_the_span_never_reach_the_summary():
    key = "ghp_" + "Zq8" * 12
    messages = [{"role": "user", "content": f"Push with token {key} to origin"}]
    body = summarise(messages).body
    assert key not in body and "[REDACTED:github_token]" in body


def test_bad_requests_are_rejected_with_a_clear_message():
    with pytest.raises(ValueError, match="budget_tokens must be a positive int"):
        summarise(span(), budget=0)
    with pytest.raises(TypeError, match="list of message dicts"):
        summarise(["hello"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="cannot hold the template headings"):
        summarise(span(), budget=40)


def test_recorded_sessions_fit_their_budget_and_keep_their_ids():
    with dataset(TAU_BENCH.name).open(encoding="utf-8") as handle:
        sessions = [json.loads(next(handle)) for _ in range(8)]
    for session in sessions:
        messages = session["messages"][1:]
        body = summarise(messages, budget=2_000).body  # the smallest summary budget the pipeline asks for
        assert count_text(body) <= 2_000
        assert headings_of(body) == list(HEADINGS)
        ids = {a.get("reservation_id") for m in messages for c in m.get("tool_calls") or [] for a in [json.loads(c["function"]["arguments"])]} - {None}
        assert all(i in body for i in ids), session["id"]


# ---------------------------------------------------------------- reading a span


def test_user_asks_skip_summaries_synthetic_and_textless_messages():
    image_only = [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": SUMMARY_PREFIX + "\nbody"},
        {"role": "user", "content": "x", "_pre_verify_synthetic": True},
        {"role": "user", "content": "  "},
        {"role": "user", "content": image_only},
        {"role": "user", "content": [{"type": "text", "text": "see picture"}, *image_only]},
    ]
    assert user_asks(messages) == [(0, "first"), (6, "see picture")]


def test_strip_think_removes_closed_and_unclosed_blocks():
    assert strip_think("<think>x</think>Answer <reasoning>y</reasoning>done") == "Answer done"
    assert strip_think("Plan ahead <think>never closed") == "Plan ahead"


# ---------------------------------------------------------------- entities


def test_entities_cover_the_documented_kinds_in_order():
    text = (
        "Edit src/app/main.py and ./run.sh, see https://example.com/a?b=1. Order order_4711, ticket #1234, task-1234, "
        "reservation ZFA04Y, commit 59a200c6d575d595120f1cb70fea53cef0632f6b, id 123e4567-e89b-12d3-a456-426614174000, "
        "mail ops@example.com, took 2.5 s, used 512 MB, cost $1,234.56, raised ValueError and ENOENT, "
        "called parseArgs on ChatWidget with max_tokens and `pytest -q` for 'hermeslab.core', version 1.2.3 on 2024-05-15."
    )
    assert extract_entities(text) == [
        "src/app/main.py", "./run.sh", "https://example.com/a?b=1", "order_4711", "#1234", "task-1234", "ZFA04Y",
        "59a200c6d575d595120f1cb70fea53cef0632f6b", "123e4567-e89b-12d3-a456-426614174000", "ops@example.com",
        "2.5 s", "512 MB", "$1,234.56", "ValueError", "ENOENT", "parseArgs", "ChatWidget", "max_tokens", "pytest -q",
        "hermeslab.core", "1.2.3", "2024-05-15",
    ]


def test_entities_skip_common_prose_and_small_numbers():
    prose = (
        "The user said hello and asked about the weather. It was 3 degrees, so we talked for 10 minutes "
        "about URLs, IDs and the well-known and/or ambiguous options. Then we left at 5."
    )
    assert extract_entities(prose) == []


def test_entities_are_deduplicated_and_skip_redaction_placeholders():
    assert extract_entities("ZFA04Y then ZFA04Y again, key [REDACTED:openai_key]") == ["ZFA04Y"]
    with pytest.raises(TypeError):
        extract_entities(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------- facts: where they are read, which get a place


def pruned_copy(messages: list[dict]) -> list[dict]:
    """``messages`` with every tool result cut to a one-line description, as pruning leaves them."""
    return [dict(m, content=f"[tool] result of {m['tool_call_id']} ({len(m['content'])} chars)")
            if m.get("role") == "tool" else m for m in messages]


def critical_context(body: str) -> str:
    return parse_sections(body)["Critical Context"]


def test_facts_of_results_pruning_cut_are_read_from_the_originals():
    whole = span()
    request = SummaryRequest(span=pruned_copy(whole), previous_summary=None, focus=None, budget_tokens=2_000,
                             originals=whole)
    facts = critical_context(ExtractiveSummariser().summarise(request).body)
    assert "customer_ref" in facts and "s3://exports-7f3a9c2/nightly" in facts
    assert "chars" not in facts  # the description's size note is not a fact of the conversation
    blind = critical_context(summarise(pruned_copy(whole)).body)
    assert "s3://exports-7f3a9c2/nightly" not in blind


def test_originals_of_another_length_are_not_trusted():
    whole = span()
    request = SummaryRequest(span=pruned_copy(whole), previous_summary=None, focus=None, budget_tokens=2_000,
                             originals=whole[:-1])
    assert "s3://exports-7f3a9c2/nightly" not in critical_context(ExtractiveSummariser().summarise(request).body)


def test_facts_the_kept_messages_still_show_get_no_place():
    kept = [{"role": "user", "content": "Reservation ZFA04Y is still open for mia_li_3668."}]
    request = SummaryRequest(span=span(), previous_summary=None, focus=None, budget_tokens=2_000, kept=kept)
    facts = critical_context(ExtractiveSummariser().summarise(request).body)
    assert "ZFA04Y" not in facts and "mia_li_3668" not in facts
    assert "ZFA04Y" in critical_context(summarise(span()).body)


def test_bad_originals_or_kept_are_refused_by_name():
    for field in ("originals", "kept"):
        request = SummaryRequest(span=span(), previous_summary=None, focus=None, budget_tokens=2_000,
                                 **{field: [{"role": "user", "content": "x"}, "not a message"]})
        with pytest.raises(TypeError, match=f"SummaryRequest.{field}"):
            ExtractiveSummariser().summarise(request)


def test_an_entity_another_one_contains_takes_no_place_of_its_own():
    ranked = ["core.py", "src/app/core.py", "order_4711", "4711", "ORD-9"]
    assert uncovered_entities(ranked, "", 10) == ["src/app/core.py", "order_4711", "ORD-9"]
    assert uncovered_entities(ranked, "see ORD-9 above", 10) == ["src/app/core.py", "order_4711"]
    assert uncovered_entities(ranked, "", 1) == ["core.py"]


def test_entities_share_lines_and_the_budget_still_holds():
    tools = [{"role": "assistant", "content": "", "tool_calls": [call(f"c{i}", "terminal", command=f"cat part_{i}.txt")]}
             if half == 0 else {"role": "tool", "tool_call_id": f"c{i}", "content": f"value_{i}_a value_{i}_b id_{i}_c"}
             for i in range(60) for half in (0, 1)]
    for budget in (300, 800, 3_000):
        body = summarise(tools, budget=budget, kept=[]).body
        assert count_text(body) <= budget
    lines = [line for line in critical_context(summarise(tools, budget=3_000, kept=[]).body).splitlines()
             if line.strip()]
    assert len(lines) > 1 and all(line.startswith("- ") and 1 <= line.count("; ") + 1 <= 8 for line in lines)
    assert lines[0].count("; ") == 7  # eight to a line
    assert sum(line.count("; ") + 1 for line in lines) > 80
    plain = [line for line in critical_context(summarise(tools, budget=3_000).body).splitlines() if line.strip()]
    assert len(plain) == 80 and not any("; " in line for line in plain)  # without kept: the plain list


def test_entities_an_earlier_summary_carried_outlast_single_older_mentions():
    earlier = summarise(span(), kept=[]).body
    assert "mia_li_3668" in critical_context(earlier)
    listing = " ".join(f"file_{i}.log" for i in range(300))
    fresh = [message for i, content in enumerate([listing, "ok", "ok"])
             for message in ({"role": "assistant", "content": "", "tool_calls": [call(f"n{i}", "terminal", command="ls")]},
                             {"role": "tool", "tool_call_id": f"n{i}", "content": content})]
    later = summarise(fresh, previous=earlier, budget=700, kept=[]).body
    facts = critical_context(later)
    assert "mia_li_3668" in facts and facts.index("mia_li_3668") < facts.index("file_")


def test_a_long_focus_is_shown_by_its_first_line():
    focus = "Original task: <pr_description>\n" + "Consider the following long description. " * 60
    active = parse_sections(summarise(span(), focus=focus, kept=[]).body)["Active Task"]
    assert "Focus: Original task: <pr_description> [...]" in active
    assert "Consider the following" not in active
    assert "Consider the following" in parse_sections(summarise(span(), focus=focus).body)["Active Task"]
