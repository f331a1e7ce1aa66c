"""Hermes's texts at run time: the hermes-0.19 preset writes them where hermes-agent is installed, hermeslab's
own wording otherwise, and every run says which it wrote."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from hermeslab.context import hermes_texts
from hermeslab.context.assemble import assemble, sanitize_tool_pairs, split_summary
from hermeslab.context.hermes_texts import (HERMES_WORDING, HERMESLAB_WORDING, SWITCH_ENV_VAR, HermesTexts,
                                            installed_texts, load_installed, one_liner, texts_in_use)
from hermeslab.context.prune import prune_messages
from hermeslab.context.types import LONG_SUMMARY_PREFIX, is_summary_message
from hermeslab.policies.loading import load_config
from hermeslab.eval.replay import replay
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.recordings import Recording
from hermeslab.reference import venv as reference

REPO = Path(__file__).resolve().parent.parent
OFFLINE = REPO / "datasets" / "hermeslab_offline_sessions.jsonl"
#: Invented texts in the shape the dump gives (slots ``\x00name\x00``): what the preset writes with them.
FAKE = HermesTexts.from_dump({
    "hermes_version": "0.0-test", "summary_prefix": "<<OPEN>>", "end_marker": "<<CLOSE>>",
    "merged_header": "<<OWN>>", "merged_delimiter": "<<NEXT>>", "older_prefixes": ["<<OLD OPEN>>"],
    "duplicate_marker": "<<SAME AS LATER>>", "leaf_truncation": "~cut", "removed_call": "<<NO CALL>>",
    "screenshot_part": "<<NO SHOT>>", "stripped_image": "<<NO IMAGE>>", "snapshot_lead": "ASK=",
    "snapshot_note": "\n<<OLD ASK>>", "snapshot_cut": " ~", "one_liners": {
        "generic": "{\x00tool\x00}\x00pairs\x00 <\x00chars\x00>", "generic_pair": " \x00key\x00:\x00value\x00",
        "terminal": "{\x00tool\x00} `\x00command\x00` exit \x00exit\x00 / \x00lines\x00"}})


def _compressing_recording(config) -> tuple[Recording, object]:
    """An offline recording and its replay that compressed at least once under ``config``."""
    with OFFLINE.open(encoding="utf-8") as handle:
        for line in handle:
            recording = Recording.from_dict(json.loads(line))
            run = replay(recording, config, summariser=FixedSummariser(), fast=True)
            if any(record.changed for record in run.compressions):
                return recording, run
    pytest.fail("no offline recording compresses at this window")


@pytest.fixture
def fake_hermes(monkeypatch):
    """Hermes 'installed', with the invented texts above."""
    monkeypatch.delenv(SWITCH_ENV_VAR)
    monkeypatch.setattr(hermes_texts, "load_installed", lambda: FAKE)
    installed_texts.cache_clear()
    yield FAKE
    installed_texts.cache_clear()


def test_without_hermes_agent_a_run_works_and_says_it_used_hermeslab_wording(tmp_path, monkeypatch):
    monkeypatch.delenv(SWITCH_ENV_VAR)
    monkeypatch.setenv("HERMESLAB_HERMES_VENV", str(tmp_path / "not-installed"))
    installed_texts.cache_clear()
    config = load_config("hermes-0.19,model.context_length=4000")
    assert installed_texts() is None and texts_in_use(config.compression) == HERMESLAB_WORDING
    _, run = _compressing_recording(config)
    assert run.hermes_texts == HERMESLAB_WORDING
    summaries = [m for record in run.compressions for m in record.after if m.get("_compressed_summary")]
    assert summaries and all(LONG_SUMMARY_PREFIX in str(m["content"]) for m in summaries)
    assert not (tmp_path / "not-installed").exists()  # nothing was installed on the way


def test_the_preset_writes_hermess_texts_when_they_are_there(fake_hermes):
    config = load_config("hermes-0.19").compression
    assert texts_in_use(config) == HERMES_WORDING and texts_in_use(load_config("seed").compression) == HERMESLAB_WORDING
    head = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "on it"}]
    out, _ = assemble(head, "## Goal\nbody", [{"role": "assistant", "content": "next"}], cfg=config)
    summary = next(m for m in out if m.get("_compressed_summary"))
    assert summary["content"] == "<<OPEN>>\n## Goal\nbody\n\n<<CLOSE>>"
    assert split_summary(summary)[0] == "## Goal\nbody"
    # neither role fits: merged behind the message's own text under Hermes's header and delimiter
    merged, record = assemble(head, "body", [{"role": "user", "content": "again"}], cfg=config)
    assert record["summary_role"] == "merged" and merged[-1]["content"].startswith("<<OWN>>\nagain\n\n<<NEXT>>")
    assert is_summary_message({"role": "user", "content": merged[-1]["content"]})
    assert split_summary({"role": "user", "content": merged[-1]["content"]}) == ("body", "again")
    # a call left without its result, and no text: Hermes's removed-call text
    calls = [{"id": "a", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    kept, _ = sanitize_tool_pairs([{"role": "assistant", "content": "", "tool_calls": calls}], missing="drop",
                                  removed_call_text=FAKE.removed_call)
    assert kept == [{"role": "assistant", "content": "<<NO CALL>>"}]


def test_pruning_writes_hermess_markers_and_one_liners(fake_hermes):
    cfg = load_config("hermes-0.19").compression
    output = "x" * 300
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "a", "n": 2}'}}
             for i in range(3)]
    messages = [{"role": "user", "content": "go"}]
    for i, call in enumerate(calls):
        messages += [{"role": "assistant", "content": "", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": call["id"], "content": output if i < 2 else "y" * 400}]
    pruned, _ = prune_messages(messages, prune_boundary=len(messages), cfg=cfg)
    assert pruned[2]["content"] == "<<SAME AS LATER>>"  # the older of two identical outputs
    assert pruned[4]["content"] == "{lookup} q:a n:2 <300>"
    assert pruned[6]["content"] == "{lookup} q:a n:2 <400>"


def test_one_liners_follow_hermess_rules_for_which_values_they_show():
    terminal = one_liner(FAKE, "terminal", json.dumps({"command": "c" * 100}), '{"exit_code": 2}\nmore\n')
    assert terminal == "{terminal} `" + "c" * 77 + "...` exit 2 / 3"
    assert one_liner(FAKE, "terminal", "not json", "") == "{terminal} `` exit ? / 0"
    generic = one_liner(FAKE, "anything", json.dumps({"a": "v" * 50, "b": 1, "c": 2}), "z" * 1234)
    assert generic == "{anything} a:" + "v" * 40 + " b:1 <1,234>"


def test_the_switch_turns_hermess_texts_off(monkeypatch):
    monkeypatch.setattr(hermes_texts, "load_installed", lambda: FAKE)
    installed_texts.cache_clear()
    assert installed_texts() is None  # the suite runs with the switch off
    monkeypatch.setenv(SWITCH_ENV_VAR, "on")
    installed_texts.cache_clear()
    assert installed_texts() is FAKE
    installed_texts.cache_clear()


# ---------------------------------------------------------------- with the real hermes-agent 0.19.0


def test_the_texts_look_for_hermes_where_the_reference_harness_installs_it(tmp_path, monkeypatch):
    monkeypatch.setenv(reference.VENV_ENV_VAR, str(tmp_path))
    assert reference.default_venv_path() == tmp_path
    assert load_installed() is None  # no finished install there


@pytest.fixture(scope="module")
def real_texts() -> HermesTexts:
    venv = reference.default_venv_path()
    if reference.read_marker(venv) is None:
        pytest.skip(f"the hermes-agent 0.19.0 reference environment is not installed at {venv}")
    texts = load_installed(venv)
    assert texts is not None and texts.version == "0.19.0"
    return texts


def test_the_repository_holds_none_of_hermess_texts(real_texts):
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    sentences = [real_texts.summary_prefix[:80], real_texts.end_marker, real_texts.merged_header,
                 real_texts.merged_delimiter, real_texts.duplicate_marker, real_texts.snapshot_lead,
                 real_texts.snapshot_note.strip(), real_texts.stripped_image, real_texts.screenshot_part,
                 *(part for template in real_texts.one_liners.values() for part in template.split("\x00")[::2]
                   if len(part) >= 16)]  # the one-liners' literal pieces long enough to be Hermes's words
    for name in files:
        path = REPO / name
        if not path.is_file() or path.stat().st_size > 5_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        found = [s for s in sentences if s and s in text]
        assert not found, f"{name} holds Hermes's text {found[0]!r}"


def test_one_liners_are_hermess_own_on_random_calls(real_texts, tmp_path):
    rng = random.Random(7)
    tools = ["terminal", "read_file", "write_file", "search_files", "patch", "browser_click", "web_search",
             "web_extract", "delegate_task", "execute_code", "skill_view", "vision_analyze", "memory", "todo",
             "cronjob", "process", "bash", "get_order"]
    values = ["x", "a" * 90, 5, None, True, ["u1", "u2"], [{"url": "http://h"}], {"k": "v"}, "l\n" * 30, ""]
    keys = ["command", "path", "offset", "content", "pattern", "target", "mode", "url", "ref", "query", "urls",
            "goal", "code", "name", "question", "action", "session_id", "other"]
    cases = []
    for _ in range(400):
        arguments = {key: rng.choice(values) for key in rng.sample(keys, rng.randint(0, 4))}
        raw = rng.choice([json.dumps(arguments), json.dumps(arguments), "", "not json"])
        content = rng.choice(['{"exit_code": 3, "total_count": 12}\n' * rng.randint(0, 9), "y" * rng.randint(0, 999)])
        cases.append([rng.choice(tools), raw, content])
    code = ("import json, sys\nfrom agent.context_compressor import _summarize_tool_result as line\n"
            "print(json.dumps([line(*case) for case in json.load(sys.stdin)]))")
    python = reference.venv_python(reference.default_venv_path())
    done = subprocess.run([str(python), "-I", "-c", code], input=json.dumps(cases), capture_output=True, text=True,
                          env={"HERMES_HOME": str(tmp_path)}, cwd=tmp_path, timeout=120, check=True)
    theirs = json.loads(done.stdout)
    assert [one_liner(real_texts, *case) for case in cases] == theirs


def test_the_replay_command_says_whose_wording_each_run_wrote(capsys):
    from hermeslab.cli import main

    assert main(["replay", str(OFFLINE), "--config", "hermes-0.19,model.context_length=4000", "--limit", "1"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert rows and all(row["hermes_texts"] == HERMESLAB_WORDING for row in rows)


def test_the_replay_invariants_count_summaries_in_hermess_wording(fake_hermes):
    """Two summaries in one output are two whoever worded them (counting hermeslab's opening alone read 0
    double summaries for hermes-0.19 once it wrote Hermes's texts)."""
    from hermeslab.context.types import SUMMARY_PREFIX
    from hermeslab.eval.replay_compression import summaries_in

    installed_texts()  # the texts are read, as in a process that wrote them
    two = [{"role": "user", "content": "<<OPEN>>\nfirst\n<<CLOSE>>"},
           {"role": "assistant", "content": "<<OLD OPEN>> second"}]
    assert summaries_in(two) == 2
    assert summaries_in([{"role": "user", "content": f"{SUMMARY_PREFIX} and <<OPEN>> again"}]) == 2
    assert summaries_in([{"role": "user", "content": "no summary here"}]) == 0
