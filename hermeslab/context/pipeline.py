"""The compression pipeline: prune → boundary → summary → assembly, with a record of every decision.

``plan_compression`` runs the two model-free phases and is pure, so a plan can
be computed, compared and logged without a summariser. ``compress`` adds the
summary and the assembly, and guarantees:

* the middle is never dropped silently — with no summary text the original
  messages come back with ``aborted=True`` (``abort_keeps_original``;
  Hermes returns its pruned copy, which the ``hermes-0.19`` preset reproduces);
* the latest real user message is present verbatim afterwards (re-inserted
  after the summary if a boundary rule summarised it); when the newest user
  message is a summary merged ahead of a request, that request is the one kept.
  Under ``keep_latest_user`` a request re-inserted right after a user-role
  summary is merged into it, behind its end marker, so compression never puts
  two user messages side by side; the request is read back from there;
* the task that opened the conversation survives every compaction
  (``keep_original_task``): verbatim in the kept messages, or quoted in the
  summary — it is handed to the summariser as part of the focus and, if the
  summary still lacks it, prepended as an ``Original task:`` line;
* a result that is not smaller than its input is refused; the pruned copy (or
  the input) is returned instead, so no preset ever grows the context;
* every message that leaves the context is in the span handed to the
  summariser (an earlier summary folded in counts) or, when no summary can fit
  (``drop_when_summary_cannot_fit``: no room for one, a summary larger than
  what it replaces, or none to be had at the size the window allows), named
  in the record's ``dropped_indices`` under the outcome ``dropped_oldest``.
  Under ``hermes-0.19`` (``summarise_whole_span`` off) the messages between the
  head and a folded summary leave untraced, as in Hermes; they are named there too.

The lean-era Hermes switches act here too: ``demote_stale_tail_tools`` cuts
old tool output in the verbatim tail to a stub, ``summary_input_sampling``
asks for an evenly sampled summariser input, ``lean_summary_sections`` ends
every summary with the anchor index, the user's own words and a pointer back
(``lean_summary``), and ``fallback_summary_rule`` decides by the failure's
kind whether a fallback summary is used or the compaction aborts
(``failure_ladder``).

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
from hermeslab.core.tokens import (
    RememberedSizes,
    count_text,
    list_estimator,
    message_estimator,
    rough_tokens,
    summed_list_estimator,
)

from .anchors import anchor_budget, collect_anchors, parse_anchor_block, render_anchor_block, split_anchor_block
from .assemble import assemble, merge_summary, split_summary, user_content_present
from .boundary import MIN_MESSAGES_BEYOND_HEAD, Boundary, choose_boundary, protected_head_size
from .budget import SUMMARY_FLOOR_TOKENS, Budgets, summary_budget, wanted_summary_budget, window_room
from .drop import drop_range
from .failure_ladder import ABORT, decide, failure_kind
from .hermes_texts import texts_for
from .lean_summary import augment_summary
from .lean_tail import demote_stale_tail_tools
from .prune import PruneDecision, compute_prune_boundary, prune_messages
from .summary import ground_task_snapshot
from .turns import first_real_user_index, is_real_user_message
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
    #: Consecutive compactions that ended without a summary (``failure_cooldown_ladder``) ...
    failure_streak: int = 0
    #: ... and how many of them in a row failed by stalling (``fallback_summary_rule``).
    stall_streak: int = 0
    #: The user asked for the next compression (/compress): a summary that saves little is still applied.
    user_asked: bool = False


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


def _first_index(messages: Sequence[dict]) -> int:
    return 1 if messages and messages[0].get("role") == "system" else 0


def _summary_indices(messages: Sequence[dict]) -> list[int]:
    """Where the handoff summaries are (the system prompt aside), oldest first."""
    return [index for index in range(_first_index(messages), len(messages)) if is_summary_message(messages[index])]


def _newest_pruned_summary(pruned: Sequence[dict], summaries: Sequence[int], decisions: Sequence[PruneDecision],
                           upper: int) -> int | None:
    """The newest handoff summary before ``upper`` in the pruned copy of a list whose summaries are ``summaries``.

    Only a message pruning rewrote can have changed its verdict, so only those
    and the input's summaries are looked at again.
    """
    candidates = set(summaries).union(decision.index for decision in decisions)
    lower = _first_index(pruned)
    return max((index for index in candidates if lower <= index < upper and is_summary_message(pruned[index])),
               default=None)


def _own_part(summary: dict) -> dict | None:
    """The message a summary was merged ahead of, as it was before the merge; None for a plain summary."""
    rest = split_summary(summary)[1]
    if rest is None:
        return None
    own = {key: value for key, value in summary.items() if key != "_compressed_summary"}
    own["content"] = rest
    return own


def _span_of(messages: Sequence[dict], boundary: Boundary, summary_at: int | None, *, whole: bool) -> list[dict]:
    """The messages a summary replaces: the boundary's middle, minus an older summary folded into it.

    ``whole`` keeps the messages between the range's start and that summary in
    the span; without it only what follows the summary is summarised (Hermes).
    """
    if summary_at is None:
        return list(messages[boundary.start:boundary.end])
    before = list(messages[boundary.start:summary_at]) if whole else []
    span = list(messages[max(boundary.start, summary_at + 1):boundary.end])
    own = _own_part(messages[summary_at])
    if own is not None and summary_at >= boundary.start:
        span = [own] + span  # that message's own content is still history
    return before + span


def _latest_user_request(messages: Sequence[dict], *, inside_summaries: bool) -> tuple[int, dict, bool] | None:
    """(index, message, merged) of the newest real user request.

    A summary merged ahead of a user message hides that message from
    ``last_real_user_index``; with ``inside_summaries`` its own part is the
    request, not an older one (Hermes looks past it).
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        if not is_summary_message(message):
            if is_real_user_message(message):
                return index, message, False
        elif inside_summaries:
            own = _own_part(message)
            if own is not None and is_real_user_message(own):
                return index, own, True
    return None


