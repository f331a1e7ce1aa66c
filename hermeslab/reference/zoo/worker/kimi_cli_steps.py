"""Kimi CLI's own trigger and ``SimpleCompaction`` stepped over a recording, before each recorded assistant reply.

The messages arrive as ``{"key", "role", "text", "tokens"}``; the leading
system messages are Kimi's system prompt, kept apart from its history and
counted. Before each assistant reply the context's tokens (hermeslab's counts,
the summary's given as ``summary_tokens``) go to Kimi's
``should_auto_compact`` with the variant's window, ratio and reserve; when it
fires, ``SimpleCompaction.prepare`` decides what is kept. A compaction that
finds nothing to summarise leaves the history as it was (Kimi writes the same
messages back); otherwise the history becomes the summary then the kept
messages, as ``SimpleCompaction.compact`` builds it. The summary call itself is
not made: its text is a stub either way.
"""

from __future__ import annotations

import importlib.metadata

SUMMARY = "summary"


def describe() -> dict:
    return {"agent": "kimi-cli", "version": importlib.metadata.version("kimi-cli")}


def replay(messages: list[dict], params: dict) -> list[dict]:
    from kimi_cli.soul.compaction import SimpleCompaction, should_auto_compact
    from kosong.message import Message

    compaction = SimpleCompaction(max_preserved_messages=params["keep"])
    first = 0
    while first < len(messages) and messages[first]["role"] == "system":
        first += 1
    prompt_tokens = sum(m["tokens"] for m in messages[:first])
    keys: dict[int, str] = {}
    tokens: dict[int, int] = {}
    history: list = []
    steps = []
    for index, item in enumerate(messages[first:], start=first):
        if item["role"] == "assistant":
            compacted = False
            count = prompt_tokens + sum(tokens[id(m)] for m in history)
            if should_auto_compact(count, params["window"], trigger_ratio=params["ratio"],
                                   reserved_context_size=params["reserved"]):
                compact_message, to_preserve = compaction.prepare(history)
                if compact_message is not None:
                    summary = Message(role="user", content="summary")
                    keys[id(summary)], tokens[id(summary)] = SUMMARY, params["summary_tokens"]
                    history, compacted = [summary, *to_preserve], True
            steps.append({"at": index, "compacted": compacted, "view": [keys[id(m)] for m in history]})
        message = Message(role=item["role"], content=item["text"])
        keys[id(message)], tokens[id(message)] = item["key"], item["tokens"]
        history.append(message)
    return steps
