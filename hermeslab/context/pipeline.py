"""The compression pipeline: prune → boundary → summary → assembly, with a record of every decision.

``plan_compression`` runs the two model-free phases and is pure, so a plan can
be computed, compared and logged without a summariser. ``compress`` adds the
summary and the assembly, and guarantees:

* the middle is never dropped silently — with no summary text the original
  messages come back with ``aborted=True`` (``abort_keeps_original``;
  Hermes returns its pruned copy, which the ``hermes-0.19`` preset reproduces);
* the latest real user message is present verbatim afterwards (re-inserted
  after the summary if a boundary rule summarised it);
* the task that opened the conversation survives every compaction
  (``keep_original_task``): verbatim in the kept messages, or quoted in the
  summary — it is handed to the summariser as part of the focus and, if the
  summary still lacks it, prepended as an ``Original task:`` line;
* a result that is not smaller than its input is refused; the pruned copy (or
  the input) is returned instead, so no preset ever grows the context.

With ``compression.anchors`` on, the summary also ends with the pinned anchor
list (``anchors.py``): the facts of every span condensed so far, re-rendered
from ``CompressionState.anchors`` at each compression rather than handed to the
summariser, so a summariser that drops them cannot lose them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from hermeslab.core.config import CompressionConfig
from hermeslab.core.messages import text_of, validate_messages
from hermeslab.core.tokens import count_text, rough_tokens

from .anchors import anchor_budget, collect_anchors, parse_anchor_block, render_anchor_block, split_anchor_block
from .assemble import assemble, split_summary
from .boundary import MIN_MESSAGES_BEYOND_HEAD, Boundary, choose_boundary, protected_head_size
from .budget import Budgets, summary_budget
from .estimate import list_estimator, message_estimator
from .prune import PruneDecision, compute_prune_boundary, prune_messages
from .turns import first_real_user_index, last_real_user_index
from .types import SummaryOutcome, SummaryRequest, Summariser, is_summary_message

#: Longest original-task quote carried in a summary.
ORIGINAL_TASK_MAX_CHARS = 4_000
ORIGINAL_TASK_LABEL = "Original task:"


@dataclass
class CompressionState:
    """What one logical conversation remembers between compressions.

    It outlives a session: rotation to a child session keeps the same state,
    so the anti-thrash verdict cannot be reset by the rotation itself.
    """

    compression_count: int = 0
    #: Body of the last summary, the starting point of the next (iterative) one.
    previous_summary: str | None = None
    #: Consecutive ineffective compressions.
    ineffective_streak: int = 0
    #: Automatic compression is off until a manual reset.
    auto_disabled: bool = False
    #: The pinned anchor list, least recent first (only with ``compression.anchors``).
    anchors: list[str] = field(default_factory=list)
    #: The first real user message of the conversation.
    original_task: str | None = None
    #: A compression finished and its verdict waits for the next real prompt reading.
    awaiting_usage: bool = False
    #: Monotonic time before which automatic compression stays off (after an abort).
    cooldown_until: float | None = None


@dataclass
class CompressionPlan:
    prune_boundary: int
    pruned: list[dict]
    decisions: list[PruneDecision]
    boundary: Boundary
    previous_summary: str | None
    #: The messages to summarise.
    span: list[dict]
    #: Index of the handoff summary folded into this one, if any.
    summary_index: int | None = None
    record: dict = field(default_factory=dict)


@dataclass
class CompressionResult:
    messages: list[dict]
    plan: CompressionPlan
    #: The summary body as inserted (without prefix and end marker, with the anchor block if any);
    #: None when no summary was inserted.
    summary_text: str | None
    fallback_used: bool
    summary_error: str | None
    tokens_before: int
    tokens_after: int
    effective: bool
    aborted: bool
    #: JSON-able decision record for the log.
    record: dict
    #: Input messages replaced by the summary.
    condensed: int = 0


def _newest_summary(messages: Sequence[dict], lower: int, upper: int) -> int | None:
    for index in range(min(upper, len(messages)) - 1, lower - 1, -1):
        if is_summary_message(messages[index]):
            return index
    return None


def _first_index(messages: Sequence[dict]) -> int:
    return 1 if messages and messages[0].get("role") == "system" else 0


def _span_of(messages: Sequence[dict], boundary: Boundary, summary_at: int | None) -> list[dict]:
    """The messages a summary replaces: the boundary's middle, minus an older summary folded into it."""
    if summary_at is None:
        return list(messages[boundary.start:boundary.end])
    span = list(messages[max(boundary.start, summary_at + 1):boundary.end])
    rest = split_summary(messages[summary_at])[1]
    if rest is not None and summary_at >= boundary.start:
        # A summary merged into a message: that message's own content is still history.
        own = {k: v for k, v in messages[summary_at].items() if k != "_compressed_summary"}
        span = [{**own, "content": rest}] + span
    return span


