"""What a llama.cpp ``llama-server`` says about itself, for decisions a client cannot guess.

``GET /props`` (at the server's root, beside ``/v1``) reports how many requests
the server serves at once (``total_slots``: its ``-np``; more wait in its
queue), whether its chat template renders tool schemas
(``chat_template_caps.supports_tools``: offered tools are otherwise dropped
without a word), its window per slot and its build. Other servers have no such
route; asking them costs one request, answered None, and is not repeated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import httpx2

#: Seconds the one ``/props`` request may take.
PROPS_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class ServerProps:
    """The parts of ``/props`` hermeslab acts on; None where the server did not say."""

    #: Requests served at once.
    slots: int | None = None
    #: False: the chat template drops tool schemas (the model never sees the tools offered).
    supports_tools: bool | None = None
    #: The window of one slot, in the server's tokens.
    context_length: int | None = None
    build: str | None = None
    model_path: str | None = None


def props_from(body: Any) -> ServerProps | None:
    """The known fields of a ``/props`` body; None for anything that is not an object."""
    if not isinstance(body, Mapping):
        return None
    caps = body.get("chat_template_caps")
    settings = body.get("default_generation_settings")
    return ServerProps(
        slots=_positive(body.get("total_slots")),
        supports_tools=caps.get("supports_tools") if isinstance(caps, Mapping)
        and isinstance(caps.get("supports_tools"), bool) else None,
        context_length=_positive(settings.get("n_ctx")) if isinstance(settings, Mapping) else None,
        build=body.get("build_info") if isinstance(body.get("build_info"), str) else None,
        model_path=body.get("model_path") if isinstance(body.get("model_path"), str) else None)


def read_props(root: str, api_key: str | None = None, *, timeout: float = PROPS_TIMEOUT_SECONDS) -> ServerProps | None:
    """``GET {root}/props``; None when the server has no such route, cannot be reached, or answers nonsense."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        answer = httpx2.get(root.rstrip("/") + "/props", headers=headers, timeout=timeout)
        if answer.status_code != 200:
            return None
        return props_from(answer.json())
    except (httpx2.HTTPError, ValueError):
        return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
