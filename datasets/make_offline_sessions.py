"""Record hermeslab's own sessions: the offline model working on a snapshot of hermeslab's source.

Each session is a scripted multi-turn chat with hermeslab's offline model and
its real tools (read, list, search, write, terminal, todo) in a workspace made
from a fixed commit of this repository, run by the real agent loop with
compression at a small window and logged to a lab database. The recording is
read back with ``hermeslab.recordings.lab.import_lab`` (the full transcript
across compressions) and written in the recorded-session format.

Everything that varies between runs is taken out: session ids become
``s0, s1, ...`` and the workspace lives at a temporary path the transcript
never shows, so running the script twice gives the same bytes (with the same
hermeslab and tiktoken). Run it from the repository root:

    .venv/bin/python datasets/make_offline_sessions.py [--out FILE] [--only N]
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from hermeslab.core.config import Config
from hermeslab.core.tokens import TokenCounter
from hermeslab.eval.recording import write_recordings
from hermeslab.eval.replay_compression import FixedSummariser, replay_session
from hermeslab.policies.loading import apply_preset, load_config
from hermeslab.providers import OfflineModel
from hermeslab.recordings import Recording
from hermeslab.recordings.lab import import_lab
from hermeslab.runtime import Runtime

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "datasets" / "hermeslab_offline_sessions.jsonl"
README = ROOT / "datasets" / "README.md"
FIGURES_START, FIGURES_END = "<!-- figures: written by make_offline_sessions.py -->", "<!-- end of figures -->"
REPLAY_WINDOWS = (4_000, 6_000, 8_000)
REPLAY_PRESETS = ("seed", "hermes-0.19")
#: The commit whose source tree is the workspace (``git archive`` of hermeslab/ and the README).
SNAPSHOT = "b5f4694778591fbd08675c02c7324e7f33649a26"
SYSTEM_PROMPT = (
    "You are a careful coding assistant working in a checkout of the hermeslab repository through tools. "
    "Read files and run commands before answering questions about the code; never invent file contents."
)
LICENSE = "same as the hermeslab repository (recorded by its own offline model)"


@dataclass(frozen=True)
class Task:
    """One session: which package and files it works on, the window, and how compression is applied."""

    name: str
    package: str
    files: tuple[str, str]
    word: str
    context_length: int
    in_place: bool


def explore(task: Task) -> list[str]:
    """Get to know a package: list it, read two modules, search, count, take notes."""
    first, second = (f"{task.package}/{name}" for name in task.files)
    note = f"notes/{task.name}.md"
    return [
        f"list the directory {task.package}",
        f"read {first}",
        f'search for "def " in {task.package}',
        f"read {second}",
        f'run `grep -c "import" {first}`',
        f'search for "{task.word}" in {task.package}',
        f"add todos: document {task.files[0]}; check the tests of {task.files[1]}",
        f'write "{task.package} holds {task.files[0]} and {task.files[1]}; both mention {task.word}." to {note}',
        f"read {note} and list the directory notes",
        f'run `grep -n "{task.word}" {second}`',
        "show my todos",
        f'search for "class " in {task.package}',
    ]


def review(task: Task) -> list[str]:
    """Review one module: read it, look for errors and loose ends, count, write a review."""
    first, second = (f"{task.package}/{name}" for name in task.files)
    note = f"reviews/{task.files[0]}.md"
    return [
        f"read {first}",
        f'search for "raise " in {first}',
        f'run `grep -c "def " {first}`',
        f'search for "{task.word}" in hermeslab',
        f"read {second}",
        f'run `head -n 12 {second}`',
        f"add todos: review error messages in {task.files[0]}; compare with {task.files[1]}",
        f'write "Reviewed {task.files[0]}: errors are raised with a reason; see also {task.files[1]}." to {note}',
        f"read {note}",
        f'search for "return " in {second}',
        "show my todos",
        f"list the directory {task.package}",
        f'run `grep -c "{task.word}" {second}`',
    ]


def trace(task: Task) -> list[str]:
    """Follow one word through the code base: where it is defined, used and tested."""
    first, second = (f"{task.package}/{name}" for name in task.files)
    return [
        f'search for "{task.word}" in hermeslab',
        f"read {first}",
        f"list the directory {task.package}",
        f'run `grep -rn "{task.word}" {task.package}`',
        f"read {second}",
        f'search for "{task.word}" in {task.package}',
        f"add todos: trace {task.word} into {task.files[1]}",
        f'write "{task.word}: defined near {task.files[0]}, used in {task.files[1]}." to trace/{task.word}.md',
        f"read trace/{task.word}.md and list the directory trace",
        "show my todos",
        f'run `grep -c "{task.word}" {first}`',
    ]


SCRIPTS = {"explore": explore, "review": review, "trace": trace}

#: (package, two files in it, a word to look for) — modules of 1-12 KB, so one read fits an 8K window.
AREAS = (
    ("hermeslab/recovery", ("backoff.py", "log.py"), "delay"),
    ("hermeslab/recovery", ("repair.py", "truncation.py"), "finish_reason"),
    ("hermeslab/tools", ("workspace.py", "registry.py"), "ToolError"),
    ("hermeslab/tools", ("terminal.py", "todo.py"), "timeout"),
    ("hermeslab/context", ("types.py", "turns.py"), "summary"),
    ("hermeslab/context", ("budget.py", "estimate.py"), "threshold"),
    ("hermeslab/context", ("presets.py", "baselines.py"), "preset"),
    ("hermeslab/providers", ("base.py", "__init__.py"), "Usage"),
    ("hermeslab/providers/offline", ("model.py", "conversation.py"), "digest"),
    ("hermeslab/notebook", ("live.py", "budget.py"), "gauge"),
    ("hermeslab/notebook", ("extension.py", "settings.py"), "Hermes"),
    ("hermeslab/store", ("__init__.py", "lab.py"), "session_id"),
)
#: Windows the sessions run at: every one crosses its compression threshold at least once.
WINDOWS = (6_000, 8_000)


def tasks() -> list[Task]:
    """Every area with every script: 36 sessions, alternating windows and compression modes."""
    out = []
    for script in SCRIPTS:
        for index, (package, files, word) in enumerate(AREAS):
            number = len(out)
            out.append(Task(name=f"{script}-{package.rsplit('/', 1)[-1]}-{Path(files[0]).stem}", package=package,
                            files=files, word=word, context_length=WINDOWS[number % 2], in_place=index % 3 == 2))
    return out


def snapshot(target: Path) -> None:
    """Unpack hermeslab's source tree and README at SNAPSHOT into ``target``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", SNAPSHOT, "hermeslab", "README.md"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")