def plan_compression(messages: list[dict], *, cfg: CompressionConfig, budgets: Budgets,
                     state: CompressionState) -> CompressionPlan:
    """Phases 1 and 2 on a valid conversation; pure (neither input nor state is modified).

    Raises MessageValidationError for malformed input, e.g. a tool result that
    answers no earlier call: repair such lists with ``repair_messages`` first.
    """
    validate_messages(messages)
    return _plan(messages, cfg=cfg, budgets=budgets, state=state, sizes=RememberedSizes(message_estimator(cfg)))


def _plan(messages: list[dict], *, cfg: CompressionConfig, budgets: Budgets, state: CompressionState,
          sizes: RememberedSizes) -> CompressionPlan:
    """``plan_compression`` on validated ``messages``, measuring with ``sizes``, which the caller goes on
    using for the summary span."""
    summaries = _summary_indices(messages)
    found = summaries[-1] if summaries and cfg.summary_aware_head else None
    # A carried-over summary means a compaction already happened in this conversation.
    count = state.compression_count or (1 if state.previous_summary else 0)
    head = protected_head_size(messages, cfg, iterative=count >= 1 or found is not None)
    record: dict = {"preset": cfg.preset, "estimator": cfg.estimator, "budgets": budgets.as_record(),
                    "summary_found_before_head": found}

    if len(messages) <= head + MIN_MESSAGES_BEYOND_HEAD:
        boundary = Boundary(head, head, head, ("too_small",))
        record.update(prune={"boundary": 0, "decisions": []}, boundary=boundary.as_record())
        return CompressionPlan(0, list(messages), [], boundary, None, [], None, record)

    prune_at = compute_prune_boundary(messages, tail_token_budget=budgets.tail_token_budget,
                                      protect_last_n=cfg.protect_last_n, estimate=sizes)
    pruned, decisions = prune_messages(messages, prune_boundary=prune_at, cfg=cfg,
                                       head_end=0 if cfg.prune_head else head)
    boundary = choose_boundary(pruned, budgets=budgets, cfg=cfg, compression_count=count,
                               previous_summary_index=found, estimate=sizes)
    record.update(prune={"boundary": prune_at, "protected_head": 0 if cfg.prune_head else head,
                         "decisions": [d.as_record() for d in decisions]},
                  boundary=boundary.as_record())
    if boundary.empty:
        return CompressionPlan(prune_at, pruned, decisions, boundary, None, [], None, record)

    summary_at = _newest_pruned_summary(pruned, summaries, decisions, boundary.end)
    previous = None
    if summary_at is not None:
        body = split_summary(pruned[summary_at])[0]
        if cfg.anchors:  # the block is re-rendered by the pipeline, not re-summarised
            body = split_anchor_block(body)[0]
        previous = state.previous_summary or body
    span = _span_of(pruned, boundary, summary_at, whole=cfg.summarise_whole_span)
    record.update(previous_summary_index=summary_at, span_messages=len(span))
    return CompressionPlan(prune_at, pruned, decisions, boundary, previous, span, summary_at, record)


