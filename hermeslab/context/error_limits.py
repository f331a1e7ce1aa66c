"""What a provider's refusal of a prompt as too large says: the window it has, and the size it counted.

The wordings differ per provider (and per server build); each pattern names
where its wording comes from. Numbers are read from the most specific wording
to the most generic, and rate-limit messages ("30000 tokens per minute") are
never read as a window.
"""

from __future__ import annotations

import re

#: Plausible context windows; anything outside is a misread number.
MIN_CONTEXT_LIMIT = 1_024
MAX_CONTEXT_LIMIT = 10_000_000

_NUMBER = r"(\d[\d,]*(?:\.\d+)?(?:\s?[kKmM](?![a-zA-Z]))?)"
_LIMIT_PATTERNS = tuple(re.compile(p, re.IGNORECASE) for p in (
    # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum"
    r"prompt is too long:\s*[\d,]+\s*tokens?\s*>\s*" + _NUMBER + r"\s*maximum",
    # vLLM: "max_model_len 4096", "`max_model_len` (4096)", "maximum model length of 4096",
    # "maximum model length 131072", "maximum model length: 131072", "maximum model length is (32768)"
    r"max_model_len[`'\"]?\s*(?:\(|=|:|is|of)?\s*" + _NUMBER,
    r"maximum model length[`'\"]?\s*(?:is|of)?\s*[:=(]?\s*" + _NUMBER,
    # llama.cpp, LM Studio, Ollama: "Maximum context size 65536 exceeded", "max context length is 65536",
    # "model's max context window: 8192"
    r"max(?:imum)?[\s_]+context[\s_]+(?:size|length|window)[`'\"]?\s*(?:is|of)?\s*[:=(]?\s*" + _NUMBER,
    # llama.cpp: "exceeds the available context size (4096 tokens)", "\"n_ctx\": 4096"
    r"available context size\s*\(\s*" + _NUMBER + r"\s*tokens?\s*\)",
    r"\bn_ctx(?:_slot)?[\"']?\s*[:=]\s*" + _NUMBER,
    # OpenAI, DeepSeek, OpenRouter, vLLM: "maximum context length is 128000 tokens"
    r"maximum context length (?:is|of)\s*" + _NUMBER,
    r"context (?:length|window|size|limit) (?:is|of)\s*" + _NUMBER,
    # Mistral: "too large for model with 32768 maximum context length"; "a 200K-token context window"
    _NUMBER + r"[\s-]*(?:tokens?[\s-]*)?(?:maximum context length|context (?:window|length|limit))",
    # Gemini: "exceeds the maximum number of tokens allowed (1048576)"
    r"maximum number of tokens allowed\s*\(\s*" + _NUMBER + r"\s*\)",
    # "exceeds the configured limit of 272000 tokens"
    r"(?:limit|maximum) of\s*" + _NUMBER + r"\s*tokens",
    # Gemini: "input token count is 32825 but model only supports up to 32768"
    r"supports?\s+(?:only\s+)?up\s+to\s+" + _NUMBER + r"(?![\d.,]|\s*(?:tokens?\s+)?(?:output|completion))",
    # TGI: "must be <= 4096"
    r"must be\s*<=\s*" + _NUMBER,
    # generic "... > 200000 maximum"
    r">\s*" + _NUMBER + r"\s*(?:max|maximum|limit)\b",
))
_RATE_WORDS = re.compile(r"rate[ _-]?limit|per (?:minute|min\b|second|day|hour)|\b[TR]PM\b|requests per", re.I)
_CONTEXT_WORDS = re.compile(r"context|too long|max_model_len|n_ctx|model length", re.I)
_RATE_AFTER = re.compile(r"^[^.;]{0,30}?(?:per (?:minute|min\b|second|day|hour)|/\s*min|\b[TR]PM\b)", re.I)


def _parse_number(text: str) -> int | None:
    text = text.replace(",", "").replace(" ", "")
    scale = 1
    if text[-1:] in "kK":
        scale, text = 1_000, text[:-1]
    elif text[-1:] in "mM":
        scale, text = 1_000_000, text[:-1]
    try:
        return int(float(text) * scale)
    except ValueError:
        return None


_PROMPT_SIZE_PATTERNS = tuple(re.compile(p, re.IGNORECASE) for p in (
    # OpenAI: "However, your messages resulted in 1284 tokens"
    r"messages resulted in\s*(\d[\d,]*)\s*tokens",
    # vLLM: "you requested 4949 tokens (949 in the messages, 4000 in the completion)"
    r"\(\s*(\d[\d,]*)\s*in the messages",
    # vLLM: "your prompt contains at least 16500 input tokens", "your request has 1000 input tokens"
    r"(?:prompt contains(?: at least)?|request has)\s*(\d[\d,]*)\s*input tokens",
    # llama.cpp: "request (1100 tokens) exceeds the available context size", "\"n_prompt_tokens\": 1100"
    r"request\s*\(\s*(\d[\d,]*)\s*tokens?\s*\)",
    r"n_prompt_tokens[\"']?\s*[:=]\s*(\d[\d,]*)",
    # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum"
    r"prompt is too long:\s*(\d[\d,]*)\s*tokens?",
))


def parse_prompt_tokens(error_text: str) -> int | None:
    """The size of the refused prompt as the provider counted it, when its error message states it; else None."""
    if not isinstance(error_text, str):
        return None
    for pattern in _PROMPT_SIZE_PATTERNS:
        match = pattern.search(error_text)
        if match is not None:
            value = int(match.group(1).replace(",", ""))
            return value if value > 0 else None
    return None


def parse_context_limit(error_text: str) -> int | None:
    """The context window a provider's error message states, or None.

    Patterns are tried from the most specific wording to the most generic; the
    first plausible number wins. Rate-limit messages ("30000 tokens per minute")
    are never read as a window.
    """
    if not isinstance(error_text, str) or not error_text:
        return None
    if _RATE_WORDS.search(error_text) and not _CONTEXT_WORDS.search(error_text):
        return None
    for pattern in _LIMIT_PATTERNS:
        for match in pattern.finditer(error_text):
            if _RATE_AFTER.match(error_text[match.end(1):]):
                continue
            value = _parse_number(match.group(1))
            if value is not None and MIN_CONTEXT_LIMIT <= value <= MAX_CONTEXT_LIMIT:
                return value
    return None
