"""Redaction over the shared recordings: real code and tool output, where no mask may hide an ordinary name.

The recordings hold no real credentials, but their code does hold literal
ones (``SECRET_KEY='secret'``, ``http://user:pass@host``): masking those is
the point. A false positive is a mask over something that is not a value at
all: a number, or a bare name the same text uses as code (``password =
self``, ``{'password': initial_password}``). The test counts every mask by
kind, reports the counts, and fails on any false positive; without the
recordings it skips, and fails under ``CI=true``.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from shared_data import dataset

from hermeslab.context.redact import redact

pytestmark = pytest.mark.slow

RECORDINGS = ("mini_swe_agent_gemini3pro_swebv.jsonl", "tau2_bench_gpt41.jsonl", "tau_bench_airline_gpt4o.jsonl")
_MASK = re.compile(r"(\[REDACTED:\w+\])")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_OBJECT_NAMES = frozenset({"self", "cls", "this", "None", "True", "False", "null", "undefined"})


def masked_spans(original: str, redacted: str) -> list[tuple[str, str, int]]:
    """(kind, masked text, offset) of each mask, found by walking the unmasked pieces through the original."""
    parts = _MASK.split(redacted)
    spans, position = [], len(parts[0])
    for index in range(1, len(parts), 2):
        after = parts[index + 1]
        end = original.find(after, position) if after else len(original) if index + 2 == len(parts) else position
        spans.append((parts[index][len("[REDACTED:"):-1], original[position:end], position))
        position = end + len(after)
    return spans


def ordinary(text: str, span: str, offset: int) -> bool:
    """A number, or a name the text uses as code (called, indexed, assigned, defined); a quoted string is a
    value whatever it says."""
    if offset and text[offset - 1] in "\"'":
        return False
    core = span.rstrip(")]},")  # a mask that swallowed the brackets closing the code around it
    if core.isdigit():
        return len(core) < 8
    if not _NAME.fullmatch(core):
        return False
    name = re.escape(core)
    used = re.search(rf"(?<![\w.]){name}\s*(?:[.(\[]|=(?!=))|\b(?:def|class|import|as)\s+{name}\b", text)
    return core in _OBJECT_NAMES or used is not None


def texts_of(path) -> list[str]:
    texts = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            for message in json.loads(line)["messages"]:
                texts.append(message.get("content") or "")
                texts += [call["function"]["arguments"] for call in message.get("tool_calls") or []]
    return texts


def test_no_ordinary_name_or_number_is_masked_in_the_shared_recordings(record_property):
    masks: Counter[str] = Counter()
    false_positives = []
    for name in RECORDINGS:
        for text in texts_of(dataset(name)):
            redacted = redact(text)
            if redacted == text:
                continue
            for kind, span, offset in masked_spans(text, redacted):
                masks[kind] += 1
                if ordinary(text, span, offset):
                    false_positives.append((name, kind, span, text[max(0, offset - 60):offset + 20]))
    record_property("masks", dict(masks))
    record_property("false_positives", len(false_positives))
    print(f"masks in the shared recordings: {dict(masks)}; false positives: {len(false_positives)}")
    assert false_positives == []
    assert sum(masks.values()) > 0  # the literal credentials of the recorded code are found


def test_masked_spans_are_read_back_from_the_redacted_text():
    original = "a=1 password: hunter2x and key sk-proj-" + "Q7w8E9r0T1y2U3i4O5p6" + " end"
    spans = masked_spans(original, redact(original))
    assert [(kind, span) for kind, span, _ in spans] == [("openai_key", "sk-proj-Q7w8E9r0T1y2U3i4O5p6")]
    code = "x = self.y\npassword = self"
    assert ordinary(code, "self", code.rindex("self")) and not ordinary("p = 'self'", "self", 5)
