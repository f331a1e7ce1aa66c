"""Print, as one JSON object, the texts Hermes 0.19.0's compressor writes into a conversation.

Run under the Hermes virtualenv's Python (``python -I texts_dump.py``). Nothing
is copied out of Hermes's sources: constants are read from its module, and the
texts it builds inside functions (tool one-liners, the task-snapshot line, the
duplicate and removed-call markers) are obtained by calling those functions on
probe inputs whose values are unique placeholders, then replacing each
placeholder by a named slot ``\\x00name\\x00``. hermeslab fills the slots with
values it computes the way Hermes does (``hermeslab.context.hermes_texts``).
"""

from __future__ import annotations

import json
import re
import sys
from importlib import metadata

#: Numbers the probes make Hermes print, each standing for one slot.
_CHARS, _LINES, _EXIT, _COUNT, _WRITTEN = 123_457, 2_345, 7_654, 8_765, 3_456
_NUMBERS = {f"{_CHARS:,}": "chars", str(_LINES): "lines", str(_EXIT): "exit", str(_COUNT): "count",
            str(_WRITTEN): "written"}
#: Argument keys the one-liners read; each probe value is ``QQ<key>QQ``.
_KEYS = ("command", "path", "offset", "pattern", "target", "mode", "url", "ref", "query", "goal", "code",
         "name", "question", "action", "session_id")
_TOOLS = ("terminal", "read_file", "write_file", "search_files", "patch", "web_search", "delegate_task",
          "execute_code", "skill_view", "skills_list", "skill_manage", "vision_analyze", "memory", "todo",
          "clarify", "text_to_speech", "cronjob", "process")
_BROWSER_TOOLS = ("browser_navigate", "browser_click", "browser_snapshot", "browser_type", "browser_scroll",
                  "browser_vision")


def _slot(name: str) -> str:
    return f"\x00{name}\x00"


def _template(text: str, tool: str | None = None) -> str:
    """``text`` with every probe value replaced by its slot."""
    text = re.sub(r"QQ([a-z_]+)QQ", lambda m: _slot(m.group(1)), text)
    for number, name in _NUMBERS.items():
        text = re.sub(rf"(?<!\d)(?<!\d,){re.escape(number)}(?!\d|,\d)", _slot(name), text)
    if tool is not None:
        text = text.replace(f"[{tool}]", f"[{_slot('tool')}]", 1)
    return text


def _probe_content() -> str:
    head = f'{{"exit_code": {_EXIT}, "total_count": {_COUNT}}}'
    body = head + "\n" * (_LINES - 1)
    return body + "x" * (_CHARS - len(body))


def one_liners(module) -> dict:
    summarize = module._summarize_tool_result
    content = _probe_content()
    args = {key: f"QQ{key}QQ" for key in _KEYS}
    args["content"] = "\n" * (_WRITTEN - 1)
    full = json.dumps(args)
    out = {tool: _template(summarize(tool, full, content), tool) for tool in _TOOLS}
    browser = _BROWSER_TOOLS[0]
    out["browser_url"] = _template(summarize(browser, json.dumps({"url": "QQurlQQ"}), content), browser)
    out["browser_ref"] = _template(summarize(browser, json.dumps({"ref": "QQrefQQ"}), content), browser)
    out["browser_none"] = _template(summarize(browser, "{}", content), browser)
    one = summarize("web_extract", json.dumps({"urls": ["QQurlQQ"]}), content)
    out["web_extract"] = _template(one, "web_extract")
    three = summarize("web_extract", json.dumps({"urls": ["QQurlQQ", "b", "c"]}), content)
    out["web_extract_more"] = _template(three[len(one) - len(one.split("QQurlQQ", 1)[1]):].split(" (", 2)[1], None)
    out["web_extract_more"] = " (" + out["web_extract_more"].replace("2", _slot("more"), 1)
    generic = "QQtoolQQ"
    bare = _template(summarize(generic, "{}", content), None)
    with_pair = _template(summarize(generic, json.dumps({"QQkeyQQ": "QQvalueQQ"}), content), None)
    at = next(i for i, (a, b) in enumerate(zip(bare, with_pair)) if a != b)
    pair = with_pair[at:len(with_pair) - (len(bare) - at)]
    out["generic"] = bare[:at] + _slot("pairs") + bare[at:]
    out["generic_pair"] = pair
    return out


def _compressor(compressor_class):
    return compressor_class(model="probe", provider="custom", base_url="http://127.0.0.1:9/v1",
                            api_key="unused", config_context_length=128_000, quiet_mode=True)


def texts(module, compressor_class) -> dict:
    compressor = _compressor(compressor_class)
    snapshot = compressor_class._latest_user_task_snapshot([{"role": "user", "content": "QQaskQQ"}])
    lead, note = snapshot.split(repr("QQaskQQ"), 1)
    long_ask = "a" * 5_000
    cut = compressor_class._latest_user_task_snapshot([{"role": "user", "content": long_ask}])
    cut = cut.split(repr(long_ask[:10])[:-1], 1)[1].lstrip("a").split("'", 1)[0]
    removed = compressor._sanitize_tool_pairs([
        {"role": "user", "content": "probe"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "probe_call", "type": "function", "function": {"name": "probe", "arguments": "{}"}}]},
    ])[1].get("content")
    shots = module._strip_image_parts_from_parts([{"type": "image_url", "image_url": {"url": "x"}}])
    return {
        "hermes_version": metadata.version("hermes-agent"),
        "summary_prefix": module.SUMMARY_PREFIX,
        "end_marker": module._SUMMARY_END_MARKER,
        "merged_header": module._MERGED_PRIOR_CONTEXT_HEADER,
        "merged_delimiter": module._MERGED_SUMMARY_DELIMITER,
        "older_prefixes": list(module._HISTORICAL_SUMMARY_PREFIXES),
        "duplicate_marker": _duplicate_marker(compressor_class),
        "leaf_truncation": json.loads(module._truncate_tool_call_args_json(json.dumps({"v": "b" * 400})))["v"][200:],
        "screenshot_part": shots[0]["text"] if shots else None,
        "stripped_image": module._strip_images_from_content([{"type": "image_url"}])[0]["text"],
        "removed_call": removed,
        "snapshot_lead": lead,
        "snapshot_note": note,
        "snapshot_cut": cut,
        "one_liners": one_liners(module),
    }


def _duplicate_marker(compressor_class) -> str:
    repeated = "probe output line\n" * 20
    calls = [{"id": f"probe_{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
             for i in range(2)]
    sample = [{"role": "user", "content": "read it twice"}, {"role": "assistant", "content": "", "tool_calls": calls},
              {"role": "tool", "tool_call_id": "probe_0", "content": repeated},
              {"role": "tool", "tool_call_id": "probe_1", "content": repeated}]
    pruned, _count = _compressor(compressor_class)._prune_old_tool_results(sample, protect_tail_count=len(sample))
    return pruned[2]["content"]


def main() -> int:
    import agent.context_compressor as module
    from agent.context_compressor import ContextCompressor

    json.dump(texts(module, ContextCompressor), sys.stdout, ensure_ascii=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
