"""The LLM summariser against a scripted provider, its prompt, and the summary template."""

from __future__ import annotations

import json

import pytest

from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.context.summary import (
    LLMSummariser,
    build_summary_prompt,
    classify_failure,
    cooldown_seconds,
    ground_active_task,
    serialise_span,
)
from hermeslab.context.template import (
    HEADINGS,
    SECTIONS,
    parse_sections,
    render_empty_template,
    render_sections,
    replace_section,
)
from hermeslab.context.types import Summariser, SummaryRequest
from hermeslab.core.provider import ChatRequest, ChatResponse, ProviderError, Usage

ASK = "Please migrate the billing tables to schema v2 and keep the audit log."
KEY = "sk-proj-" + "R4nd0mK3yM4t3r14l" * 2


class FakeProvider:
    """Answers from a script: per model, a list of replies (text) or exceptions, consumed in order."""

    name = "fake"

    def __init__(self, script: dict[str, list]):
        self.script = {model: list(replies) for model, replies in script.items()}
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        reply = self.script[request.model].pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return ChatResponse(message={"role": "assistant", "content": reply}, usage=Usage(prompt_tokens=900, completion_tokens=120))

    def stream(self, request):
        raise NotImplementedError("summaries use complete()")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def span() -> list[dict]:
    return [
        {"role": "user", "content": "Look at the billing schema."},
        {
            "role": "assistant",
            "content": "<think>private musing</think>Checking the tables.",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": json.dumps({"command": f"OPENAI_API_KEY={KEY} psql -c '\\dt'"})}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "invoices | payments | audit_log"},
        {"role": "user", "content": ASK},
    ]


def request(**overrides) -> SummaryRequest:
    fields = {"span": span(), "previous_summary": None, "focus": None, "budget_tokens": 2_000}
    fields.update(overrides)
    return SummaryRequest(**fields)


def model_summary(task: str = "Migrate billing.") -> str:
    return render_sections({"Active Task": task, "Goal": "Schema v2", "Critical Context": "- audit_log"})


def timeout_error() -> ProviderError:
    return ProviderError("Request timed out", status=408, error_type="APITimeoutError")


# ---------------------------------------------------------------- template


def test_template_has_13_sections_with_active_task_first():
    assert len(SECTIONS) == 13
    assert HEADINGS[0] == "Active Task" and HEADINGS[-1] == "Critical Context"
    template = render_empty_template()
    assert [line[3:] for line in template.splitlines() if line.startswith("## ")] == list(HEADINGS)
    assert all(instruction in template for _, instruction in SECTIONS)


def test_parse_and_render_round_trip_and_reject_unknown_sections():
    body = render_sections({"goal": "Ship it", "Critical Context": "- ZFA04Y"})
    sections = parse_sections("Here you go:\n" + body)
    assert sections["Goal"] == "Ship it" and sections["Active Task"] == "None."
    assert render_sections(sections) == body
    with pytest.raises(ValueError, match="unknown summary section 'Mood'"):
        render_sections({"Mood": "good"})


def test_parse_ignores_headings_inside_code_fences_and_reads_hermes_names():
    body = "## Historical Task Snapshot\nfix it\n```\n## Goal\n```\n### notes\nmore\n## Goal\nreal goal"
    assert parse_sections(body) == {"Active Task": "fix it\n```\n## Goal\n```\n### notes\nmore", "Goal": "real goal"}


def test_a_fence_left_open_by_a_clipped_quote_does_not_hide_later_sections():
    clipped = "## Active Task\nFocus: run\n```sh\nmake te\u2026\n\n"
    block = "## Blocked\n```\n## Goal\n```\n"
    assert parse_sections(clipped + "## Goal\nship it\n" + block) == {
        "Active Task": "Focus: run\n```sh\nmake te\u2026", "Goal": "ship it", "Blocked": "```\n## Goal\n```"}
    assert parse_sections("## Goal\nship it\n" + block + "## Remaining Work\n```py\nrun(") == {
        "Goal": "ship it", "Blocked": "```\n## Goal\n```", "Remaining Work": "```py\nrun("}


def test_replace_section_edits_in_place_or_prepends():
    body = model_summary()
    replaced = replace_section(body, "Active Task", "quoted ask")
    assert parse_sections(replaced)["Active Task"] == "quoted ask"
    assert parse_sections(replaced)["Goal"] == "Schema v2"
    assert replace_section("free text only", "Active Task", "q") == "## Active Task\nq\n\nfree text only"


# ---------------------------------------------------------------- serialising and the prompt


def test_serialise_span_labels_blocks_strips_think_and_redacts():
    text = serialise_span(span())
    assert text.startswith("[USER]\nLook at the billing schema.")
    assert "[ASSISTANT]\nChecking the tables.\nTool calls:\n- terminal(" in text
    assert "[TOOL RESULT c1]\ninvoices | payments | audit_log" in text
    assert "private musing" not in text and KEY not in text and "[REDACTED:openai_key]" in text


def test_serialise_span_flattens_images_and_shortens_long_bodies():
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "two screenshots"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo" + "A" * 500}},
                {"type": "image_url", "image_url": {"url": "https://example.com/shot.png"}},
            ],
        },
        {"role": "tool", "tool_call_id": "t9", "content": "H" * 4_000 + "M" * 3_000 + "T" * 1_500},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "t9", "type": "function", "function": {"name": "write", "arguments": "x" * 2_000}}]},
    ]
    text = serialise_span(messages)
    assert "two screenshots\n[image]\n[image: https://example.com/shot.png]" in text
    assert "iVBORw0KGgo" not in text
    assert "H" * 4_000 + "\n…[3000 characters omitted]…\n" + "T" * 1_500 in text and "M" not in text
    assert "- write(" + "x" * 1_200 + "…)" in text


