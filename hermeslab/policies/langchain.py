"""LangChain v1's ``SummarizationMiddleware``: past a share of the window, summarise all but the newest 20 messages.

Before each model call the middleware counts the agent's messages (the system
prompt is not among them); at or past the trigger it keeps the newest 20
messages, moved back to the assistant message whose tool calls a kept tool
result answers, and replaces everything before them with one user message
holding the summary. Fewer than 21 messages leave nothing to summarise. A
previous summary is an ordinary message: it is summarised again with the rest.

LangChain has no trigger by default (the middleware then never summarises);
the preset takes the ``("fraction", 0.8)`` its documentation shows, so
``compression.threshold`` is that fraction. A summary call that fails raises
out of the agent's step in LangChain; here the conversation is kept as it was.
"""

from __future__ import annotations

from typing import Any, Sequence

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged
from hermeslab.core.config import CompressionConfig

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset

VERSION = "1.5.0"
PRESET = f"langchain-{VERSION}"
STRATEGY = "langchain_summarization"
#: Messages kept verbatim after a summary: ``keep=("messages", 20)`` by default.
KEEP_MESSAGES = 20
#: The trigger the preset sets (LangChain sets none): the fraction its documentation's example uses.
TRIGGER_FRACTION = 0.8
#: Tokens of the summarised part the summary call sees: the newest, from a user message on.
SUMMARY_INPUT_TOKENS = 4_000
OPENING = "A summary of the conversation so far:"
#: What stands in for a summary when no user message lies in the part the call would see (no call is made).
TOO_LONG = "(The earlier conversation was too long to summarise.)"


def trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """``int(max_input_tokens * fraction)``, at least 1, in LangChain's float arithmetic (the window stands for the
    model profile's input limit); the messages reach it at ``>=``."""
    return max(1, int(window * cfg.threshold))


def _call_ids(message: Message) -> set[str]:
    return {str(call.get("id")) for call in message.get("tool_calls") or [] if call.get("id")}


def safe_cutoff(history: Sequence[Message], keep: int = KEEP_MESSAGES) -> int:
    """How many leading messages LangChain summarises: all but the newest ``keep``, moved back to the assistant
    message that asked for a kept tool result (or past the results when none did); 0 with ``keep`` or fewer."""
    if len(history) <= keep:
        return 0
    cutoff = len(history) - keep
    if history[cutoff].get("role") != "tool":
        return cutoff
    wanted, end = set(), cutoff
    while end < len(history) and history[end].get("role") == "tool":
        if history[end].get("tool_call_id"):
            wanted.add(str(history[end]["tool_call_id"]))
        end += 1
    for index in range(cutoff - 1, -1, -1):
        if history[index].get("role") == "assistant" and _call_ids(history[index]) & wanted:
            return index
    return end


def summary_input(span: Sequence[Message], estimate: Any, limit: int = SUMMARY_INPUT_TOKENS) -> list[Message]:
    """What LangChain's summary call sees of ``span``: its newest messages within ``limit`` tokens, from the oldest
    user message among them on (empty when there is none)."""
    taken, start = 0, len(span)
    while start > 0 and taken + estimate(span[start - 1]) <= limit:
        start -= 1
        taken += estimate(span[start])
    while start < len(span) and span[start].get("role") != "user":
        start += 1
    return list(span[start:])


def langchain_summarization(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One ``before_model`` pass of the middleware: summarise the older messages when the trigger is reached."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": STRATEGY}
    tokens = sum(zoo.estimate(m) for m in history)
    threshold = trigger(zoo.cfg, zoo.budgets.context_length, zoo.max_tokens)
    if tokens < threshold:
        return unchanged(messages, zoo, {**record, "outcome": "under_trigger", "tokens": tokens})
    cutoff = safe_cutoff(history)
    if cutoff <= 0:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    seen = summary_input(history[:cutoff], zoo.estimate)
    if not seen:
        return result(messages, system + [summary_of(TOO_LONG)] + history[cutoff:], condensed=cutoff, zoo=zoo,
                      record={**record, "outcome": "compressed_without_summary", "summarised": cutoff},
                      summary=TOO_LONG)
    summary = summarise(seen, zoo, kept=history[cutoff:])
    if not summary.body:
        return unchanged(messages, zoo, {**record, "outcome": "summary_failed"}, aborted=True, error=summary.error)
    out = system + [summary_of(summary.body)] + history[cutoff:]
    return result(messages, out, condensed=cutoff, zoo=zoo, record={**record, "outcome": "compressed",
                                                                      "summarised": cutoff, "summary_input": len(seen)},
                  summary=summary.body, fallback=summary.fallback_used)


def summary_of(body: str) -> Message:
    """The user message a summary becomes (hermeslab's wording in the place of LangChain's)."""
    return summary_message("user", f"{OPENING}\n\n{body}")


_SUMMARIZATION = "langchain/agents/middleware/summarization.py"

#: Where each number and rule was read, in langchain 1.5.0 as installed from the package index.
CITATIONS = (
    Citation("keep=('messages', 20) by default", "KEEP_MESSAGES", f"{_SUMMARIZATION}:113, 287"),
    Citation("no trigger by default: without one the middleware never summarises", "TRIGGER_FRACTION",
             f"{_SUMMARIZATION}:286, 700-701"),
    Citation("the documented example trigger: ('fraction', 0.8) of the model's max input tokens",
             "TRIGGER_FRACTION", f"{_SUMMARIZATION}:319-321"),
    Citation("fraction trigger: int(max_input_tokens * fraction), at least 1, reached at >=", "trigger",
             f"{_SUMMARIZATION}:720-735"),
    Citation("the count covers the agent's messages (the system prompt is not in state)", "langchain_summarization",
             f"{_SUMMARIZATION}:494-498"),
    Citation("keep n messages: nothing when there are n or fewer, else cut at len - n", "safe_cutoff",
             f"{_SUMMARIZATION}:862-875"),
    Citation("a cut on a tool result moves back to the AI message holding its call, else past the results",
             "safe_cutoff", f"{_SUMMARIZATION}:877-911"),
    Citation("a cutoff of 0 changes nothing", "langchain_summarization", f"{_SUMMARIZATION}:501-504"),
    Citation("everything is replaced by one human message with the summary, then the kept messages",
             "summary_of", f"{_SUMMARIZATION}:506-517, 835-842"),
    Citation("the summary call sees the newest 4,000 tokens of the summarised part, from a human message on",
             "summary_input", f"{_SUMMARIZATION}:114, 290, 1022-1038"),
    Citation("with nothing left after that trim, a fixed text stands in and no call is made", "TOO_LONG",
             f"{_SUMMARIZATION}:929-931"),
    Citation("a failed summary call raises once retries are spent", "langchain_summarization",
             f"{_SUMMARIZATION}:270-275, 913-946"),
)

POLICY = Policy(
    agent="LangChain (v1 agents, SummarizationMiddleware)",
    source=f"langchain {VERSION} (PyPI)",
    presets=(Preset(PRESET, {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY,
                             "compression.threshold": TRIGGER_FRACTION},
                    "at 80% of the window (the documented example; LangChain sets no trigger): replace all but "
                    "the newest 20 messages with one user summary"),),
    fidelity="parity",
    strategies={STRATEGY: langchain_summarization},
    triggers={STRATEGY: trigger},
    citations=CITATIONS,
)
