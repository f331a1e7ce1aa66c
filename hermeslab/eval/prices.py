"""What tokens cost: list prices per model, in US dollars per million tokens.

Three prices per model: uncached input, input read from the provider's prompt
cache, and output. The table holds the models of the shared recordings and a
few common ones (list prices as published by each provider in 2025; they
change, so pass your own table for anything that matters). A model the table
does not know is priced with the ``default`` entry, and the metrics say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    cached_input: float
    output: float

    def __post_init__(self) -> None:
        for name in ("input", "cached_input", "output"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"Price.{name} must be a non-negative number of dollars per million tokens, "
                                 f"got {value!r}")

    def cost(self, input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
        """Dollars for ``input_tokens`` of prompt, ``cached_tokens`` of which were cache reads, and the output."""
        fresh = input_tokens - cached_tokens
        return (fresh * self.input + cached_tokens * self.cached_input + output_tokens * self.output) / 1_000_000


DEFAULT = "default"

#: Model name (lower case, without provider prefix or date suffix) → price. ``default`` is the fallback.
DEFAULT_PRICES: dict[str, Price] = {
    DEFAULT: Price(2.00, 0.50, 8.00),
    "gpt-4o": Price(2.50, 1.25, 10.00),
    "gpt-4o-mini": Price(0.15, 0.075, 0.60),
    "gpt-4.1": Price(2.00, 0.50, 8.00),
    "gpt-4.1-mini": Price(0.40, 0.10, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.025, 0.40),
    "ft:gpt-4.1": Price(3.00, 0.75, 12.00),
    "ft:gpt-4.1-mini": Price(0.80, 0.20, 3.20),
    "gpt-5": Price(1.25, 0.125, 10.00),
    "gpt-5-mini": Price(0.25, 0.025, 2.00),
    "gemini-3-pro-preview": Price(2.00, 0.20, 12.00),
    "gemini-2.5-pro": Price(1.25, 0.31, 10.00),
    "gemini-2.5-flash": Price(0.30, 0.075, 2.50),
    "claude-sonnet-4": Price(3.00, 0.30, 15.00),
    "claude-sonnet-4.5": Price(3.00, 0.30, 15.00),
    "claude-opus-4.1": Price(15.00, 1.50, 75.00),
    "claude-haiku-4.5": Price(1.00, 0.10, 5.00),
}

_DATE_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")


def model_key(model: str) -> str:
    """The table key of a model name: lower case, provider prefix and date suffix removed.

    ``google/gemini-3-pro-preview`` → ``gemini-3-pro-preview``; ``gpt-4o-2024-08-06`` → ``gpt-4o``;
    a fine-tune ``ft:gpt-4.1-2025-04-14:org:name:id`` → ``ft:gpt-4.1``.
    """
    name = model.strip().lower()
    if name.startswith("ft:"):
        base = name[3:].split(":", 1)[0]
        return "ft:" + _DATE_SUFFIX.sub("", base)
    name = name.rsplit("/", 1)[-1]
    return _DATE_SUFFIX.sub("", name)


def price_for(model: str | None, prices: Mapping[str, Price] | None = None) -> tuple[Price, bool]:
    """The price of ``model`` and whether it is the table's default (the model is unknown)."""
    table = DEFAULT_PRICES if prices is None else prices
    if DEFAULT not in table:
        raise ValueError(f"a price table needs a {DEFAULT!r} entry for models it does not list")
    for key, price in table.items():
        if not isinstance(price, Price):
            raise TypeError(f"price table entry {key!r} must be a Price, got {type(price).__name__}")
    if model:
        for candidate in (model, model_key(model)):
            if candidate in table:
                return table[candidate], False
    return table[DEFAULT], True