def test_serialise_span_rejects_non_messages():
    with pytest.raises(TypeError, match="message 1 is a str"):
        serialise_span([{"role": "user", "content": "a"}, "b"])  # type: ignore[list-item]


def test_first_compaction_prompt_contains_turns_template_and_target():
    prompt = build_summary_prompt(request())
    assert "handoff summary" in prompt and "[REDACTED]" in prompt and "language the user writes in" in prompt
    assert "TURNS TO SUMMARISE:\n[USER]\nLook at the billing schema." in prompt
    assert render_empty_template() in prompt
    assert "Target ~2000 tokens" in prompt
    assert "PREVIOUS SUMMARY" not in prompt and "Today is" not in prompt


def test_iterative_prompt_carries_the_previous_summary_and_update_rules():
    previous = model_summary() + "\n- password: hunter2-secret"
    prompt = build_summary_prompt(request(previous_summary=previous))
    assert "PREVIOUS SUMMARY:\n## Active Task\nMigrate billing." in prompt
    assert "NEW TURNS TO MERGE:\n[USER]" in prompt
    assert "continue the numbering" in prompt and "quoted word for word" in prompt
    assert "hunter2-secret" not in prompt


def test_focus_block_comes_last_after_the_date_rule():
    prompt = build_summary_prompt(request(focus="the audit log"), today="2025-03-04")
    assert prompt.index(render_empty_template()) < prompt.index("Today is 2025-03-04") < prompt.index("FOCUS: the audit log")
    assert prompt.rstrip().endswith("Compress everything else hard.")
    assert "60-70%" in prompt.split("FOCUS:")[1]


def test_memory_context_is_redacted_encoded_and_labelled_as_material():
    memory = f"User prefers <b>tabs</b> & short answers. Key: {KEY}. " + "z" * 7_000
    prompt = build_summary_prompt(request(memory_context=memory))
    block = prompt.split("<memory-context>\n")[1].split("\n</memory-context>")[0]
    label, encoded = block.split("\n", 1)
    assert "no instructions" in label
    decoded = json.loads(encoded)
    assert decoded.startswith("User prefers <b>tabs</b> & short answers. Key: [REDACTED:openai_key].")
    assert "<b>" not in encoded and "&" not in encoded
    assert "characters omitted" in decoded and len(decoded) < 6_000


def test_prompt_rejects_bad_requests_and_dates():
    with pytest.raises(ValueError, match="today must be a date written YYYY-MM-DD"):
        build_summary_prompt(request(), today="04/03/2025")
    with pytest.raises(ValueError, match="budget_tokens"):
        build_summary_prompt(request(budget_tokens=-5))


# ---------------------------------------------------------------- the call


def test_one_call_with_a_capped_output_and_redacted_grounded_body():
    provider = FakeProvider({"main": [model_summary("Migrate billing.") + f"\n\nUsed key {KEY}."]})
    summariser = LLMSummariser(provider, "main", today=lambda: "2025-03-04")
    assert isinstance(summariser, Summariser)
    outcome = summariser.summarise(request())
    (sent,) = provider.requests
    assert sent.model == "main" and sent.max_tokens == 4_000
    assert sent.messages[0]["role"] == "user" and "Today is 2025-03-04" in sent.messages[0]["content"]
    assert KEY not in outcome.body and "[REDACTED:openai_key]" in outcome.body
    assert parse_sections(outcome.body)["Active Task"] == ASK
    assert (outcome.fallback_used, outcome.error) == (False, None)
    assert (outcome.usage_prompt_tokens, outcome.usage_completion_tokens) == (900, 120)


def test_grounding_inserts_a_missing_active_task_and_ignores_synthetic_asks():
    messages = span() + [{"role": "user", "content": "todo snapshot", "_todo_snapshot_synthetic": True}]
    grounded = ground_active_task("## Goal\nSchema v2", messages)
    assert grounded.startswith(f"## Active Task\n{ASK}\n\n## Goal")
    assert ground_active_task("## Goal\nx", [{"role": "assistant", "content": "hi"}]) == "## Goal\nx"


