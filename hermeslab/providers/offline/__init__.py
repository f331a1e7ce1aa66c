"""hermeslab's embedded offline model: a deterministic, rule-based Provider.

It is not a language model. It recognises a fixed set of English requests in
the latest user message (read, list, write, search, run, todo, remember),
turns them into tool calls shaped by the tool schemas it is offered, answers
from the tool results, fills summary templates, and otherwise says plainly
what it is. That is enough to drive the whole of hermeslab (loop, tools,
compression, logging, widgets) with no network and no weights, and since it
uses no randomness and no clock, the same request always gets the same bytes.
"""

from __future__ import annotations

from .answers import answer_from_results, describe_result
from .conversation import compose_reply, pending_request, trailing_tool_results
from .intents import Intent, parse_intents
from .model import (
    MODEL_NAME,
    OfflineModel,
    completion_tokens,
    truncate_to_tokens,
    word_pieces,
)
from .offered import Draft, OfferedTools, bind_arguments, plan_tool_calls
from .replies import MAX_COUNT, identity_text
from .summaries import fill_summary_template

__all__ = [
    "MAX_COUNT", "MODEL_NAME", "Draft", "Intent", "OfferedTools", "OfflineModel", "answer_from_results",
    "bind_arguments", "completion_tokens", "compose_reply", "describe_result", "fill_summary_template",
    "identity_text", "parse_intents", "pending_request", "plan_tool_calls", "trailing_tool_results",
    "truncate_to_tokens", "word_pieces",
]