def plan_compression(messages: list[dict], *, cfg: CompressionConfig, budgets: Budgets,
                     state: CompressionState) -> CompressionPlan:
    """Phases 1 and 2 on a valid conversation; pure (neither input nor state is modified).

    Raises MessageValidationError for malformed input, e.g. a tool result that
    answers no earlier call: repair such lists with ``repair_messages`` first.
    """
    validate_messages(messages)
    estimate = message_estimator(cfg)
    found = _newest_summary(messages, _first_index(messages), len(messages)) if cfg.summary_aware_head else None
    # A carried-over summary means a compaction already happened in this conversation.
    count = state.compression_count or (1 if state.previous_summary else 0)
    head = protected_head_size(messages, cfg, iterative=count >= 1 or found is not None)
    record: dict = {"preset": cfg.preset, "estimator": cfg.estimator, "budgets": budgets.as_record(),
                    "summary_found_before_head": found}

    if len(messages) <= head + MIN_MESSAGES_BEYOND_HEAD:
        boundary = Boundary(head, head, head, ("too_small",))
        record.update(prune={"boundary": 0, "decisions": []}, boundary=boundary.as_record())
        return CompressionPlan(0, [dict(m) for m in messages], [], boundary, None, [], None, record)

    prune_at = compute_prune_boundary(messages, tail_token_budget=budgets.tail_token_budget,
                                      protect_last_n=cfg.protect_last_n, estimate=estimate)
    pruned, decisions = prune_messages(messages, prune_boundary=prune_at, cfg=cfg,
                                       head_end=0 if cfg.prune_head else head)
    boundary = choose_boundary(pruned, budgets=budgets, cfg=cfg, compression_count=count,
                               previous_summary_index=found, estimate=estimate)
    record.update(prune={"boundary": prune_at, "protected_head": 0 if cfg.prune_head else head,
                         "decisions": [d.as_record() for d in decisions]},
                  boundary=boundary.as_record())
    if boundary.empty:
        return CompressionPlan(prune_at, pruned, decisions, boundary, None, [], None, record)

    summary_at = _newest_summary(pruned, _first_index(pruned), boundary.end)
    previous = None
    if summary_at is not None:
        body = split_summary(pruned[summary_at])[0]
        if cfg.anchors:  # the block is re-rendered by the pipeline, not re-summarised
            body = split_anchor_block(body)[0]
        previous = state.previous_summary or body
    span = _span_of(pruned, boundary, summary_at)
    record.update(previous_summary_index=summary_at, span_messages=len(span))
    return CompressionPlan(prune_at, pruned, decisions, boundary, previous, span, summary_at, record)


def _task_quote(task: str) -> str:
    """The task as quoted in a summary; a long task keeps its opening (the part checked for)."""
    return task if len(task) <= ORIGINAL_TASK_MAX_CHARS else task[:ORIGINAL_TASK_MAX_CHARS] + " [...]"


def _contains_text(messages: Sequence[dict], needle: str) -> bool:
    return any(not is_summary_message(m) and needle in text_of(m) for m in messages)


def _user_content_present(messages: Sequence[dict], target: dict) -> bool:
    """True when some user message carries ``target``'s content unchanged (merged summaries included)."""
    for message in messages:
        if message.get("role") != "user":
            continue
        content = split_summary(message)[1] if is_summary_message(message) else message.get("content")
        if content == target.get("content"):
            return True
    return False


def _reinsert_latest_user(messages: list[dict], latest: dict) -> list[dict]:
    at = next((i for i in range(len(messages) - 1, -1, -1) if is_summary_message(messages[i])), None)
    position = len(messages) if at is None else at + 1
    while position < len(messages) and messages[position].get("role") == "tool":
        position += 1
    copy = {k: v for k, v in latest.items() if k != "_compressed_summary"}
    return messages[:position] + [copy] + messages[position:]


def _result(messages: list[dict], plan: CompressionPlan, *, cfg: CompressionConfig, outcome: str,
            before: int, after: int, record: dict, summary: SummaryOutcome | None = None,
            body: str | None = None, condensed: int = 0) -> CompressionResult:
    saved = before - after
    effective = condensed > 0 and saved > 0 and saved >= cfg.min_saving * before
    record.update(outcome=outcome, tokens_before=before, tokens_after=after, messages_after=len(messages),
                  condensed=condensed, effective=effective)
    return CompressionResult(
        messages=messages, plan=plan, summary_text=body,
        fallback_used=bool(summary and summary.fallback_used), summary_error=summary.error if summary else None,
        tokens_before=before, tokens_after=after, effective=effective, aborted=outcome == "aborted",
        record=record, condensed=condensed,
    )