def record(task: Task, workspace: Path, lab: Path) -> Recording:
    """Run one task's chat in ``workspace`` and read it back from ``lab``."""
    config = load_config(None).with_overrides({
        "tools.workspace": str(workspace), "tools.terminal.enabled": True, "store.path": str(lab),
        "model.context_length": task.context_length, "compression.in_place": task.in_place,
        "agent.system_prompt": SYSTEM_PROMPT,
        # No memory files, skills or background reviews: the chores need only the file tools.
        "memory.memory_enabled": False, "memory.user_profile_enabled": False, "memory.nudge_interval": 0,
        "skills.enabled": False})
    with Runtime(config, source="dataset") as runtime:
        # The model answers in-process and turns are written in the background: the
        # transcript is the same as over HTTP with durable turns, in a fraction of the time.
        runtime.agent.provider = OfflineModel()
        runtime.writer.durable_turns = False
        for text in SCRIPTS[task.name.split("-", 1)[0]](task):
            runtime.agent.chat(text)
        session_id, tools = runtime.agent.session.id, runtime.agent.tools.schemas()
    recording = import_lab(lab, session_id, tools=tools)
    names = {sid: f"s{index}" for index, sid in enumerate(recording.meta["lineage"])}
    points = [{**point, "session_id": names[point["session_id"]],
               "new_session_id": names.get(point["new_session_id"])} for point in recording.meta["compression_points"]]
    # The config hash covers the temporary workspace path, so it differs on every run.
    meta = {key: value for key, value in recording.meta.items() if key != "config_hash"}
    meta.update(task=task.name, script=task.name.split("-", 1)[0], package=task.package, in_place=task.in_place,
                lineage=list(names.values()), compression_points=points, workspace=f"hermeslab@{SNAPSHOT[:12]}")
    return Recording(id=f"hermeslab_offline/{task.name}", messages=recording.messages, tools=recording.tools,
                     source=f"hermeslab offline model, datasets/make_offline_sessions.py, workspace hermeslab@{SNAPSHOT}",
                     model=recording.model, license=LICENSE, meta=meta)


def build(selected: list[Task], workers: int = 4) -> list[Recording]:
    """Record ``selected`` tasks, each in a fresh copy of the snapshot with a lab of its own.

    Sessions share nothing, so they run on a few threads (most of a session's
    time is spent waiting for its lab file) and come back in task order.
    """
    with tempfile.TemporaryDirectory(prefix="hermeslab-datasets-") as tmp:
        source = Path(tmp) / "snapshot"
        snapshot(source)

        def run(number: int) -> Recording:
            workspace = Path(tmp) / f"ws{number}"
            shutil.copytree(source, workspace)
            return record(selected[number], workspace, Path(tmp) / f"lab{number}.duckdb")

        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(run, range(len(selected))))