def _task_quote(task: str) -> str:
    """The task as quoted in a summary; a long task keeps its opening (the part checked for)."""
    return task if len(task) <= ORIGINAL_TASK_MAX_CHARS else task[:ORIGINAL_TASK_MAX_CHARS] + " [...]"


def _contains_text(messages: Sequence[dict], needle: str) -> bool:
    return any(not is_summary_message(m) and needle in text_of(m) for m in messages)


def _reinsert_latest_user(messages: list[dict], latest: dict, *, merge: bool) -> tuple[list[dict], bool]:
    """``messages`` with ``latest`` back after the newest summary (past the results that follow it).

    With ``merge``, a request that would land right after a plain user-role
    summary goes into that summary behind its end marker (the form ``assemble``
    gives a summary merged ahead of a message), so the two user messages do not
    sit side by side. Returns (messages, whether it was merged).
    """
    at = next((i for i in range(len(messages) - 1, -1, -1) if is_summary_message(messages[i])), None)
    position = len(messages) if at is None else at + 1
    while position < len(messages) and messages[position].get("role") == "tool":
        position += 1
    copy = {k: v for k, v in latest.items() if k != "_compressed_summary"}
    if merge and at is not None and position == at + 1 and _plain_user_summary(messages[at]):
        return messages[:at] + [merge_summary(copy, messages[at]["content"])] + messages[position:], True
    return messages[:position] + [copy] + messages[position:], False


#: Hermes's stand-in request when a compressed list holds no real user message and none existed before.
NO_USER_PLACEHOLDER = ("Continue from the compressed conversation context above. "
                       "This marker exists because no human user turn was available.")


def ensure_real_user_turn(original: Sequence[dict], compressed: list[dict]) -> tuple[list[dict], bool]:
    """Hermes's agent-wrapper rule (``reinsert_latest_user`` off): a result without any real user
    message gets a copy of the newest one from ``original``.

    It goes before the first assistant message not already preceded by a user
    message; failing that it is appended when the list does not end with a
    user message (or ends with a summary), else merged ahead of that trailing
    user message. With no real user message anywhere, a fixed placeholder
    request is appended. Returns (messages, whether one was added).
    """
    if any(is_real_user_message(m) for m in compressed):
        return compressed, False
    latest = next((m for m in reversed(original) if is_real_user_message(m)), None)
    out = list(compressed)
    if latest is None:
        return out + [{"role": "user", "content": NO_USER_PLACEHOLDER}], True
    anchor = {k: v for k, v in latest.items() if k != "_compressed_summary"}
    for index, message in enumerate(out):
        if message.get("role") == "assistant" and (index == 0 or out[index - 1].get("role") != "user"):
            return out[:index] + [anchor] + out[index:], True
    if not out or out[-1].get("role") != "user" or is_summary_message(out[-1]):
        return out + [anchor], True
    last = out[-1]
    if isinstance(anchor.get("content"), list) or isinstance(last.get("content"), list):
        as_parts = (lambda c: list(c) if isinstance(c, list) else [{"type": "text", "text": str(c or "")}])
        merged: object = as_parts(anchor.get("content")) + as_parts(last.get("content"))
    else:
        merged = f"{anchor.get('content') or ''}\n\n{last.get('content') or ''}".strip()
    out[-1] = {k: v for k, v in last.items() if not k.startswith("_")} | {"content": merged}
    return out, True


