"""The sixth probe source: questions a model writes about what a compaction removed.

A writer model reads the removed region (as labelled text, clipped in the
middle to ``max_region_chars``) and returns short factual questions with
their answers. The reply is asked for as structured output (``response_format``
with a JSON schema, which llama-server, vLLM and OpenAI honour); an endpoint
that refuses the field is asked again without it, once, and from then on
plain JSON is asked for in the prompt alone. A reply that is not the JSON
asked for yields no probes and says why (``WrittenProbes.problem``); it is
never guessed at.

Every reply is kept in the lab under the writer's name and the region's text,
so a rerun writes nothing again. A model-written gold is the model's own
answer: it points at the removed message that holds it verbatim, where one
does, else at no message (``source_message`` -1), so the perfect reader's
guarantees hold for the five bank types, not for this one.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from hermeslab.context.extractive import strip_think
from hermeslab.core.provider import ChatRequest, ProviderError

from ..exam import ExamOutputError, clip_middle, parse_questions, render
from ..metrics import message_text
from .bank import Probe, probe_id
from .cache import Entry, ExamStore
from .calls import OnCall, reported_complete
from .context import EffectiveCompaction
from .readers import _TimedClient
from .text import normal_answer

_SYSTEM = (
    "You write exam questions about a piece of a conversation between a user, an assistant and its tools. "
    "Write {count} short factual questions whose answers are stated in the text: exact names, paths, ids, "
    "numbers, errors, decisions. Each answer must be a few words, copied from the text. Reply with only a JSON "
    'object, no prose: {{"questions": [{{"question": "...", "answer": "..."}}, ...]}}'
)
_SCHEMA = {
    "type": "object",
    "properties": {"questions": {"type": "array", "items": {
        "type": "object", "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
        "required": ["question", "answer"], "additionalProperties": False}}},
    "required": ["questions"], "additionalProperties": False,
}
#: How an endpoint says it does not take ``response_format`` (or the schema in it).
_REFUSED = re.compile(r"response_format|json_schema|grammar|structured|schema", re.IGNORECASE)


class QuestionWriter:
    """Writes questions at an OpenAI-compatible endpoint (see the module docstring)."""

    def __init__(self, base_url: str | None, model: str, api_key: str | None = None, *, per_compaction: int = 3,
                 max_tokens: int = 512, max_region_chars: int = 12_000, timeout: float = 120.0):
        for label, value in (("per_compaction", per_compaction), ("max_tokens", max_tokens),
                             ("max_region_chars", max_region_chars)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be a positive integer, got {value!r}")
        if not isinstance(model, str) or not model.strip():
            raise ValueError("QuestionWriter needs a model name")
        self.model, self.per_compaction, self.max_tokens = model, per_compaction, max_tokens
        self.max_region_chars = max_region_chars
        self.client = _TimedClient(base_url, api_key, model, timeout=timeout)
        self.structured = True
        digest = hashlib.sha256((_SYSTEM + json.dumps(_SCHEMA)).encode()).hexdigest()[:8]
        self.name = f"writer:{model}:{digest}:n{per_compaction}:max{max_tokens}:chars{max_region_chars}"
        #: Told the fields of every call, answered or failed (the exam logs them in its lab); None: not told.
        self.on_call: OnCall | None = None

    def write(self, region: str) -> str:
        """The writer's raw reply about ``region``; structured output where the endpoint takes it."""
        messages = [{"role": "system", "content": _SYSTEM.format(count=self.per_compaction)},
                    {"role": "user", "content": region}]
        if self.structured:
            extra = {"response_format": {"type": "json_schema",
                                         "json_schema": {"name": "questions", "schema": _SCHEMA}}}
            try:
                return self._ask(messages, extra)
            except ProviderError as exc:
                if exc.status not in (400, 422) or not _REFUSED.search(str(exc)):
                    raise
                self.structured = False
        return self._ask(messages, {})

    def _ask(self, messages: list[dict[str, Any]], extra: dict[str, Any]) -> str:
        request = ChatRequest(messages=messages, model=self.model, temperature=0.0, max_tokens=self.max_tokens,
                              extra=extra)
        reply = reported_complete(self.client.complete, request, self.on_call)
        return strip_think(reply.message.get("content") or "").strip()

    def close(self) -> None:
        self.client.close()


def read_questions(reply: str, limit: int) -> list[tuple[str, str]]:
    """(question, answer) pairs of a reply: ``{"questions": [...]}`` or a bare list; ExamOutputError otherwise."""
    text = reply.strip()
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        if not isinstance(parsed.get("questions"), list):
            raise ExamOutputError("the reply is a JSON object without a 'questions' list")
        text = json.dumps(parsed["questions"])
    return [(q.question, q.answer) for q in parse_questions(text, limit)]


@dataclass(frozen=True)
class WrittenProbes:
    probes: list[Probe]
    #: Why the reply gave no probes (None when it gave some or the region was empty).
    problem: str | None = None
    called: bool = False


def written_probes(recording_id: str, compaction: EffectiveCompaction, writer: QuestionWriter,
                   store: ExamStore) -> WrittenProbes:
    """The model-written probes of one compaction, the writer's reply read from or kept in ``store``."""
    removed = compaction.removed_messages()
    if not removed:
        return WrittenProbes([])
    region = clip_middle(render(removed), writer.max_region_chars)
    key = hashlib.sha256(json.dumps([writer.name, region], ensure_ascii=False).encode()).hexdigest()
    found = store.get(key)
    called = found is None
    if found is None:
        reply = writer.write(region)
        store.put(key, "questions", writer.name, None, Entry(reply), durable=True)
    else:
        reply = found.value
    try:
        pairs = read_questions(reply, writer.per_compaction)
    except ExamOutputError as exc:
        return WrittenProbes([], f"{recording_id}, compaction {compaction.index}: {exc}", called)
    probes = []
    for question, answer in pairs:
        source, span = _source(compaction, answer)
        probes.append(Probe(probe_id(recording_id, "model_written", question, answer), "model_written", question,
                            answer, source, span, recording_id, compaction.index))
    return WrittenProbes(probes, None, called)


def _source(compaction: EffectiveCompaction, answer: str) -> tuple[int, tuple[int, int]]:
    """The removed message holding ``answer`` verbatim (case aside) and where, else (-1, (-1, -1))."""
    key = answer.strip()
    if not normal_answer(key):
        return -1, (-1, -1)
    for index in compaction.removed:
        text = message_text(compaction.before[index])
        at = text.casefold().find(key.casefold()) if len(text.casefold()) == len(text) else text.find(key)
        if at >= 0:
            return index, (at, at + len(key))
    return -1, (-1, -1)
