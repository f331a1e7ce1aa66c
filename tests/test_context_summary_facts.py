"""What a summariser is shown besides the pruned span (``summary_fact_context``), and how facts are counted."""

from __future__ import annotations

import json

from test_context_conversations import FixedSummariser, agent_session

from hermeslab.context.budget import derive_budgets
from hermeslab.context.pipeline import CompressionState, compress
from hermeslab.core.config import Config
from hermeslab.policies.loading import apply_preset
from hermeslab.eval.metrics import facts_in, message_text, word_set


def compressed(preset: str):
    cfg = apply_preset(Config(), preset).compression
    summariser = FixedSummariser()
    messages = agent_session(turns=14, output_words=700)
    result = compress(messages, cfg=cfg, budgets=derive_budgets(cfg, 16_000), state=CompressionState(),
                      summariser=summariser)
    return messages, result, summariser.requests[0]


def test_seed_hands_over_the_span_as_shown_and_the_messages_that_stay():
    messages, result, request = compressed("seed")
    assert result.record["prune"]["decisions"], "the session must be long enough for pruning to cut old results"
    assert len(request.originals) == len(request.span)
    assert request.originals != request.span  # some results in the span were cut to one line
    by_id = {id(m) for m in messages}
    assert all(id(m) in by_id for m in request.originals)  # the conversation's own messages, uncut
    assert request.kept and all(m in result.messages for m in request.kept)
    assert not any(m in request.kept for m in request.span)


def test_hermes_hands_over_the_pruned_span_alone():
    _, _, request = compressed("hermes-0.19")
    assert request.originals is None and request.kept is None


def test_a_line_break_inside_tool_arguments_separates_words():
    arguments = json.dumps({"command": "cat <<'EOF' > fix.py\nimport os\nEOF\npython fix.py",
                            "note": "say \"done\" in C:\\\\tmp"})
    reply = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "bash", "arguments": arguments}}]}
    words = word_set(message_text(reply))
    assert {"EOF", "fix.py", "os"} <= words
    assert not any(word.startswith("nEOF") or word.startswith("nimport") for word in words)
    assert "fix.py" in facts_in(message_text(reply))
    plain = {"role": "user", "content": "keep C:\\new\\file as it is"}
    assert message_text(plain) == plain["content"]  # message text is never unescaped