def _plain_user_summary(message: dict) -> bool:
    """A user-role summary with text content and nothing merged behind it yet."""
    return (message.get("role") == "user" and isinstance(message.get("content"), str)
            and split_summary(message)[1] is None)


def _result(messages: list[dict], plan: CompressionPlan, *, cfg: CompressionConfig, outcome: str,
            before: int, after: int, record: dict, summary: SummaryOutcome | None = None,
            body: str | None = None, condensed: int = 0) -> CompressionResult:
    saved = before - after
    effective = condensed > 0 and saved > 0 and saved >= cfg.min_saving * before
    if outcome not in ("compressed", "dropped_oldest"):
        record.pop("dropped_indices", None)  # nothing left the context
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
    ids, whether it is summarised or stays in the context as that one line.
    Earlier anchors come from the state; a conversation resumed from a log has
    none there, and they are read back from the summary being folded in.
    """
    previous, source = list(state.anchors), "state"
    if not previous and plan.summary_index is not None:
        previous, source = parse_anchor_block(split_summary(messages[plan.summary_index])[0]), "summary"
    budget = anchor_budget(max(cfg.summary_min_tokens, budgets.max_summary_tokens))
    span = _span_of(messages, plan.boundary, plan.summary_index, whole=cfg.summarise_whole_span)
    anchors = collect_anchors(span + _stubbed_originals(messages, plan), previous, budget_tokens=budget,
                              count=rough_tokens if cfg.estimator == "rough" else count_text)
    kept = set(anchors)
    record = {"budget_tokens": budget, "previous": len(previous), "previous_from": source if previous else None,
              "kept": len(anchors), "added": len(kept.difference(previous)),
              "evicted": sum(1 for anchor in previous if anchor not in kept)}
    return anchors, record


def _stubbed_originals(messages: list[dict], plan: CompressionPlan) -> list[dict]:
    """The messages pruning cut that stay beside the summary, as the conversation showed them, oldest first."""
    start, end = plan.boundary.start, plan.boundary.end
    cut = sorted({d.index for d in plan.decisions if not start <= d.index < end})
    return [messages[index] for index in cut]


class _Dropper:
    """The ``dropped_oldest`` result of one compression, built on demand (``drop_when_summary_cannot_fit``)."""

    def __init__(self, plan: CompressionPlan, cfg: CompressionConfig, record: dict,
                 before: int, estimate: Callable[[Sequence[dict]], int], state: CompressionState,
                 latest: tuple[int, dict] | None, keep: int | None):
        self.plan, self.cfg, self.record = plan, cfg, record
        self.before, self.estimate, self.state, self.latest, self.keep = before, estimate, state, latest, keep

    def __call__(self) -> CompressionResult | None:
        """The range dropped, or None when that would not shrink the context either."""
        out, dropped = drop_range(self.plan.pruned, self.plan.boundary, self.latest, cfg=self.cfg, keep=self.keep)
        after = self.estimate(out)
        if after >= self.before or not dropped["dropped_indices"]:
            return None
        self.record["drop"] = dropped
        self.record["dropped_indices"] = dropped["dropped_indices"]
        self.state.compression_count += 1
        return _result(out, self.plan, cfg=self.cfg, outcome="dropped_oldest", before=self.before, after=after,
                       record=self.record, condensed=len(dropped["dropped_indices"]))


def compress(messages: list[dict], *, cfg: CompressionConfig, budgets: Budgets, state: CompressionState,
             summariser: Summariser, focus: str | None = None,
             estimate_tokens: Callable[[Sequence[dict]], int] | None = None,
             memory_context: str | None = None) -> CompressionResult:
    """Compress ``messages`` once; updates ``state``'s verdicts only when a summary was inserted."""
    sizes = RememberedSizes(message_estimator(cfg))
    if estimate_tokens is None or estimate_tokens is list_estimator(cfg):
        estimate_tokens = summed_list_estimator(cfg, sizes)
    validate_messages(messages)
    asked, state.user_asked = state.user_asked, False
    if cfg.keep_original_task and state.original_task is None:
        # The conversation's first request is remembered the first time it is seen, whatever this pass does:
        # a pass that drops it without a summary must not let a later summary quote another request instead.
        if (first := first_real_user_index(messages)) is not None:
            state.original_task = text_of(messages[first])
    # Measured before pruning: under the rough estimate, pruning then reads the outputs' line counts
    # from this pass (``known_newlines``) instead of scanning them again.
    before = estimate_tokens(messages)
    plan = _plan(messages, cfg=cfg, budgets=budgets, state=state, sizes=sizes)
    record = dict(plan.record, messages_before=len(messages))
    if plan.boundary.empty or (not plan.span and cfg.summarise_whole_span):
        # An empty span under summarise_whole_span: the range holds only the summary already there.
        return _result(plan.pruned, plan, cfg=cfg, outcome="nothing_to_summarise", before=before,
                       after=estimate_tokens(plan.pruned), record=record)
    if plan.summary_index is not None and plan.summary_index > plan.boundary.start and not cfg.summarise_whole_span:
        # Hermes summarises only what follows the folded summary: what precedes it leaves untraced.
        record["dropped_indices"] = list(range(plan.boundary.start, plan.summary_index))

    head = plan.pruned[:plan.boundary.start]
    tail = plan.pruned[plan.boundary.end:]
    if cfg.demote_stale_tail_tools:
        demoted, cut = demote_stale_tail_tools(plan.pruned, plan.boundary.end, history_pointer=cfg.history_pointers)
        tail = demoted[plan.boundary.end:]
        record["tail_demoted_indices"] = cut
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

    span_tokens = sum(map(sizes, plan.span))
    folded = plan.summary_index is not None and plan.summary_index >= plan.boundary.start
    replaced_tokens = span_tokens + (sizes(plan.pruned[plan.summary_index]) if folded else 0)
    latest_index, latest, merged = (_latest_user_request(messages, inside_summaries=cfg.keep_latest_user)
                                    or (None, None, False))
    room = window_room(budgets)
    keep = plan.summary_index if folded and sizes(plan.pruned[plan.summary_index]) <= room else None
    drop = _Dropper(plan, cfg, record, before, estimate_tokens, state,
                    None if latest is None else (latest_index, latest), keep)
    if cfg.summary_fits_window and cfg.drop_when_summary_cannot_fit and room < SUMMARY_FLOOR_TOKENS:
        record["summary"] = {"budget_tokens": 0, "span_tokens": span_tokens, "skipped": "no room for a summary"}
        if (dropped := drop()) is not None:
            return dropped
    request = SummaryRequest(span=plan.span, previous_summary=plan.previous_summary, focus=request_focus,
                             budget_tokens=summary_budget(cfg, budgets, span_tokens, replaced_tokens),
                             memory_context=memory_context,
                             window_tokens=budgets.context_length if cfg.summary_fits_window else None,
                             sampled_input=cfg.summary_input_sampling)
    if cfg.summary_fact_context:  # pruning keeps one message per message, so the indices still match
        request.originals = _span_of(messages, plan.boundary, plan.summary_index, whole=cfg.summarise_whole_span)
        request.kept = head + tail
    try:
        outcome = summariser.summarise(request)
    except Exception as exc:  # a summariser fault must not lose the conversation
        outcome = SummaryOutcome(body="", error=f"{type(exc).__name__}: {exc}")
    record["summary"] = {"budget_tokens": request.budget_tokens, "span_tokens": span_tokens,
                         "fallback_used": outcome.fallback_used, "error": outcome.error,
                         "usage_prompt_tokens": outcome.usage_prompt_tokens,
                         "usage_completion_tokens": outcome.usage_completion_tokens}
    body = (outcome.body or "").strip()
    if body and outcome.fallback_used and cfg.fallback_summary_rule == "after_repeated_stall":
        kind = failure_kind(outcome.failure_categories)
        record["summary"].update(failure_kind=kind, failure_decision=decide(kind, state.stall_streak))
        if record["summary"]["failure_decision"] == ABORT:
            body = ""
    elif not body and outcome.failure_categories:
        record["summary"]["failure_kind"] = failure_kind(outcome.failure_categories)
    if not body:
        # With a budget the window cut, the failure is most likely the size: the range goes instead.
        capped = cfg.summary_fits_window and room < wanted_summary_budget(cfg, budgets, span_tokens)
        if capped and cfg.drop_when_summary_cannot_fit and (dropped := drop()) is not None:
            return dropped
        kept = list(messages) if cfg.abort_keeps_original else plan.pruned
        return _result(kept, plan, cfg=cfg, outcome="aborted", before=before, after=estimate_tokens(kept),
                       record=record, summary=outcome)

    if cfg.ground_task_snapshot and not outcome.fallback_used:
        body = ground_task_snapshot(body, plan.span, texts_for(cfg))
    if cfg.keep_original_task and task and not task_record["kept_verbatim"]:
        task_record["quoted_by_summariser"] = task[:ORIGINAL_TASK_MAX_CHARS] in body
        if not task_record["quoted_by_summariser"]:
            body = f"{ORIGINAL_TASK_LABEL} {_task_quote(task)}\n\n{body}"
    record["original_task"] = task_record
    if cfg.lean_summary_sections:
        body = augment_summary(body, plan.span, history_pointer=cfg.history_pointers)

    inserted = body
    if cfg.anchors:
        anchors, record["anchors"] = _pinned_anchors(messages, plan, cfg=cfg, budgets=budgets, state=state)
        if anchors:
            inserted = f"{body}\n\n{render_anchor_block(anchors)}"

    # Between a head ending in a user message and a tail opening with the assistant, the summary is merged into
    # that assistant message, and a request put back after the summary would follow its own answer (a model
    # reading it last does the work again): the request opens the tail, and the summary stands alone before it.
    opened = (cfg.reinsert_latest_user and latest is not None and bool(head) and head[-1].get("role") == "user"
              and bool(tail) and tail[0].get("role") == "assistant" and not user_content_present(head + tail, latest))
    if opened:
        tail = [{k: v for k, v in latest.items() if k != "_compressed_summary"}, *tail]
    assembled, record["assembly"] = assemble(head, inserted, tail, cfg=cfg)
    into_summary = False
    if cfg.reinsert_latest_user:
        reinserted = opened or (latest is not None and not user_content_present(assembled, latest))
        if reinserted and not opened:
            assembled, into_summary = _reinsert_latest_user(assembled, latest, merge=cfg.keep_latest_user)
    else:
        assembled, reinserted = ensure_real_user_turn(messages, assembled)
    record["latest_user"] = {"index": latest_index, "merged": merged, "reinserted": reinserted,
                             "into_summary": into_summary}

    after = estimate_tokens(assembled)
    count = rough_tokens if cfg.estimator == "rough" else count_text
    oversized = cfg.summary_fits_window and count(inserted) >= replaced_tokens
    if oversized:
        record["summary"]["larger_than_span"] = True
    if (after >= before or oversized) and cfg.drop_when_summary_cannot_fit and (dropped := drop()) is not None:
        return dropped
    if (after >= before or oversized) and cfg.refuse_no_gain:
        pruned_tokens = estimate_tokens(plan.pruned)
        kept = plan.pruned if pruned_tokens < before else list(messages)
        return _result(kept, plan, cfg=cfg, outcome="no_gain", before=before,
                       after=min(pruned_tokens, before), record=record, summary=outcome)
    if not cfg.in_place and cfg.judge_by_estimate and not asked and before - after < cfg.min_saving * before:
        # Applied by rotation, it would open a child session barely smaller than its parent, which the next check
        # compresses again: unless the user asked for it, the conversation stays where it is, and the attempt
        # counts as ineffective.
        record["summary"]["would_save"] = before - after
        return _result(list(messages), plan, cfg=cfg, outcome="too_small_to_rotate", before=before, after=before,
                       record=record, summary=outcome)

    state.compression_count += 1
    state.previous_summary = body
    if cfg.anchors:
        state.anchors = anchors
    return _result(assembled, plan, cfg=cfg, outcome="compressed", before=before, after=after, record=record,
                   summary=outcome, body=inserted, condensed=len(plan.span))
