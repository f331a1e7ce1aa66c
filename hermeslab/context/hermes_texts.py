"""Hermes 0.19.0's own texts, read at run time from an installed hermes-agent, never stored here.

The ``hermes-0.19`` preset reproduces Hermes's decisions, and where Hermes's
texts stay in the context (the summary's opening and closing line, the merged
summary's header and delimiter, the duplicate and removed-call markers, the
tool one-liners, the task-snapshot line) their exact tokens decide later
thresholds too. When hermes-agent 0.19.0 is installed (the reference
virtualenv ``hermeslab reference install hermes`` makes), its texts are obtained once, by
running ``hermeslab/reference/worker/texts_dump.py`` under that virtualenv's
Python, and kept as JSON beside the virtualenv; later processes read that
file. Without it the preset uses hermeslab's own wording, of the same lengths.
``texts_in_use`` names which a run used; every report carries it.

Set ``HERMESLAB_HERMES_TEXTS=off`` to use hermeslab's wording even where Hermes
is installed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from hermeslab.core.config import CompressionConfig
from hermeslab.core.hermes_install import HERMES_REQUIREMENT, default_venv_path, read_marker, venv_python

#: What a report says when a run used Hermes's texts, and when it used hermeslab's own.
HERMES_WORDING = "hermes-agent 0.19.0"
HERMESLAB_WORDING = "hermeslab wording"
SWITCH_ENV_VAR = "HERMESLAB_HERMES_TEXTS"
_DUMP_SCRIPT = Path(__file__).resolve().parent.parent / "reference" / "worker" / "texts_dump.py"
_SLOT = re.compile(r"\x00([a-z_]+)\x00")
_REQUIRED = ("summary_prefix", "end_marker", "merged_header", "merged_delimiter", "duplicate_marker",
             "leaf_truncation", "removed_call", "screenshot_part", "stripped_image", "snapshot_lead",
             "snapshot_note", "snapshot_cut", "one_liners")


class HermesTextsError(RuntimeError):
    """The installed Hermes did not give its texts (the message says why); hermeslab's wording is used."""


@dataclass(frozen=True)
class HermesTexts:
    """The texts one installed Hermes writes; ``one_liners`` are templates with ``\\x00slot\\x00`` places."""

    version: str
    summary_prefix: str
    end_marker: str
    merged_header: str
    merged_delimiter: str
    older_prefixes: tuple[str, ...]
    duplicate_marker: str
    leaf_truncation: str
    removed_call: str
    screenshot_part: str
    stripped_image: str
    snapshot_lead: str
    snapshot_note: str
    snapshot_cut: str
    one_liners: dict[str, str]

    @classmethod
    def from_dump(cls, data: dict[str, Any]) -> HermesTexts:
        missing = [key for key in _REQUIRED if not isinstance(data.get(key), (str, dict))]
        if missing:
            raise HermesTextsError(f"the Hermes texts dump lacks {', '.join(missing)}")
        return cls(version=str(data.get("hermes_version", "")),
                   older_prefixes=tuple(data.get("older_prefixes") or ()),
                   **{key: data[key] for key in _REQUIRED})

    def fill(self, template: str, **values: Any) -> str:
        """A one-liner template with each slot replaced by ``str`` of its value (as an f-string would)."""
        return _SLOT.sub(lambda match: str(values.get(match.group(1), "")), self.one_liners[template])


def _cache_path(venv: Path) -> Path:
    return venv.parent / f"{venv.name}-texts.json"


def _dump(python: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="hermeslab-hermes-texts-") as home:
        env = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
        env["HERMES_HOME"] = home
        result = subprocess.run([str(python), "-I", str(_DUMP_SCRIPT)], capture_output=True, text=True,
                                cwd=home, env=env, timeout=300)
    if result.returncode != 0:
        raise HermesTextsError(f"reading Hermes's texts failed: {result.stderr.strip()[-400:]}")
    return json.loads(result.stdout)


def load_installed(venv: Path | None = None) -> HermesTexts | None:
    """Hermes's texts from the installed reference virtualenv (``venv``, else the default one); None without it.

    The texts are read once per install and kept in a JSON file beside the
    virtualenv, stamped with the install's marker so a reinstall reads them again.
    """
    venv = Path(venv) if venv is not None else default_venv_path()
    marker = read_marker(venv)
    if marker is None:
        return None
    stamp = {"requirement": HERMES_REQUIREMENT, "installed": marker.get("created_at"),
             "dump_script": _DUMP_SCRIPT.stat().st_mtime_ns}
    cache = _cache_path(venv)
    try:
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached.get("stamp") == stamp:
            return HermesTexts.from_dump(cached["texts"])
    except (OSError, ValueError, KeyError, TypeError, HermesTextsError):
        pass
    data = _dump(venv_python(venv))
    texts = HermesTexts.from_dump(data)
    try:
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps({"stamp": stamp, "texts": data}), encoding="utf-8")
        partial.replace(cache)
    except OSError:
        pass  # read again next time
    return texts


@lru_cache(maxsize=1)
def installed_texts() -> HermesTexts | None:
    """Hermes's texts for this process (read once), or None: not installed, switched off, or unreadable."""
    if os.environ.get(SWITCH_ENV_VAR, "").strip().lower() in ("off", "0", "false", "no"):
        return None
    try:
        return load_installed()
    except (HermesTextsError, OSError, ValueError, subprocess.SubprocessError):
        return None


