"""One compression of a message list under the configured strategy, judged by the policy.

The pure pipeline decides *how* to compress a message list; the policy decides
*whether*. The Compactor holds the two together with the summariser, the
current window and what must happen around a compression (strategy choice,
todo re-injection, the verdict for the anti-thrash breaker). *When* to ask for
one is the ``ContextDriver``'s question; applying the result to a session
(rotation or in-place archiving) is the caller's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..core.config import Config
from ..core.rough import rough_tool_schema_tokens
from ..core.tokens import default_counter, list_estimator, message_estimator
from .budget import Budgets, Resolution, derive_budgets, resolve
from .fit import fit_to_budget
from .pipeline import CompressionState, compress, plan_compression
from .policy import CompressionPolicy
from .rules import StrategyRules, rules_matching
from .types import Summariser, is_summary_message
from .zoo_common import ZooInput

#: Text of the open todo items to re-inject after a summary, or None when there are none.
TodoNote = Callable[[], "str | None"]

@dataclass
class Compaction:
    """One finished compression attempt, ready to be applied and logged."""

    trigger: str
    messages: list[dict[str, Any]]
    result: Any
    verdict: dict[str, Any]
    duration_ms: float
    window: int
    #: What produced it: the configured strategy, ``dropped_oldest`` (no summary could fit, the summarised
    #: range was dropped) or ``fit_window`` (the overflow's last resort).
    strategy: str = "summary"
    #: Whether the output differs from the input, when that decides (``apply_any_change``); None: whether
    #: messages were summarised.
    differs: bool | None = None

    @property
    def changed(self) -> bool:
        if self.result.aborted:
            return False
        return self.result.condensed > 0 if self.differs is None else self.differs


class Compactor:
    """Runs the configured compression strategy when the policy allows it.

    ``rules`` are what a strategy other than the summary pipeline brings (what
    it does, where it fires); ``hermeslab.policies.compactor`` resolves them
    from the config.
    """

    def __init__(self, config: Config, summariser: Summariser, *, todos: TodoNote | None = None,
                 state: CompressionState | None = None, clock: Callable[[], float] = time.monotonic,
                 pre_compress: Callable[[list[dict[str, Any]]], str | None] | None = None,
                 rules: StrategyRules | None = None):
        self.config = config
        self.rules = rules_matching(config.compression, rules)
        #: Sees the messages a summary is about to replace; its text goes to the summariser (memory providers).
        self.pre_compress = pre_compress
        self.cfg = config.compression
        self.summariser = summariser
        self.todos = todos
        self.state = state or CompressionState()
        self.window = config.model.context_length
        #: The effective threshold, budgets and output reserve at this window, with the rule behind each.
        self.resolution: Resolution = resolve(self.cfg, self.window, config.model.max_tokens, rules=self.rules)
        self.policy = CompressionPolicy(self.cfg, self.budgets, self.state, clock=clock)
        self._estimate_list = list_estimator(self.cfg)
        self._estimate_message = message_estimator(self.cfg)
        #: What a policy's strategy remembers between compactions of this conversation.
        self.zoo_memory: dict[str, Any] = {}

    @property
    def budgets(self) -> Budgets:
        """The budgets of the current window's resolution (a compaction's own tail is ``budgets_for``'s)."""
        return self.resolution.budgets

    # ------------------------------------------------------------ measuring

    def estimate_request(self, messages: Sequence[dict], tools: Sequence[dict] | None) -> int:
        """The request size in the unit the thresholds use (tiktoken, or Hermes's chars/4)."""
        if self.cfg.estimator == "rough":
            return self._estimate_list(messages) + rough_tool_schema_tokens(tools)
        return default_counter.count_request(messages, tools)

    def fixed_tokens(self, messages: Sequence[dict], tools: Sequence[dict] | None) -> int:
        """What every request carries however it is compressed: the system prompt and the tool schemas."""
        system = self._estimate_message(messages[0]) if messages and messages[0].get("role") == "system" else 0
        if self.cfg.estimator == "rough":
            return system + rough_tool_schema_tokens(tools)
        return system + default_counter.count_tools(tools)

    def budgets_for(self, messages: Sequence[dict], tools: Sequence[dict] | None) -> Budgets:
        """The budgets one compression of ``messages`` works with (the tail sized after the fixed cost)."""
        if not self.cfg.tail_after_fixed_cost:
            return self.budgets
        return derive_budgets(self.cfg, self.window, self.config.model.max_tokens,
                              fixed_tokens=self.fixed_tokens(messages, tools), rules=self.rules)

    def lower_window(self, limit: int) -> None:
        """A provider said the window is smaller than configured: re-derive every budget."""
        self.window = limit
        self.resolution = resolve(self.cfg, limit, self.config.model.max_tokens, rules=self.rules)
        self.policy.budgets = self.budgets

    def reset(self) -> None:
        """A new logical conversation (/new): fresh state, manual reset of the breaker."""
        self.state = CompressionState()
        self.policy.state = self.state
        self.policy.last_prompt_tokens = None
        self.zoo_memory = {}

    # ------------------------------------------------------------ compressing

    def run(self, messages: list[dict[str, Any]], *, trigger: str, focus: str | None = None,
            tools: Sequence[dict] | None = None) -> Compaction | None:
        """Compress once if ``trigger`` is allowed now; None when the policy blocks it.

        ``tools`` are the schemas sent with every request, part of the fixed cost.
        """
        if not self.policy.allows(trigger):
            return None
        started = time.perf_counter()
        budgets = self.budgets_for(messages, tools)
        system: list[dict[str, Any]] = []
        if not self.cfg.system_in_pipeline and messages and messages[0].get("role") == "system":
            system, messages = [messages[0]], messages[1:]  # held apart and put back unchanged
        result = self._strategy(messages, focus, budgets)
        out = result.messages
        differs = None
        if self.cfg.apply_any_change:
            # Hermes compares compress()'s output before its wrapper puts the latest request back: a
            # result that needed it back differed, even when it now equals the input.
            latest = (getattr(result, "record", None) or {}).get("latest_user") or {}
            differs = out != messages or bool(latest.get("reinserted"))
        verdict = self.policy.record(result, trigger, changed=differs)
        if not result.aborted and result.condensed > 0:
            if self.rules is None or self.rules.reinjects_todos:  # other agents put back nothing of hermeslab's
                out = self._with_todos(out)
            if self.cfg.strategy != "summary":  # the pipeline counts its own compressions
                self.state.compression_count += 1
        out = system + out if system else out
        dropped = (getattr(result, "record", None) or {}).get("outcome") == "dropped_oldest"
        return Compaction(trigger=trigger, messages=out, result=result, verdict=verdict,
                          duration_ms=(time.perf_counter() - started) * 1000, window=self.window,
                          strategy="dropped_oldest" if dropped else self.cfg.strategy, differs=differs)

    def fit(self, messages: list[dict[str, Any]], *, budget_tokens: int) -> Compaction:
        """Drop the oldest turns, then cut the longest texts, until ``messages`` cost at most ``budget_tokens``.

        Not judged by the anti-thrash breaker: it runs only when the provider
        refused a prompt that compressing could not make fit.
        """
        started = time.perf_counter()
        result = fit_to_budget(messages, budget_tokens=budget_tokens, estimate=self._estimate_message)
        verdict = {"trigger": "overflow", "ineffective": not result.effective, "reasons": [], "fit": True,
                   "streak": self.state.ineffective_streak, "auto_disabled": self.state.auto_disabled}
        return Compaction(trigger="overflow", messages=result.messages, result=result, verdict=verdict,
                          duration_ms=(time.perf_counter() - started) * 1000, window=self.window,
                          strategy="fit_window")

    def _strategy(self, messages: list[dict[str, Any]], focus: str | None, budgets: Budgets) -> Any:
        if self.rules is not None:
            zoo = ZooInput(cfg=self.cfg, budgets=budgets, summariser=self.summariser,
                           estimate=self._estimate_message, max_tokens=self.config.model.max_tokens, focus=focus)
            return self.rules.run(messages, zoo, self.zoo_memory)
        return compress(messages, cfg=self.cfg, budgets=budgets, state=self.state,
                        summariser=self.summariser, focus=focus, estimate_tokens=self._estimate_list,
                        memory_context=self._memory_context(messages, budgets))

    def _memory_context(self, messages: list[dict[str, Any]], budgets: Budgets) -> str | None:
        """The pre-compress hook's text for the span the summary will replace (planned first, model-free)."""
        if self.pre_compress is None:
            return None
        plan = plan_compression(messages, cfg=self.cfg, budgets=budgets, state=self.state)
        if plan.boundary.empty:
            return None
        return self.pre_compress(messages[plan.boundary.start:plan.boundary.end])

    def _with_todos(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Re-inject open todo items right after the summary, where they read as background.

        A summary merged into an assistant message may carry tool calls: the note
        then follows their results, never splitting a call from its result.
        """
        text = self.todos() if self.todos is not None else None
        if not text:
            return messages
        note = {"role": "user", "content": text, "_synthetic": True}
        at = next((i + 1 for i, m in enumerate(messages) if is_summary_message(m)), None)
        if at is None:
            at = 1 if messages and messages[0].get("role") == "system" else 0
        while at < len(messages) and messages[at].get("role") == "tool":
            at += 1
        return messages[:at] + [note] + messages[at:]