def file_figures(recordings: list[Recording], size: int) -> str:
    """The README's table of what the file holds: counts and sizes, read off the recordings alone."""
    messages = [len(r.messages) for r in recordings]
    users = [sum(m["role"] == "user" for m in r.messages) for r in recordings]
    names = Counter(call["function"]["name"] for r in recordings for m in r.messages for call in m.get("tool_calls", []))
    calls = [sum(len(m.get("tool_calls", [])) for m in r.messages) for r in recordings]
    chars = [sum(len(m["content"]) + sum(len(c["function"]["arguments"]) for c in m.get("tool_calls", []))
                 for m in r.messages) for r in recordings]
    points = [p for r in recordings for p in r.meta["compression_points"]]
    per_session = [len(r.meta["compression_points"]) for r in recordings]
    scripts = Counter(r.meta["script"] for r in recordings)
    modes, triggers = Counter(p["mode"] for p in points), Counter(p["trigger"] for p in points)
    rows = [
        ("Sessions", f"{len(recordings)} ({', '.join(f'{n} {name}' for name, n in scripts.items())})"),
        ("File size", f"{size:,} bytes ({size / 1e6:.1f} MB)"),
        ("Messages", f"{sum(messages):,}; per session min / median / max {_spread(messages)}"),
        ("User turns per session", f"{min(users)}–{max(users)}"),
        ("Tool calls", (f"{sum(calls):,} ({', '.join(f'{name} {n}' for name, n in names.most_common())}); "
                        f"{min(calls)}–{max(calls)} per session")),
        ("Characters per session (contents and arguments)", f"min / median / max {_spread(chars)}"),
        ("Tools offered", ", ".join(t["function"]["name"] for t in recordings[0].tools or [])),
        ("Compressions while recording",
         f"{len(points)} ({min(per_session)}–{max(per_session)} per session): "
         + ", ".join(f"{n} {mode.replace('_', ' ')}" for mode, n in sorted(modes.items())) + "; "
         + ", ".join(f"{n} {trigger}" for trigger, n in sorted(triggers.items()))),
    ]
    return "\n".join(["| | |", "|---|---|"] + [f"| {label} | {value} |" for label, value in rows]) + "\n"


def measured_figures(recordings: list[Recording]) -> str:
    """Token sizes and replayed compressions, as hermeslab measures them when the file is made."""
    counter = TokenCounter()
    tokens = [counter.count_request(r.messages, r.tools) for r in recordings]
    lines = [(f"Tokens per session, tool schemas included (tiktoken cl100k_base): min / median / max "
              f"{_spread(tokens)}; {sum(tokens):,} in all. The tool schemas are "
              f"{counter.count_tools(recordings[0].tools):,} tokens of every request."), "",
             ("Compressions per session when replayed with `hermeslab.eval.replay_compression.replay_session` "
              "and a fixed summary (min / median / max):"), "",
             "| Window | " + " | ".join(f"`{preset}`" for preset in REPLAY_PRESETS) + " |",
             "|---|" + "---|" * len(REPLAY_PRESETS)]
    for window in REPLAY_WINDOWS:
        cells = []
        for preset in REPLAY_PRESETS:
            config = apply_preset(Config(), preset)
            counts = [len(replay_session(r.messages, r.tools, config=config, summariser=FixedSummariser(),
                                         context_length=window).compressions) for r in recordings]
            cells.append(_spread(counts))
        lines.append(f"| {window:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _spread(values: list[int]) -> str:
    return " / ".join(f"{v:,}" for v in (min(values), int(statistics.median(values)), max(values)))


def update_readme(text: str) -> None:
    """Replace the figures between the README's markers with ``text``."""
    readme = README.read_text(encoding="utf-8")
    head, rest = readme.split(FIGURES_START, 1)
    _, tail = rest.split(FIGURES_END, 1)
    README.write_text(f"{head}{FIGURES_START}\n{text}{FIGURES_END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", type=int, help="record only the first N sessions")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    selected = tasks()[: args.only]
    recordings = build(selected)
    count = write_recordings(args.out, recordings)
    print(f"wrote {count} sessions to {args.out} ({args.out.stat().st_size:,} bytes) "
          f"in {time.perf_counter() - started:.1f} s")
    if args.out == OUT and args.only is None:
        update_readme(file_figures(recordings, OUT.stat().st_size) + "\n" + measured_figures(recordings))
        print(f"updated the figures in {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
