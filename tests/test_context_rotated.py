"""Compressing a session that already holds a summary: no message leaves the context untraced.

A rotated child session starts from an earlier compression's output, so its
handoff summary can sit anywhere: right after the system prompt, inside what
the next boundary protects, or merged ahead of a request. Whatever the head
and tail settings, every message that a compression removes is either in the
span handed to the summariser (the folded summary counts, its body is the
previous summary) or named in the record as dropped.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.assemble import merge_summary, summary_text
from hermeslab.context.budget import derive_budgets
from hermeslab.context.pipeline import CompressionState, compress
from hermeslab.core.config import Config
from hermeslab.core.messages import validate_messages
from hermeslab.policies.loading import apply_preset

from test_context_conversations import FixedSummariser, conversations, text

PROBE = "_probe"


def _cfg(preset: str, first: int, last: int):
    cfg = apply_preset(Config(), preset).compression
    return dataclasses.replace(cfg, protect_first_n=first, protect_last_n=last)


def _starts(messages: list[dict]) -> list[int]:
    """Positions where a message may be inserted without splitting a call from its results."""
    first = 1 if messages and messages[0]["role"] == "system" else 0
    return [i for i in range(first, len(messages) + 1) if i == len(messages) or messages[i]["role"] != "tool"]


@st.composite
def rotated_sessions(draw) -> tuple[list[dict], int]:
    """A conversation with an earlier handoff summary at a drawn position: plain (either role) or merged."""
    messages = draw(conversations())
    at = draw(st.sampled_from(_starts(messages)))
    body = f"## Active Task\nEarlier work.\n\n## Completed Actions\n1. {text(draw(st.integers(5, 400)))}"
    framed = summary_text(body, long_frame=draw(st.booleans()))
    style = draw(st.sampled_from(["user", "assistant", "merged"]))
    if style == "merged" and at < len(messages) and messages[at]["role"] == "user":
        messages = messages[:at] + [merge_summary(messages[at], framed)] + messages[at + 1:]
    else:
        role = "assistant" if style == "assistant" else "user"
        messages = messages[:at] + [{"role": role, "content": framed, "_compressed_summary": True}] + messages[at:]
    validate_messages(messages)
    return [dict(m, **{PROBE: i}) for i, m in enumerate(messages)], at


def _accounted(result) -> set[int]:
    """Indices the compression summarised (the span, the folded summary) or says it dropped."""
    plan = result.plan
    kept = {m[PROBE] for m in plan.span if PROBE in m}
    if plan.summary_index is not None:
        kept.add(plan.pruned[plan.summary_index][PROBE])
    return kept | set(result.record.get("dropped_indices", ()))


@pytest.mark.parametrize("preset", ["seed", "hermes-0.19"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(session=rotated_sessions(), first=st.integers(0, 5), last=st.integers(1, 20),
       window=st.sampled_from([1_024, 4_000, 8_000, 16_000]), carried=st.booleans())
def test_every_message_that_leaves_is_summarised_or_counted_as_dropped(preset, session, first, last, window,
                                                                        carried):
    messages, _ = session
    cfg = _cfg(preset, first, last)
    state = CompressionState(compression_count=1, previous_summary="Earlier work.") if carried else CompressionState()
    summariser = FixedSummariser()
    result = compress(messages, cfg=cfg, budgets=derive_budgets(cfg, window), state=state, summariser=summariser)
    present = {m[PROBE] for m in result.messages if PROBE in m}
    gone = set(range(len(messages))) - present
    assert gone <= _accounted(result), (
        f"messages {sorted(gone - _accounted(result))} left the context unsummarised "
        f"(boundary {result.plan.boundary}, summary at {result.plan.summary_index}, outcome "
        f"{result.record.get('outcome')})")
    if preset == "seed" and result.record["outcome"] != "dropped_oldest":
        assert not result.record.get("dropped_indices"), "a summary under seed covers everything that leaves"
    if preset == "seed" and not result.plan.span:  # a range holding only the old summary: nothing new to summarise
        assert result.record["outcome"] == "nothing_to_summarise" and not summariser.requests
