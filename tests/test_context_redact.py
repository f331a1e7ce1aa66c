"""Redaction: nothing from the planted-secret corpus leaks, ordinary text passes unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hermeslab.context.redact import (
    _MARKERS,
    _MARKERS_BY_ANCHOR,
    _marked_lines,
    _shadow,
    redact,
    redact_exhaustive,
    redact_many,
    redact_message,
    redact_value,
)
from hermeslab.context.secret_patterns import RULES, placeholder

CORPUS = json.loads((Path(__file__).parent / "data" / "secrets_corpus.json").read_text(encoding="utf-8"))
SAMPLES = CORPUS["samples"]
BENIGN = CORPUS["benign"]


def leaked_fragments(secret: str, text: str, width: int = 8) -> list[str]:
    return [secret[i : i + width] for i in range(len(secret) - width + 1) if secret[i : i + width] in text]


def test_corpus_covers_at_least_30_formats_with_several_samples():
    formats: dict[str, int] = {}
    for sample in SAMPLES:
        formats[sample["format"]] = formats.get(sample["format"], 0) + 1
    assert len(formats) >= 30
    assert min(formats.values()) >= 2
    assert len(BENIGN) >= 40


@pytest.mark.parametrize("sample", SAMPLES, ids=[f"{s['format']}-{i}" for i, s in enumerate(SAMPLES)])
def test_no_fragment_of_a_planted_secret_survives(sample):
    redacted = redact(sample["text"])
    for secret in sample["secrets"]:
        assert secret in sample["text"]  # the corpus is consistent
        assert leaked_fragments(secret, redacted) == [], redacted
    assert "[REDACTED:" in redacted


@pytest.mark.parametrize("text", BENIGN)
def test_ordinary_text_passes_unchanged(text):
    assert redact(text) == text


def test_placeholders_name_the_kind_and_keep_the_context():
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    assert redact(token) == placeholder("github_token")
    assert redact(f"Authorization: Bearer {'x9' * 12}") == "Authorization: Bearer [REDACTED:authorization]"
    assert redact("postgres://app:Sup3rS3cret@db:5432/x") == "postgres://app:[REDACTED:db_password]@db:5432/x"
    assert redact("DB_PASSWORD=correct-horse-battery") == "DB_PASSWORD=[REDACTED:env_secret]"
    assert redact('{"password": "hunter2-and-more"}') == '{"password": "[REDACTED:secret_field]"}'


def test_known_false_positives_of_hermes_stay_fixed():
    # Hermes masked these: phone numbers inside identifiers and prefix-lookalike names.
    for text in ("base+12345678", "am_pm_conversion_table", "sk_learn_compatible_wrapper", "x = +14155550100"):
        assert redact(text) == text


def test_lowercased_matching_keeps_offsets_with_dotted_capital_i():
    # U+0130 grows under str.lower(); the case-insensitive rules must still mask the right span.
    text = "İstanbul office\npassword: Tr0ub4dor&3xyz\nİİ done"
    assert redact(text) == "İstanbul office\npassword: [REDACTED:secret_field]\nİİ done"


def test_secret_inside_a_truncated_private_key_block_is_masked():
    text = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx1y2z3\nAbCdEf0123456789\n…[1200 characters omitted]…"
    redacted = redact(text)
    assert "MIIEowIBAAKCAQEAx1y2z3" not in redacted and "AbCdEf0123456789" not in redacted


def test_redact_message_covers_content_parts_and_tool_arguments():
    key = "sk-proj-" + "Q7w8E9r0T1y2U3i4O5p6A7s8D9f0"
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,c2stcHJvai1mYWtl"}}
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": f"using {key}"}, image],
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": json.dumps({"command": f"export OPENAI_API_KEY={key}"})}}
        ],
    }
    out = redact_message(message)
    assert key not in json.dumps(out)
    assert out["content"][1] is image
    assert json.loads(out["tool_calls"][0]["function"]["arguments"])["command"] == "export OPENAI_API_KEY=[REDACTED:openai_key]"
    assert key in json.dumps(message)  # the input is not modified


def test_redact_value_walks_json_structures():
    value = {"a": ["token ghp_" + "Z9" * 18, 3, None], "b": ("xoxb-123456789012-abcdefABCDEF",)}
    out = redact_value(value)
    assert out == {"a": ["token [REDACTED:github_token]", 3, None], "b": ("[REDACTED:slack_token]",)}


def test_bad_input_is_rejected_clearly():
    with pytest.raises(TypeError, match="needs a str"):
        redact(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message dict"):
        redact_message("hello")  # type: ignore[arg-type]


def test_every_rule_has_triggers_and_markers():
    assert all(rule.triggers and rule.marker_sources() for rule in RULES)


FRAGMENTS = (
    [s["text"] for s in SAMPLES[::3]]
    + [secret for s in SAMPLES[::2] for secret in s["secrets"]]
    + BENIGN
    + [
        "password: ", "API_KEY=", "Authorization: Bearer ", "x-api-key: ", "://", "@", ":", "=", '"', "'", "\n",
        "[REDACTED:openai_key]", "[REDACTED:", "]", "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----",
        "token=", "?access_token=", "--password ", "-u admin:", "sk-", "ghp_", "eyJ", ".", "İ", "\\n", "\\",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=30)), max_size=12))
@example(["sk-gMwxo0Qpssguu9RCCP4BitXrUKXIVd1YjwTaYGIFo1QzCwaz",  # the key's mask ends at the JWT's first dot
          "eyJhbGciOiAiSFMyNTYiLCAidHlwIjogIkpXVCJ9.eyJzdWIiOiAib0ZDaEVPUVZWOSIsICJuYW1lIjogIkFkYSIsICJpYXQiOiAx"
          "NDE4NTczNzI5fQ.x_AJSyHAZEqQyBHnapkTap3PJp-fmS3sJYJZ89ipA1E"])
def test_redaction_is_idempotent_on_mixed_fragments(parts):
    text = "".join(parts)
    once = redact(text)
    assert redact(once) == once


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_redaction_never_raises_and_is_idempotent_on_arbitrary_text(text):
    once = redact(text)
    assert isinstance(once, str)
    assert redact(once) == once


def test_a_key_right_after_an_escaped_newline_is_masked():
    key = "sk-proj-" + "Zq8r3LmN5vT1xW7yB2cD4eF6gH9jK0pA"
    assert redact(f'{{"log": "started\\n{key}\\tdone"}}') == '{"log": "started\\n[REDACTED:openai_key]\\tdone"}'
    assert redact(f"mask_{key}") == f"mask_{key}"  # glued to a name: an identifier, not a key


def test_form_bodies_lose_each_secret_value_and_keep_the_other_fields():
    assert redact("password=mysecret&username=bob&token=opaque") == (
        "password=[REDACTED:secret_field]&username=bob&token=[REDACTED:url_parameter]")
    assert redact("grant_type=password&username=alice&password=Tr0ub4dor3&client_id=cli") == (
        "grant_type=password&username=alice&password=[REDACTED:url_parameter]&client_id=cli")
    assert redact("password: Tr0ub4dor&3xyz") == "password: [REDACTED:secret_field]"  # an & inside a value stays in it


@pytest.mark.parametrize("value", [
    "eyJhbGciOiJIUzI1NiJ9.k9Zq2.pX",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJoYS1hYmMiLCJpYXQiOjE3MDB9",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
])
def test_a_jwt_shaped_value_after_an_environment_name_is_masked_whole(value):
    assert redact(f"HOMEASSISTANT_TOKEN={value}") == "HOMEASSISTANT_TOKEN=[REDACTED:jwt]"


@pytest.mark.parametrize("token, kind", [
    ("fw-" + "Q" * 40, "fireworks_key"), ("fw_" + "R" * 40, "fireworks_key"), ("fpk_" + "T" * 40, "fireworks_key"),
    ("fw_" + "3ZaB9c" * 4, "fireworks_key"),
    ("am_" + "fedcba9876543210" * 2, "agentmail_key"), ("am_" + "Kd4" * 8, "agentmail_key"),
    ("am_org_" + "Wx3m" * 6, "agentmail_key"),
    ("123456789:" + "aB3" * 11, "telegram_bot_token"), ("7202650661:AA" + "x9Y" * 10 + "q", "telegram_bot_token"),
    ("ghp_" + "a1B2" * 7 + "x", "github_token"), ("ghp_" + "G" * 29, "github_token"),
    ("AIza" + "Sy9" * 11, "google_api_key"), ("npm_" + "k2Lm" * 8, "npm_token"),
])
def test_vendor_families_are_masked_across_their_real_length_ranges(token, kind):
    assert redact(f"leaked {token} in output") == f"leaked {placeholder(kind)} in output"


def test_a_bot_token_keeps_the_word_before_it_and_a_bare_name_in_a_dict_is_a_variable():
    assert redact("bot987654321:Zyxwv-UTSRQponml_KJIHgfedcba98765") == "bot[REDACTED:telegram_bot_token]"
    assert redact("Form(initial={'password': initial_password})") == "Form(initial={'password': initial_password})"
    assert redact('{"password": 12345678}') == '{"password": [REDACTED:secret_field]}'  # the brace stays


#: Pieces that make lines where some rule almost or just matches, for the prefilter equivalence property.
PLANTS = (
    [s["text"] for s in SAMPLES] + [secret for s in SAMPLES for secret in s["secrets"]] + BENIGN + [
        "\n", " ", "=", ":", "&", "?", "://", "@", '"', "'", "-u ", "--password ", "bearer ", "Authorization: ",
        "x-api-key: ", "TOKEN", "token", "key", "Key=", "secret", "pass", "sig=", "sk-", "sk_", "ghp_", "eyJ", "AIza",
        "SG.", "am_org_", "fw_", "bot", "1234567890", "\u0130", "\u212a", "to\u212aen=", "PASS\u0130WORD=",
        "-----BEGIN RSA PRIVATE KEY-----\n", "-----END RSA PRIVATE KEY-----", "[REDACTED:jwt]",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(PLANTS), st.text(max_size=40)), max_size=16))
def test_the_prefiltered_pass_gives_what_every_rule_over_the_whole_text_gives(parts):
    text = "".join(parts)
    assert redact(text) == redact_exhaustive(text)


def test_corpus_texts_give_the_same_result_prefiltered_or_exhaustive_alone_and_joined():
    texts = [s["text"] for s in SAMPLES] + BENIGN
    assert [redact(t) for t in texts] == [redact_exhaustive(t) for t in texts]
    joined = "\n".join(texts)
    assert redact(joined) == redact_exhaustive(joined)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.one_of(st.sampled_from(PLANTS), st.text(max_size=20)), max_size=6).map("".join),
                max_size=8))
def test_redacting_many_texts_at_once_gives_each_its_own_redaction(texts):
    assert redact_many(texts) == [redact(text) for text in texts]



@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(PLANTS), st.text(max_size=40)), max_size=24))
def test_the_single_marker_regex_and_the_anchored_ones_mark_the_same_lines(parts):
    """Long texts are scanned one anchored regex at a time, short ones with the single alternation."""
    shadow = _shadow("".join(parts))
    assert _marked_lines(shadow, (_MARKERS,)) == _marked_lines(shadow, _MARKERS_BY_ANCHOR)