def texts_for(cfg: CompressionConfig) -> HermesTexts | None:
    """The Hermes texts a config writes with: only ``hermes_texts`` configs, only when Hermes is installed."""
    return installed_texts() if cfg.hermes_texts else None


def texts_in_use(cfg: CompressionConfig) -> str:
    """Which wording a run under ``cfg`` writes: ``HERMES_WORDING`` or ``HERMESLAB_WORDING``."""
    return HERMES_WORDING if texts_for(cfg) is not None else HERMESLAB_WORDING


def loaded_texts() -> HermesTexts | None:
    """Hermes's texts if this process has already read them, without reading them (for recognising
    summaries Hermes's wording framed: only a process that wrote them can hold them)."""
    return installed_texts() if installed_texts.cache_info().currsize else None


_EXIT_CODE = re.compile(r'"exit_code"\s*:\s*(-?\d+)')
_TOTAL_COUNT = re.compile(r'"total_count"\s*:\s*(\d+)')
_BROWSER_TOOLS = frozenset({"browser_navigate", "browser_click", "browser_snapshot", "browser_type",
                            "browser_scroll", "browser_vision"})
_SKILL_TOOLS = frozenset({"skill_view", "skills_list", "skill_manage"})


def _text_arg(args: dict, key: str) -> str:
    value = args.get(key)
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _parsed_arguments(raw: Any) -> dict:
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def one_liner(texts: HermesTexts, tool: str, raw_arguments: Any, content: Any) -> str:
    """The line Hermes puts in place of an old tool result: which values of the call and the output it
    shows follows Hermes 0.19.0's rules (re-implemented here), the wording is its own (``texts``)."""
    content = content if isinstance(content, str) else ""
    try:
        return _one_liner(texts, tool, _parsed_arguments(raw_arguments), content)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return texts.fill("generic", tool=tool, pairs="", chars=f"{len(content):,}")


def _one_liner(texts: HermesTexts, tool: str, args: dict, content: str) -> str:
    chars = f"{len(content):,}"
    lines = content.count("\n") + 1 if content.strip() else 0
    fill = texts.fill
    if tool == "terminal":
        found = _EXIT_CODE.search(content)
        return fill("terminal", tool=tool, command=_shortened(_text_arg(args, "command"), 80), lines=lines,
                    exit=found.group(1) if found else "?")
    if tool == "read_file":
        return fill(tool, tool=tool, path=args.get("path", "?"), offset=args.get("offset", 1), chars=chars)
    if tool == "write_file":
        written = _text_arg(args, "content").count("\n") + 1 if args.get("content") else "?"
        return fill(tool, tool=tool, path=args.get("path", "?"), written=written)
    if tool == "search_files":
        found = _TOTAL_COUNT.search(content)
        return fill(tool, tool=tool, target=args.get("target", "content"), pattern=args.get("pattern", "?"),
                    path=args.get("path", "."), count=found.group(1) if found else "?")
    if tool == "patch":
        return fill(tool, tool=tool, mode=args.get("mode", "replace"), path=args.get("path", "?"), chars=chars)
    if tool in _BROWSER_TOOLS:
        url, ref = args.get("url", ""), args.get("ref", "")
        shape = "browser_url" if url else ("browser_ref" if ref else "browser_none")
        return fill(shape, tool=tool, url=url, ref=ref, chars=chars)
    if tool == "web_search":
        return fill(tool, tool=tool, query=args.get("query", "?"), chars=chars)
    if tool == "web_extract":
        urls = args.get("urls", [])
        first = urls[0] if isinstance(urls, list) and urls else "?"
        if isinstance(first, dict):
            first = first.get("url") or first.get("href") or "?"
        elif not isinstance(first, str):
            first = "?"
        more = fill("web_extract_more", more=len(urls) - 1) if isinstance(urls, list) and len(urls) > 1 else ""
        return fill(tool, tool=tool, url=f"{first}{more}", chars=chars)
    if tool == "delegate_task":
        return fill(tool, tool=tool, goal=_shortened(_text_arg(args, "goal"), 60), chars=chars)
    if tool == "execute_code":
        code = _text_arg(args, "code")
        preview = code[:60].replace("\n", " ") + ("..." if len(code) > 60 else "")
        return fill(tool, tool=tool, code=preview, lines=lines)
    if tool in _SKILL_TOOLS:
        return fill(tool, tool=tool, name=args.get("name", "?"), chars=chars)
    if tool == "vision_analyze":
        return fill(tool, tool=tool, question=_text_arg(args, "question")[:50], chars=chars)
    if tool == "memory":
        return fill(tool, tool=tool, action=args.get("action", "?"), target=args.get("target", "?"))
    if tool in ("todo", "clarify"):
        return fill(tool, tool=tool)
    if tool == "text_to_speech":
        return fill(tool, tool=tool, chars=chars)
    if tool == "cronjob":
        return fill(tool, tool=tool, action=args.get("action", "?"))
    if tool == "process":
        return fill(tool, tool=tool, action=args.get("action", "?"), session_id=args.get("session_id", "?"))
    pairs = "".join(fill("generic_pair", key=key, value=str(value)[:40]) for key, value in list(args.items())[:2])
    return fill("generic", tool=tool, pairs=pairs, chars=chars)
