"""Context compression as pure functions: prune → boundary → summarise → assemble.

Start with ``derive_budgets`` and ``compress`` (or ``plan_compression`` to see
the decisions without a summary call); ``CompressionPolicy`` decides when to
call them; ``baselines`` holds the summary-free strategies for comparison.
"""

from __future__ import annotations

from .baselines import BaselineResult, observation_masking, sliding_window
from .boundary import Boundary, choose_boundary
from .budget import Budgets, derive_budgets, summary_budget
from .pipeline import CompressionPlan, CompressionResult, CompressionState, compress, plan_compression
from .error_limits import parse_context_limit
from .policy import CompressionPolicy
from .prune import PruneDecision, one_line_description, prune_messages
from .types import SUMMARY_END_MARKER, SUMMARY_PREFIX, Summariser, SummaryOutcome, SummaryRequest, is_summary_message

__all__ = [
    "SUMMARY_END_MARKER", "SUMMARY_PREFIX", "BaselineResult", "Boundary", "Budgets", "CompressionPlan",
    "CompressionPolicy", "CompressionResult", "CompressionState", "PruneDecision", "Summariser", "SummaryOutcome",
    "SummaryRequest", "choose_boundary", "compress", "derive_budgets", "is_summary_message",
    "observation_masking", "one_line_description", "parse_context_limit", "plan_compression", "prune_messages",
    "sliding_window", "summary_budget",
]
