"""The answerer, judge and question writer a command line names: ``perfect`` / ``match``, or the URL of an
OpenAI-compatible endpoint.

A URL is taken as the endpoint's ``/v1`` base (``http://127.0.0.1:8080`` and
``http://127.0.0.1:8080/v1`` both work). Without a model name the endpoint is
asked which models it serves and the first is used, so a one-model server
(llama-server, vLLM) needs none.
"""

from __future__ import annotations

from typing import Any

import openai

from hermeslab.providers.openai_compat import OpenAICompatProvider

from .judge import EndpointJudge, MatchJudge
from .readers import EndpointAnswerer, PerfectReader
from .written import QuestionWriter

PERFECT, MATCH = "perfect", "match"


def endpoint_base(url: str) -> str:
    """``url`` as a ``/v1`` base: the path ``/v1`` added when the URL has none."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"an endpoint is an http(s) URL, got {url!r}")
    base = url.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def served_model(base: str, api_key: str | None = None, *, timeout: float = 10.0) -> str:
    """The first model ``base`` lists at ``/models``; a one-line ValueError when it lists none or cannot be asked."""
    try:
        with openai.OpenAI(base_url=base, api_key=api_key or "none", timeout=timeout, max_retries=0) as client:
            models = [model.id for model in client.models.list()]
    except openai.OpenAIError as exc:
        raise ValueError(f"could not ask {base} which models it serves: {exc}") from None
    if not models:
        raise ValueError(f"{base} lists no model; name one with --model")
    return models[0]


def answerer_from(spec: str, *, model: str | None = None, window: int | None = None, api_key: str | None = None,
                  max_tokens: int = 64) -> Any:
    """``perfect`` → the perfect reader; a URL → that endpoint's model (``model``, else the one it serves)."""
    if spec == PERFECT:
        return PerfectReader(window)
    base = endpoint_base(spec)
    return EndpointAnswerer(base, model or served_model(base, api_key), api_key, window=window,
                            max_tokens=max_tokens)


def judge_from(spec: str, *, model: str | None = None, api_key: str | None = None) -> Any:
    """``match`` → the deterministic matcher; a URL → a model at that endpoint judges."""
    if spec == MATCH:
        return MatchJudge()
    base = endpoint_base(spec)
    name = model or served_model(base, api_key)
    return EndpointJudge(OpenAICompatProvider(base, api_key, name), name)


def writer_from(spec: str, *, model: str | None = None, api_key: str | None = None) -> QuestionWriter:
    """A URL → a model at that endpoint writes the model-written probes."""
    base = endpoint_base(spec)
    return QuestionWriter(base, model or served_model(base, api_key), api_key)