def _pinned_anchors(messages: list[dict], plan: CompressionPlan, *, cfg: CompressionConfig, budgets: Budgets,
                    state: CompressionState) -> tuple[list[str], dict]:
    """The anchor list after this compression, and its record.

    Facts are read from the messages as the conversation showed them, not from
    the pruned copies, so a result that pruning cut to one line still gives its
    ids. Earlier anchors come from the state; a conversation resumed from a log
    has none there, and they are read back from the summary being folded in.
    """
    previous, source = list(state.anchors), "state"
    if not previous and plan.summary_index is not None:
        previous, source = parse_anchor_block(split_summary(messages[plan.summary_index])[0]), "summary"
    budget = anchor_budget(max(cfg.summary_min_tokens, budgets.max_summary_tokens))
    anchors = collect_anchors(_span_of(messages, plan.boundary, plan.summary_index), previous, budget_tokens=budget,
                              count=rough_tokens if cfg.estimator == "rough" else count_text)
    kept = set(anchors)
    record = {"budget_tokens": budget, "previous": len(previous), "previous_from": source if previous else None,
              "kept": len(anchors), "added": len(kept.difference(previous)),
              "evicted": sum(1 for anchor in previous if anchor not in kept)}
    return anchors, record


def compress(messages: list[dict], *, cfg: CompressionConfig, budgets: Budgets, state: CompressionState,
             summariser: Summariser, focus: str | None = None,
             estimate_tokens: Callable[[Sequence[dict]], int] | None = None,
             memory_context: str | None = None) -> CompressionResult:
    """Compress ``messages`` once; updates ``state`` only when a summary was inserted."""
    estimate_tokens = estimate_tokens or list_estimator(cfg)
    plan = plan_compression(messages, cfg=cfg, budgets=budgets, state=state)
    record = dict(plan.record, messages_before=len(messages))
    before = estimate_tokens(messages)
    if plan.boundary.empty:
        return _result(plan.pruned, plan, cfg=cfg, outcome="nothing_to_summarise", before=before,
                       after=estimate_tokens(plan.pruned), record=record)

    head = plan.pruned[:plan.boundary.start]
    tail = plan.pruned[plan.boundary.end:]
    task = state.original_task
    if task is None and (first := first_real_user_index(messages)) is not None:
        task = text_of(messages[first])
    task_record: dict = {}
    request_focus = focus
    if cfg.keep_original_task and task:
        task_record["kept_verbatim"] = _contains_text(head + tail, task[:ORIGINAL_TASK_MAX_CHARS])
        if not task_record["kept_verbatim"]:
            line = f"{ORIGINAL_TASK_LABEL} {_task_quote(task)}"
            request_focus = f"{focus}\n\n{line}" if focus else line

    span_tokens = sum(map(message_estimator(cfg), plan.span))
    request = SummaryRequest(span=plan.span, previous_summary=plan.previous_summary, focus=request_focus,
                             budget_tokens=summary_budget(cfg, budgets, span_tokens), memory_context=memory_context)
    try:
        outcome = summariser.summarise(request)
    except Exception as exc:  # a summariser fault must not lose the conversation
        outcome = SummaryOutcome(body="", error=f"{type(exc).__name__}: {exc}")
    record["summary"] = {"budget_tokens": request.budget_tokens, "span_tokens": span_tokens,
                         "fallback_used": outcome.fallback_used, "error": outcome.error,
                         "usage_prompt_tokens": outcome.usage_prompt_tokens,
                         "usage_completion_tokens": outcome.usage_completion_tokens}
    body = (outcome.body or "").strip()
    if not body:
        kept = list(messages) if cfg.abort_keeps_original else plan.pruned
        return _result(kept, plan, cfg=cfg, outcome="aborted", before=before, after=estimate_tokens(kept),
                       record=record, summary=outcome)

    if cfg.keep_original_task and task and not task_record["kept_verbatim"]:
        task_record["quoted_by_summariser"] = task[:ORIGINAL_TASK_MAX_CHARS] in body
        if not task_record["quoted_by_summariser"]:
            body = f"{ORIGINAL_TASK_LABEL} {_task_quote(task)}\n\n{body}"
    record["original_task"] = task_record

    inserted = body
    if cfg.anchors:
        anchors, record["anchors"] = _pinned_anchors(messages, plan, cfg=cfg, budgets=budgets, state=state)
        if anchors:
            inserted = f"{body}\n\n{render_anchor_block(anchors)}"

    assembled, record["assembly"] = assemble(head, inserted, tail, cfg=cfg)
    latest_index = last_real_user_index(messages)
    reinserted = False
    if latest_index is not None and not _user_content_present(assembled, messages[latest_index]):
        assembled = _reinsert_latest_user(assembled, messages[latest_index])
        reinserted = True
    record["latest_user"] = {"index": latest_index, "reinserted": reinserted}

    after = estimate_tokens(assembled)
    if after >= before:
        pruned_tokens = estimate_tokens(plan.pruned)
        kept = plan.pruned if pruned_tokens < before else list(messages)
        return _result(kept, plan, cfg=cfg, outcome="no_gain", before=before,
                       after=min(pruned_tokens, before), record=record, summary=outcome)

    state.compression_count += 1
    state.previous_summary = body
    if cfg.anchors:
        state.anchors = anchors
    if cfg.keep_original_task and task:
        state.original_task = task
    return _result(assembled, plan, cfg=cfg, outcome="compressed", before=before, after=after, record=record,
                   summary=outcome, body=inserted, condensed=len(plan.span))
