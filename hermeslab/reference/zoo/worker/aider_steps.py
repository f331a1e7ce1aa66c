"""Aider's own ``ChatSummary`` stepped over a recording, deciding before each recorded assistant reply.

The messages arrive as ``{"key", "role", "tokens", "real_user"}``: each
message's token count is hermeslab's, so both sides count alike. A tool result
joins the assistant message before it (Aider's history has no tool messages),
the finished turns are everything before the newest real user message, and
at a model call whose finished turns changed since the last decision Aider's
check runs: ``too_big`` then ``summarize``, a ``ValueError`` leaving no
history (as Aider's summary thread does). The model is Aider's own ``Model``
built offline with the window as its input limit, so its history budget is
Aider's arithmetic; its token counter reads the counts given and its summary
call answers a fixed text (or fails, when asked to).
"""

from __future__ import annotations

from typing import Any

SUMMARY, ACK = "summary", "ack"


def _model(window: int, summary_tokens: int, ack_tokens: int, fails: bool) -> Any:
    from aider import models

    original = models.Model.get_model_info
    models.Model.get_model_info = lambda self, name: {"max_input_tokens": window}
    try:
        model = models.Model("hermeslab-reference-model", weak_model=False)
    finally:
        models.Model.get_model_info = original

    def count(item: Any) -> int:
        if isinstance(item, list):
            return sum(count(message) for message in item)
        if "_tokens" in item:
            return item["_tokens"]
        return summary_tokens if item["role"] == "user" else ack_tokens

    def send(messages: list, *args: Any, **kwargs: Any) -> str:
        if fails:
            raise RuntimeError("the summary model is down")
        return "the stub summary"

    model.token_count = count
    model.simple_send_with_retries = send
    return model


def describe() -> dict:
    import aider

    return {"agent": "aider-chat", "version": aider.__version__}


def _keys(history: list[dict]) -> list[str]:
    keys: list[str] = []
    for item in history:
        keys += item.get("_keys") or [SUMMARY if item["role"] == "user" else ACK]
    return keys


def replay(messages: list[dict], params: dict) -> list[dict]:
    from aider.history import ChatSummary

    model = _model(params["window"], params["summary_tokens"], params["ack_tokens"], params.get("fails", False))
    summarizer = ChatSummary([model], model.max_chat_history_tokens)
    history: list[dict] = []
    decided: list[str] | None = None
    steps = []
    for index, wire in enumerate(messages):
        if wire["role"] == "system" and not history:
            continue  # the system prompt is not part of Aider's chat history
        if wire["role"] == "assistant":
            boundary = max((i for i, item in enumerate(history) if item.get("_real_user")), default=0)
            done, current = history[:boundary], history[boundary:]
            compacted = False
            if _keys(done) != decided and summarizer.too_big(done):
                try:
                    done = summarizer.summarize(done)
                except ValueError:
                    done = []
                compacted = True
                decided = _keys(done)
            history = done + current
            steps.append({"at": index, "compacted": compacted, "view": _keys(history)})
        if wire["role"] == "tool" and history and history[-1]["role"] == "assistant":
            last = history[-1]
            history[-1] = {**last, "_tokens": last["_tokens"] + wire["tokens"], "_keys": [*last["_keys"], wire["key"]]}
        else:
            history.append({"role": wire["role"], "content": wire["key"], "_tokens": wire["tokens"],
                            "_keys": [wire["key"]], "_real_user": wire["real_user"]})
    return steps
