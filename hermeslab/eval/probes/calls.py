"""The probe exam's model calls as rows of the lab, like every other call hermeslab makes.

An exam run with a lab and a model behind it (an endpoint answerer, judge or
question writer) asks that model many times; each call, answered or failed,
becomes a row of ``api_calls`` marked ``purpose='exam'``, with its usage and
where the counts came from. The rows belong to one session per exam run
(``source='probe_exam'``, ``reason='exam'``), so that session's ``all_*``
totals are the sums of the exam's rows and no conversation's totals change.
A cached answer or judgement makes no call and no row.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from hermeslab.context.extractive import clip
from hermeslab.context.summary import classify_failure
from hermeslab.core.events import ApiCallFinished, SessionEnded, SessionStarted
from hermeslab.core.provider import ChatRequest, ChatResponse, ProviderError, usage_or_estimate, usage_source
from hermeslab.core.tokens import default_counter
from hermeslab.session import new_session_id
from hermeslab.store import StoreWriter

#: Told the fields of one finished call (an ``ApiCallFinished`` without its session, index or purpose).
OnCall = Callable[..., None]


def reported_complete(complete: Callable[[ChatRequest], ChatResponse], request: ChatRequest,
                      on_call: OnCall | None) -> ChatResponse:
    """``complete(request)``, its fields handed to ``on_call`` whether it answered or raised."""
    if on_call is None:
        return complete(request)
    started = time.perf_counter()
    estimate = default_counter.count_request(request.messages, request.tools)
    fields: dict[str, Any] = {"model": request.model or "", "estimated_prompt_tokens": estimate}
    try:
        response = complete(request)
    except Exception as error:
        on_call(**fields, latency_ms=_ms_since(started), error_class=classify_failure(error),
                error_message=clip(" ".join(str(error).split()), 500),
                status_code=error.status if isinstance(error, ProviderError) else None)
        raise
    usage, estimated = usage_or_estimate(response, estimate)
    on_call(**fields, latency_ms=_ms_since(started), server_model=response.model or None,
            prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
            cache_read_tokens=usage.cache_read_tokens, reasoning_tokens=usage.reasoning_tokens,
            usage_estimated=estimated, usage_source=usage_source(response, estimated),
            finish_reason=response.finish_reason)
    return response


class ExamCallLog:
    """Writes one exam run's calls to a lab file; the session row is made with the first call."""

    def __init__(self, path: str | Path, *, label: str):
        self.path = Path(path)
        self.label = label
        self.session_id = new_session_id()
        self.calls = 0
        self._writer: StoreWriter | None = None

    def __call__(self, **fields: Any) -> None:
        if self._writer is None:
            self._writer = StoreWriter(self.path)
            self._writer.handle(SessionStarted(session_id=self.session_id, source="probe_exam", reason="exam",
                                               model=self.label, title=f"probe exam: {self.label}"))
        self._writer.handle(ApiCallFinished(session_id=self.session_id, call_index=self.calls, attempt=1,
                                            purpose="exam", **fields))
        self.calls += 1

    def close(self) -> None:
        """End the exam's session (when it made any call) and write what is left."""
        if self._writer is None:
            return
        self._writer.handle(SessionEnded(session_id=self.session_id, end_reason="exam_finished"))
        self._writer.close()
        self._writer = None


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