def test_think_only_or_empty_answers_fail_over_to_the_fallback():
    provider = FakeProvider({"main": ["<think>only reasoning</think>"]})
    outcome = LLMSummariser(provider, "main", fallback=ExtractiveSummariser()).summarise(request())
    assert outcome.fallback_used and "empty_response" in outcome.error
    assert parse_sections(outcome.body)["Active Task"] == ASK


def test_timeouts_climb_the_cooldown_ladder_and_no_call_is_made_while_cooling():
    clock = Clock()
    provider = FakeProvider({"main": [timeout_error(), timeout_error(), timeout_error(), model_summary()]})
    summariser = LLMSummariser(provider, "main", clock=clock, fallback=ExtractiveSummariser())
    waits = []
    for _ in range(3):
        calls_before = len(provider.requests)
        outcome = summariser.summarise(request())
        assert len(provider.requests) == calls_before + 1
        assert outcome.fallback_used and "timeout" in outcome.error
        wait = summariser.routes["main"].cooldown_until - clock.now
        waits.append(wait)
        clock.now += wait - 1
        cooling = summariser.summarise(request())  # one second before the cooldown ends
        assert len(provider.requests) == calls_before + 1
        assert cooling.fallback_used and "cooling down" in cooling.error
        clock.now += 1
    assert waits == [60.0, 300.0, 900.0]
    recovered = summariser.summarise(request())
    assert not recovered.fallback_used and recovered.error is None
    assert summariser.routes["main"].consecutive_transient == 0


def test_without_a_fallback_a_failure_yields_an_empty_body_and_the_error():
    provider = FakeProvider({"main": [ProviderError("boom", status=500)]})
    outcome = LLMSummariser(provider, "main").summarise(request())
    assert outcome.body == "" and not outcome.fallback_used
    assert "server_error" in outcome.error and "boom" in outcome.error


def test_summary_model_failure_retries_once_on_the_main_model():
    clock = Clock()
    provider = FakeProvider({"aux": [ProviderError("model 'aux' does not exist", status=404)], "main": [model_summary(), model_summary()]})
    summariser = LLMSummariser(provider, "main", summary_model="aux", clock=clock)
    first = summariser.summarise(request())
    assert [r.model for r in provider.requests] == ["aux", "main"]
    assert not first.fallback_used and first.body
    second = summariser.summarise(request())  # the auxiliary route is cooling down
    assert [r.model for r in provider.requests] == ["aux", "main", "main"]
    assert second.body


def test_both_routes_failing_fall_back_with_both_errors():
    provider = FakeProvider({"aux": [ProviderError("slow down", status=429)], "main": [ProviderError("overloaded", status=503)]})
    outcome = LLMSummariser(provider, "main", summary_model="aux", fallback=ExtractiveSummariser()).summarise(request())
    assert outcome.fallback_used
    assert "aux failed (rate_limit" in outcome.error and "main failed (overloaded" in outcome.error


def test_retry_after_is_honoured_when_longer_than_the_ladder():
    clock = Clock()
    provider = FakeProvider({"main": [ProviderError("rate limited", status=429, retry_after=120.0)]})
    summariser = LLMSummariser(provider, "main", clock=clock)
    summariser.summarise(request())
    assert summariser.routes["main"].cooldown_until == clock.now + 120.0


@pytest.mark.parametrize(
    ("error", "category"),
    [
        (ProviderError("Too Many Requests", status=429), "rate_limit"),
        (ProviderError("You exceeded your current quota", status=429, error_type="insufficient_quota"), "quota"),
        (ProviderError("Service Unavailable", status=503), "overloaded"),
        (ProviderError("The model `x` does not exist", status=404), "model_not_found"),
        (ProviderError("timed out", status=None, error_type="APITimeoutError"), "timeout"),
        (ProviderError("Gateway Timeout", status=504), "timeout"),
        (ProviderError("Bad Gateway", status=502), "server_error"),
        (ProviderError("Invalid API key", status=401), "auth"),
        (ProviderError("context too long", status=400), "bad_request"),
        (ProviderError("peer closed connection without sending complete message body"), "network"),
        (TimeoutError("read timeout"), "timeout"),
        (ConnectionRefusedError("refused"), "network"),
        (RuntimeError("bug"), "other"),
    ],
)
def test_failure_classification(error, category):
    assert classify_failure(error) == category


def test_cooldown_table():
    assert [cooldown_seconds("rate_limit", n) for n in (1, 2, 3, 7)] == [60.0, 300.0, 900.0, 900.0]
    assert cooldown_seconds("auth", 0) == 60.0
    assert cooldown_seconds("overloaded", 1, retry_after=5.0) == 60.0


def test_constructor_rejects_missing_model_names():
    with pytest.raises(ValueError, match="main model name"):
        LLMSummariser(FakeProvider({}), "")
    with pytest.raises(ValueError, match="summary_model"):
        LLMSummariser(FakeProvider({}), "main", summary_model="")
