"""The ``hermeslab`` command: demo, chat, serve, sessions, mcp-server, import, export, ab, replay, exam.

Each subcommand imports what it needs when it runs: the agent stack (DuckDB,
pandas, the openai SDK) takes about a second to import, which ``--help`` and a
``sessions`` that finds no lab should not wait for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd
    from inspect_ai.log import EvalLog

    from .core.config import Config
    from .eval.exam import ExamSettings

DESCRIPTION = ("Run and inspect long-running agent sessions: a scripted demo, an interactive chat, the offline "
               "model as an OpenAI-compatible server, the lab's logged sessions, and replays of recorded sessions "
               "under different configs.")

EPILOG = ("Where the lab (the DuckDB log) goes, first match wins: --lab, the config's store.path, the folder "
          "$HERMESLAB_HOME, the folder .hermeslab in the current directory. Memory files (MEMORY.md, USER.md) go "
          "beside the lab unless memory.path says otherwise. Run 'hermeslab COMMAND --help' for a command's "
          "options.")


def _changelog(releases: int = 30) -> str:
    """A long file for the demo to read, so the context crosses the threshold and gets compressed."""
    lines = ["# Changelog", ""]
    for n in range(releases, 0, -1):
        lines += [f"## 1.{n}.0", f"- restock() now logs batch RS-{1000 + 7 * n} with its supplier and amount.",
                  f"- in_stock() answers from a cache refreshed every {5 * n} seconds.",
                  f"- Fixed issue #{200 + n}: negative amounts were accepted for SKU W-{n:03d}.", ""]
    return "\n".join(lines)


DEMO_FILES = {
    "README.md": "# inventory-service\n\nA tiny service that tracks stock levels.\nRun the tests with `python -m pytest`.\n",
    "src/inventory.py": (
        "STOCK = {'widget': 12, 'gadget': 0}\n\n\n"
        "def in_stock(item: str) -> bool:\n"
        "    # TODO: treat unknown items as an error instead of False\n"
        "    return STOCK.get(item, 0) > 0\n\n\n"
        "def restock(item: str, amount: int) -> int:\n"
        "    # TODO: reject negative amounts\n"
        "    STOCK[item] = STOCK.get(item, 0) + amount\n"
        "    return STOCK[item]\n"
    ),
    "docs/CHANGELOG.md": _changelog(),
    "tests/test_inventory.py": (
        "from src.inventory import in_stock, restock\n\n\n"
        "def test_restock():\n    assert restock('gadget', 3) == 3\n    assert in_stock('gadget')\n"
    ),
}

#: A small window, so that the demo crosses the compression threshold after reading the changelog.
DEMO_CONTEXT_LENGTH = 5_400

DEMO_SCRIPT = [
    "Who are you?",
    "list files",
    "read src/inventory.py",
    "read docs/CHANGELOG.md",
    'search for "TODO" in src',
    "add todos: reject negative restock amounts; treat unknown items as errors",
    'write "Stock levels are checked by in_stock(); restock() adds units." to NOTES.md',
    "read NOTES.md and list the directory src",
    "run `python -c \"print(6 * 7)\"`",
    "show my todos",
]


LAB_HELP = ("lab database file (default: store.path of the config, else lab.duckdb in $HERMESLAB_HOME, "
            "else .hermeslab/lab.duckdb in the current folder)")
CONFIG_HELP = ("a YAML config (Hermes key names), a preset name (seed, hermes-0.19) or BASE,key=value,... "
               "(compression.preset applies first)")


def _load_config(source: str | None) -> Config:
    """``--config``: a YAML file, a preset name or ``BASE,key=value,...`` (as ``hermeslab ab`` takes them)."""
    from .core.config import ConfigError
    from .policies.loading import load_config

    try:
        return load_config(source)
    except (ConfigError, OSError) as exc:
        raise SystemExit(f"hermeslab: {exc}") from None


def _lab_path(args: argparse.Namespace, config: Config | None = None) -> Path:
    """``--lab``, else the config's ``store.path``, else ``lab.duckdb`` in ``$HERMESLAB_HOME``, else in ``.hermeslab``.

    The config is read only when there is no ``--lab``.
    """
    from .runtime import lab_path

    if args.lab:
        return Path(args.lab).expanduser()
    return lab_path(config if config is not None else _load_config(args.config))


def cmd_demo(args: argparse.Namespace) -> int:
    import tempfile

    import pandas as pd

    from .console import ConsoleTranscript
    from .plots import plot_token_usage
    from .runtime import Runtime
    from .store import open as open_lab

    config = _load_config(args.config)
    workspace = Path(args.workspace) if args.workspace else Path(tempfile.mkdtemp(prefix="hermeslab-demo-"))
    for name, text in DEMO_FILES.items():
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.write_text(text, encoding="utf-8")
    # The script uses file, terminal and todo tools only: no memory or skills (a scripted demo must not write
    # the user's memory, and their schemas would take a tenth of the small window).
    overrides = {"tools.workspace": str(workspace), "tools.terminal.enabled": True,
                 "model.context_length": args.context_length, "memory.memory_enabled": False,
                 "memory.user_profile_enabled": False, "memory.nudge_interval": 0, "skills.enabled": False}
    if args.lab:
        overrides["store.path"] = args.lab
    config = config.with_overrides(overrides)

    print(f"hermeslab demo · workspace {workspace}")
    with Runtime(config, source="demo") as runtime:
        if (notice := runtime.lab_notice()) is not None:
            print(notice)
        print(f"model: {config.model.name} via {runtime.provider_handle.provider.name}"
              f" ({runtime.provider_handle.server.base_url if runtime.provider_handle.server else config.model.base_url}) · log: {runtime.lab_path}\n")
        runtime.bus.subscribe(ConsoleTranscript(context_length=config.model.context_length))
        results = []
        for text in DEMO_SCRIPT:
            print(f"you> {text}")
            print("hermes> ", end="", flush=True)
            results.append(runtime.agent.chat(text))
        if all(result.status == "failed" for result in results):
            raise SystemExit(f"hermeslab demo: every turn failed ({len(results)} of {len(results)}), so there is "
                             f"no usage to show; the first: {results[0].error}")
        session_id = runtime.agent.session.id
        lab_path = runtime.lab_path
        compactor = runtime.agent.compactor
        threshold = compactor.resolution.threshold_tokens if compactor is not None else None

    lab = open_lab(lab_path)
    usage = pd.concat([lab.turn_usage(sid).assign(session=sid[-6:]) for sid in lab.lineage(session_id)],
                      ignore_index=True)
    print("Per-turn usage (a compression continues the conversation in a child session):")
    print(usage.to_string(index=False))
    plot_path = Path(args.plot or lab_path.with_name(f"token_usage_{session_id}.png"))
    figure = plot_token_usage(session_id, lab=lab, context_length=config.model.context_length,
                              threshold_tokens=threshold)
    figure.savefig(plot_path, dpi=110)
    print(f"\nsession {session_id} logged to {lab_path}\nplot saved to {plot_path}")
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    from .context.budget import explain_threshold
    from .terminal import TerminalChat, read_inputs

    config = _load_config(args.config)
    if args.workspace:
        config = config.with_overrides({"tools.workspace": args.workspace})
    if args.lab:
        config = config.with_overrides({"store.path": args.lab})
    # Starting takes a second or two (imports, the local server): say so before it starts.
    hosted = config.model.base_url or config.model.api_key
    what = f"the agent for {config.model.name}" if hosted else "the offline model"
    print(f"hermeslab chat · starting {what}…", flush=True)
    chat = TerminalChat(config)
    try:
        print(f"hermeslab chat · {config.model.name} · session {chat.runtime.agent.session.id} · "
              f"{explain_threshold(chat.runtime.resolution)} · /help for commands, /quit to leave", flush=True)
        if (notice := chat.runtime.lab_notice()) is not None:
            print(notice, flush=True)
        for text in read_inputs():
            if not chat.handle(text):
                break
    finally:
        chat.close()
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .providers import LocalServer, OfflineModel
    from .providers.faults import FaultSchedule, serve_with_faults

    schedule = None
    if args.faults:
        try:
            schedule = FaultSchedule.from_file(args.faults)
        except ValueError as exc:
            raise SystemExit(f"hermeslab: {exc}") from None
    options = {"host": args.host, "port": args.port, "chunk_delay": args.chunk_delay,
               "personality": args.personality, "context_window": args.context_window}
    try:
        if schedule is not None:
            server = serve_with_faults(OfflineModel(), schedule, **options)
        else:
            server = LocalServer(OfflineModel(), **options)
    except ValueError as exc:
        raise SystemExit(f"hermeslab: {exc}") from None
    url = server.start()
    faults = f" with the faults of {args.faults}" if args.faults else ""
    manner = f", answering as {args.personality} would" if args.personality else ""
    print(f"hermeslab offline model served at {url}{faults}{manner} (Ctrl+C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    path = _lab_path(args)
    if not path.exists():
        print(f"no lab database at {path}")
        return 1
    import pandas as pd

    from .store import open as open_lab

    sessions = open_lab(path).sessions()
    columns = ["id", "parent_session_id", "source", "model", "started_at", "end_reason", "api_call_count",
               "input_tokens", "output_tokens", "estimated_calls", "message_count"]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(sessions[[c for c in columns if c in sessions.columns]].to_string(index=False))
    return 0


def cmd_mcp_server(args: argparse.Namespace) -> int:
    from .mcp_server import serve

    serve(_lab_path(args), http_port=args.http, host=args.host)
    return 0


#: The format names the older ``hermeslab import KIND PATH`` form takes first.
LEGACY_IMPORT_KINDS = ("openai", "hermes-state", "lab")
#: Every format ``hermeslab import`` reads, for ``--help`` (which imports no importer); a test keeps it in step.
IMPORT_FORMATS = ("openai", "hermes-state", "lab", "claude-code", "codex", "openhands", "openhands-sdk", "swe-agent",
                  "mini-swe-agent", "inspect")


def cmd_import(args: argparse.Namespace) -> int:
    from .eval.importers import ImportOptions, format_named, import_paths
    from .eval.recording import write_recordings
    from .recordings import RecordingProblem

    paths = list(args.paths)
    name = args.format
    if name is None and len(paths) > 1 and paths[0] in LEGACY_IMPORT_KINDS and not Path(paths[0]).exists():
        name = paths.pop(0)  # the older ``hermeslab import KIND PATH`` form
    if name == "lab" and not args.session:
        raise SystemExit("hermeslab: import lab needs --session ID")
    out = Path(args.out) if args.out else Path(f"{Path(paths[0]).stem}.recordings.jsonl")
    try:
        source_format = format_named(name) if name else None
        options = ImportOptions(session=args.session, config=_load_config(args.config))
        report = import_paths(paths, source_format=source_format, options=options)
        unwritable: list[RecordingProblem] = []
        written = write_recordings(out, report.recordings, problems=unwritable)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"hermeslab: {exc}") from None
    for taken in report.taken:
        print(f"took {taken}")
    skipped = [str(skip) for skip in report.skipped] + [str(problem) for problem in unwritable]
    for line in skipped:
        print(f"skipped {line}")
    print(f"imported {written} recording(s) from {', '.join(paths)} into {out}; {len(skipped)} skipped")
    return 1 if skipped else 0


def cmd_export(args: argparse.Namespace) -> int:
    from .notebook.export import export_target

    if args.format == "inspect":
        return _export_inspect(args)
    if len(args.session_id) != 1:
        raise SystemExit(f"hermeslab: export --format {args.format} takes one SESSION, got {len(args.session_id)}")
    try:  # checked before any work, so a mistyped path costs nothing
        target = export_target(args.out, args.format) if args.out else None
    except ValueError as exc:
        raise SystemExit(f"hermeslab: {exc}") from None
    config = _load_config(args.config)
    path = _lab_path(args, config)
    if not path.exists():
        print(f"no lab database at {path}")
        return 1
    from .recordings import recording_line
    from .recordings.lab import builtin_tool_schemas, import_lab

    try:
        recording = import_lab(path, args.session_id[0])
        recording.tools = builtin_tool_schemas(config, recording.messages)
        if args.format == "md":
            from .notebook.export import markdown_transcript

            text = markdown_transcript(recording.to_dict())
        else:
            text = recording_line(recording) + "\n"
    except ValueError as exc:  # an unknown session, or a transcript the format refuses (RecordingError)
        raise SystemExit(f"hermeslab: {exc}") from None
    if target is None:
        sys.stdout.write(text)
        return 0
    target.write_text(text, encoding="utf-8")
    print(f"exported {recording.id} ({len(recording.messages)} messages, {recording.meta['compressions']} "
          f"compression(s), sessions {' → '.join(recording.meta['lineage'])}) to {target}")
    return 0


def _export_inspect(args: argparse.Namespace) -> int:
    """``export --format inspect``: the lab's conversations (or those of the sessions named) as Inspect logs."""
    from .eval.exporters.inspect_files import log_folder, write_logs
    from .eval.exporters.inspect_lab import lab_logs, read_conversations

    if not args.out:
        raise SystemExit("hermeslab: export --format inspect needs --out DIR, an existing folder for the logs")
    try:  # checked before any work, so a mistyped folder or a missing extra costs nothing
        log_folder(args.out)
    except (ValueError, ImportError) as exc:
        raise SystemExit(f"hermeslab: {exc}") from None
    path = _lab_path(args, _load_config(args.config))
    if not path.exists():
        print(f"no lab database at {path}")
        return 1
    try:
        logs = lab_logs(read_conversations(path, args.session_id), path.name)
        written = write_logs(logs, args.out)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"hermeslab: {exc}") from None
    for log, target in zip(logs, written):
        print(f"exported {len(log.samples or [])} conversation(s) on {log.eval.model} to {target}")
    return 0


def cmd_ab(args: argparse.Namespace) -> int:
    import warnings

    import pandas as pd

    from .eval.ab import (
        FlatSweepWarning,
        ReplayCell,
        config_label,
        failure_line,
        run_ab,
    )
    from .eval.stats import paired_compare
    from .eval.tables import LEGEND, PLAIN_COLUMNS, default_price_note
    from .policies.loading import load_config

    configs = {config_label(spec): spec for spec in args.config}
    if len(configs) < len(args.config):
        raise SystemExit("hermeslab: two --config options have the same name (a file's stem, else the text)")
    if len(configs) < 2:
        raise SystemExit("hermeslab: ab needs at least two --config options")
    _inspect_folder(args.inspect_log)
    baseline = next(iter(configs))
    if (misuse := _scheduler_misuse(args)) is not None:
        print(f"hermeslab ab: {misuse}", file=sys.stderr)
        return 2
    executor, cluster = args.executor or "processes", None
    if args.scheduler is not None:
        from .eval.dask_cluster import ClusterError, connect, worker_cpu_seconds

        try:
            hermes_texts = any(load_config(spec).compression.hermes_texts for spec in configs.values())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"hermeslab: {exc}") from None
        try:
            executor = cluster = connect(args.scheduler, timeout=args.scheduler_timeout, hermes_texts=hermes_texts)
        except (ClusterError, ImportError) as exc:
            print(f"hermeslab ab: {exc}", file=sys.stderr)
            return 2
    try:
        cpu_before = worker_cpu_seconds(cluster) if cluster is not None else {}
        exam = _exam_settings(args.exam, {name: load_config(spec) for name, spec in configs.items()}
                              if args.exam is not None else {})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("ignore", UserWarning)  # skipped lines are listed below
            warnings.simplefilter("always", FlatSweepWarning)
            cell = ReplayCell(exam=exam, allow_summary_fallback=args.allow_summary_fallback)
            frame = run_ab(args.files, configs, out=args.out, executor=executor, workers=args.workers,
                           limit=args.limit, cell=cell)
        if cluster is not None:
            ran_on = _cluster_line(cluster, args.scheduler, cpu_before)
        tables = {name: paired_compare(frame, baseline, name, args.metric or None, n_resamples=args.resamples,
                                       seed=args.seed) for name in list(configs)[1:]}
    except (OSError, ValueError, ImportError) as exc:
        raise SystemExit(f"hermeslab: {exc}") from None
    finally:
        if cluster is not None:
            cluster.close()
    failed = frame[frame["status"] != "ok"]
    left_out, hidden = _ab_left_out(frame, args.metric, args.all_metrics)
    tables = {name: _without(table, left_out + hidden) for name, table in tables.items()}
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    for problem in frame.attrs["problems"]:
        print(f"skipped {problem}", file=sys.stderr)
    for row in failed.itertuples():
        print(f"failed {row.session_id} under {row.config}: {row.error}", file=sys.stderr)
    for row in frame[frame["note"].notna()].itertuples():
        print(f"warning: {row.session_id} under {row.config} kept, flagged: {row.note}", file=sys.stderr)
    print(f"{frame['session_id'].nunique()} sessions x {len(configs)} configs, {len(failed)} failed cell(s), "
          f"run {frame.attrs['run_id']}" + (f", results in {args.out}" if args.out else ""))
    if cluster is not None:
        print(ran_on)
    for line in frame.attrs["nothing_compressed"] + frame.attrs["compacting_every_call"]:
        print(f"note: {line}")
    if (price := default_price_note(frame)) is not None:
        print(f"note: {price}")
    if hidden:
        print(f"{len(hidden)} metric(s) hidden: no config changed them in any session (--all-metrics shows them)")
    if all(table.empty for table in tables.values()):
        print("nothing to compare: no config changed any other metric in any session")
        for table in tables.values():
            for metric, why in table.attrs.get("left_out", {}).items():
                print(f"not compared: {metric}, {why}")
        tables = {}
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        for name, table in tables.items():
            units = frame.loc[frame["config"] == name, "token_unit"].dropna().unique() \
                if "token_unit" in frame.columns else []
            unit = f"; token figures in {', '.join(units)}" if len(units) else ""
            print(f"\n{name} vs {baseline} (difference B - A per session, 95% bootstrap CI{unit}):")
            print(table.rename(columns=PLAIN_COLUMNS).to_string(
                float_format=lambda v: f"{v:,.0f}" if abs(v) >= 1_000 else f"{v:.4g}"))
            for metric, why in table.attrs.get("left_out", {}).items():
                print(f"not compared: {metric}, {why}")
    if tables:
        print(f"\n{LEGEND}")
    if args.inspect_log is not None:
        from .eval.ab import gather_recordings
        from .eval.exporters.inspect_ab import ab_logs

        recordings = {recording.id: recording for recording in gather_recordings(args.files, limit=args.limit)[0]}
        _write_inspect_logs(lambda: ab_logs(frame, {name: load_config(spec) for name, spec in configs.items()},
                                            recordings=recordings), args.inspect_log)
    why = failure_line(frame)
    if why is not None:
        print(f"hermeslab ab: exit 1: {why}", file=sys.stderr)
    return 1 if why is not None else 0


def _scheduler_misuse(args: argparse.Namespace) -> str | None:
    """Why ``ab``'s options about a Dask cluster do not go together (None: they do)."""
    if args.scheduler is None:
        return None if args.scheduler_timeout is None else "--scheduler-timeout needs --scheduler"
    if args.executor not in (None, "dask"):
        return f"--scheduler runs the cells on that Dask cluster; it cannot be combined with --executor {args.executor}"
    if args.scheduler_timeout is not None and not args.scheduler_timeout > 0:
        return f"--scheduler-timeout must be a positive number of seconds, got {args.scheduler_timeout:g}"
    return None


def _cluster_line(client: Any, address: str, cpu_before: dict[str, float]) -> str:
    """The cluster's workers and threads, and the CPU seconds their processes used since ``cpu_before``."""
    from .eval.dask_cluster import cpu_used, worker_cpu_seconds

    threads = client.nthreads()
    cpu = cpu_used(cpu_before, worker_cpu_seconds(client))
    used = ("their CPU time is not known (a worker left or restarted during the run)" if cpu is None
            else f"their processes used {cpu:.2f} CPU seconds")
    return (f"ran on the Dask cluster at {address}: {len(threads)} worker(s), {sum(threads.values())} thread(s); "
            f"{used}")


def _ab_left_out(frame: pd.DataFrame, asked: list[str] | None, every: bool) -> tuple[list[str], list[str]]:
    """The rows ``ab`` leaves out of its tables: (shown in other ways, changed by no config).

    Metrics asked for by name are all shown. Otherwise the counts a share is
    made of (``SHARE_PARTS``: the share row carries them) and the
    ``price_is_default`` flag (said in a note) are left out, and so are
    metrics no config changed in any session, unless ``every``.
    """
    from .eval.stats import metric_columns
    from .eval.tables import SHARE_PARTS, unchanged_metrics

    if asked or every:
        return [], []
    parts = [part for pair in SHARE_PARTS.values() for part in pair] + ["price_is_default"]
    return parts, unchanged_metrics(frame, [metric for metric in metric_columns(frame) if metric not in parts])


def _without(table: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """``table`` without the rows of ``metrics``, its notes (``attrs``) kept."""
    kept = table.drop(index=[metric for metric in metrics if metric in table.index])
    kept.attrs = dict(table.attrs)
    return kept


def cmd_replay(args: argparse.Namespace) -> int:
    import json
    import math

    from .eval.checked import SummaryFallbackError, checked_row
    from .eval.recording import read_recordings
    from .eval.replay import new_run_id, replay

    if args.limit is not None and args.limit < 1:
        raise SystemExit("hermeslab: --limit must be at least 1")
    config = _load_config(args.config)
    exam = _exam_settings(args.exam, {"the config": config})
    try:
        recordings = read_recordings(args.file)
    except OSError as exc:
        raise SystemExit(f"hermeslab: {exc}") from None
    wanted = set(args.session or ())
    run_id = new_run_id()
    done, reported = 0, 0
    said: list[str] = []
    for recording in recordings:
        _report(recordings.problems[reported:], said)
        reported = len(recordings.problems)
        if (wanted and recording.id not in wanted) or (args.limit is not None and done >= args.limit):
            continue
        done += 1
        wanted.discard(recording.id)
        try:
            run = replay(recording, config, run_id=run_id, store=args.store)
            row = checked_row(run, config, exam=exam, allow_summary_fallback=args.allow_summary_fallback)
        except (ValueError, OSError, SummaryFallbackError) as exc:
            _report([f"session {recording.id!r}: {exc}"], said)
            continue
        values = {key: None if isinstance(value, float) and math.isnan(value) else value for key, value in row.items()}
        noted = {} if row.note is None else {"note": row.note}
        if row.note is not None:
            print(f"hermeslab replay: warning: session {recording.id!r} kept, flagged: {row.note}", file=sys.stderr)
        print(json.dumps({"session": recording.id, "run_id": run_id, "hermes_texts": run.hermes_texts, **values,
                          **noted}), flush=True)
    _report(recordings.problems[reported:], said)
    _report([f"no session {session!r} in {args.file}" for session in sorted(wanted)], said)
    if said:
        print(f"hermeslab replay: exit 1: {len(said)} problem(s); the first: {said[0]}", file=sys.stderr)
    return 1 if said else 0


def cmd_exam(args: argparse.Namespace) -> int:
    """The probe exam of recordings under configs and windows, printed as one scorecard with intervals."""
    import pandas as pd

    from .eval.ab import config_label
    from .eval.probes.choose import answerer_from, judge_from, writer_from
    from .eval.probes.run import ALL, run_exam
    from .eval.probes.scorecard import caption, readable, scorecard

    configs = {config_label(spec): spec for spec in args.config}
    if len(configs) < len(args.config):
        raise SystemExit("hermeslab: two --config options have the same name (a file's stem, else the text)")
    _inspect_folder(args.inspect_log)
    try:
        answerer = answerer_from(args.answerer, model=args.model, window=args.answerer_window, api_key=args.api_key)
        judge = judge_from(args.judge, model=args.model, api_key=args.api_key)
        writer = writer_from(args.writer, model=args.model, api_key=args.api_key) if args.writer else None
        types = args.type or (*ALL, *(["model_written"] if writer is not None else []))
        frame = run_exam(args.files, configs, windows=args.window or [8_000], answerer=answerer, lab=args.lab,
                         judge=judge, progress=not args.quiet, probe_types=types, counter=args.counter,
                         question_writer=writer)
        table = scorecard(frame, next(iter(configs)), n_resamples=args.resamples, seed=args.seed)
    except (OSError, ValueError, TypeError) as exc:
        raise SystemExit(f"hermeslab: {exc}") from None
    for problem in frame.attrs.get("problems", []):
        print(f"skipped {problem}", file=sys.stderr)
    attrs = frame.attrs
    print(f"{attrs.get('sessions', frame['recording_id'].nunique())} sessions, {attrs.get('probes', 0):,} probes, "
          f"{len(frame):,} questions; {attrs.get('calls_made', 0):,} answerer calls, {attrs.get('cache_hits', 0):,} "
          f"from the lab's cache; bank {attrs.get('bank_hash')}")
    print(caption(frame))
    print(f"normalised = (compacted - floor) / ({table.attrs['denominator']}); intervals: {table.attrs['confidence']:.0%} "
          f"paired session bootstrap, {args.resamples} resamples, seed {args.seed}")
    with pd.option_context("display.width", 220, "display.max_columns", 20, "display.max_colwidth", 60):
        print(readable(table).to_string())
    if args.inspect_log is not None:
        from .eval.exporters.inspect_exam import exam_logs

        _write_inspect_logs(lambda: exam_logs(frame), args.inspect_log)
    why = table.attrs["problem"]
    if why is not None:
        print(f"hermeslab exam: exit 1: {why}", file=sys.stderr)
    return 1 if why is not None else 0


def cmd_presets(args: argparse.Namespace) -> int:
    """Every compression preset: its agent, the source and commit it was read from, the package that brought it,
    and one line on what it does; then one line per policy that could not be used."""
    from .policies.registry import registry

    found = registry()
    for name, (preset, entry) in found.presets.items():
        print(f"{name}\n  agent: {entry.policy.agent}\n  source: {entry.policy.source}\n"
              f"  package: {entry.package} ({entry.origin})\n  policy: {preset.summary}")
    for problem in found.problems:
        print(f"not usable: {problem}")
    return 0


def cmd_reference(args: argparse.Namespace) -> int:
    """Install the Hermes / OpenHands reference environments (announced), or say which are installed."""
    from .reference import install
    from .reference.errors import HermesReferenceError

    if args.action == "status":
        if args.which is not None:
            raise SystemExit(f"hermeslab: reference status takes no argument (got {args.which!r}); it shows all")
        return 0 if install.status() else 1
    if args.which is None:
        raise SystemExit("hermeslab: reference install needs what to install: hermes, openhands, zoo or all")
    try:
        install.install(args.which)
    except HermesReferenceError as exc:
        print(f"hermeslab reference: {exc}", file=sys.stderr)
        return 1
    return 0


def _inspect_folder(folder: str | None) -> None:
    """``--inspect-log``: the folder exists and inspect-ai is installed, checked before any work."""
    if folder is None:
        return
    from .eval.exporters.inspect_files import log_folder

    try:
        log_folder(folder)
    except (ValueError, ImportError) as exc:
        raise SystemExit(f"hermeslab: --inspect-log: {exc}") from None


def _write_inspect_logs(build: Callable[[], list[EvalLog]], folder: str) -> None:
    """Build the run's Inspect logs and write them into ``folder``, whole or not at all; one line per log."""
    from .eval.exporters.inspect_files import write_logs

    try:
        logs = build()
        written = write_logs(logs, folder)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"hermeslab: --inspect-log: {exc}") from None
    for log, target in zip(logs, written):
        print(f"Inspect log of {log.eval.solver} ({len(log.samples or [])} samples, "
              f"{', '.join(f'{k}={v}' for k, v in log.eval.task_args.items())}): {target}")


def _exam_settings(cache: str | None, configs: dict[str, Config]) -> ExamSettings | None:
    """The recall exam's settings when ``--exam`` was given, else None: a config naming no endpoint is
    examined at the one the others name (``shared_endpoint``)."""
    from .eval.exam import DEFAULT_CACHE_PATH, ExamSettings, shared_endpoint

    if cache is None:
        return None
    try:
        base_url, api_key = shared_endpoint(configs)
    except ValueError as exc:
        raise SystemExit(f"hermeslab: --exam: {exc}") from None
    if base_url or api_key:
        print(f"--exam: every config's context is examined at {base_url or 'the default endpoint'}", file=sys.stderr)
    return ExamSettings(cache_path=cache or DEFAULT_CACHE_PATH, base_url=base_url, api_key=api_key)


def _report(problems: list, said: list[str]) -> None:
    """Print each problem on its own line of standard error and add it to ``said``."""
    for problem in problems:
        print(f"hermeslab replay: {problem}", file=sys.stderr)
        said.append(str(problem))


def _add_exam_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--exam", nargs="?", const="", metavar="CACHE",
                        help="also run the recall exam at the config's endpoint (model.base_url, model.api_key); "
                             "replies are cached in the SQLite file CACHE (default "
                             "~/.cache/hermeslab/recall-exam.sqlite)")


def _add_inspect_log_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--inspect-log", metavar="DIR",
                        help=f"also write Inspect AI .eval logs into the existing folder DIR ({what}), for "
                             "'inspect view'; needs pip install 'hermeslab[inspect]'")


def _add_fallback_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-summary-fallback", action="store_true",
                        help="keep, with a warning, a replay whose LLM summariser failed and whose summaries "
                             "its fallback (the extractive summariser) wrote; by default such a replay fails, "
                             "since it would measure another summariser under the config's name")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hermeslab", description=DESCRIPTION, epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")

    demo = sub.add_parser("demo", help="a scripted multi-turn session with the offline model, logged and plotted")
    demo.add_argument("--config", help=CONFIG_HELP)
    demo.add_argument("--workspace", help="folder for the demo files (default: a new temporary folder)")
    demo.add_argument("--lab", help=LAB_HELP)
    demo.add_argument("--plot", help="where to save the PNG plot")
    demo.add_argument("--context-length", type=int, default=DEMO_CONTEXT_LENGTH,
                      help="context window in tokens (small by default so the demo shows a compression)")
    demo.set_defaults(func=cmd_demo)

    chat = sub.add_parser("chat", help="interactive chat in the terminal")
    chat.add_argument("--config", help=CONFIG_HELP)
    chat.add_argument("--workspace", help="folder the file and terminal tools are confined to "
                                          "(default: tools.workspace of the config, else the current folder)")
    chat.add_argument("--lab", help=LAB_HELP)
    chat.set_defaults(func=cmd_chat)

    serve = sub.add_parser("serve", help="serve the offline model as an OpenAI-compatible endpoint")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765)")
    serve.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between streamed chunks")
    serve.add_argument("--faults", metavar="FILE",
                       help="YAML or JSON fault schedule: fail chosen calls the way real providers fail "
                            "(kinds: see hermeslab.providers.faults.FAULT_KINDS)")
    serve.add_argument("--personality", metavar="NAME",
                       help="answer as this kind of server does: its errors, streams, usage and tool_choice "
                            "(names: see hermeslab.providers.personalities.PERSONALITIES)")
    serve.add_argument("--context-window", type=int, metavar="TOKENS",
                       help="window the personality enforces in its own way (default: none)")
    serve.set_defaults(func=cmd_serve)

    sessions = sub.add_parser("sessions", help="list logged sessions")
    sessions.add_argument("--config", help="YAML config whose store.path is the lab database")
    sessions.add_argument("--lab", help=LAB_HELP)
    sessions.set_defaults(func=cmd_sessions)

    mcp_server = sub.add_parser("mcp-server", help="serve the lab's log read-only as MCP tools (stdio by default)")
    mcp_server.add_argument("--config", help="YAML config whose store.path is the lab database")
    mcp_server.add_argument("--lab", help=LAB_HELP)
    mcp_server.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP at http://HOST:PORT/mcp")
    mcp_server.add_argument("--host", default="127.0.0.1", help="address for --http (default 127.0.0.1)")
    mcp_server.set_defaults(func=cmd_mcp_server)

    importer = sub.add_parser(
        "import", help="turn other agents' logs into recorded sessions (JSONL); exit 1 when anything is skipped",
        description="Write recorded sessions (the shared datasets' JSONL format) from files and folders of "
                    "agent logs, each file's format detected from its content. Every file taken and every file, "
                    "line or session skipped is listed with the reason; the output is written whole or not at "
                    "all. The older form IMPORT KIND PATH (kind openai, hermes-state or lab) still works.")
    importer.add_argument("paths", nargs="+", metavar="PATH", help="files and folders to read")
    importer.add_argument("-o", "--out", help="JSONL file to write (default: <first PATH's name>.recordings.jsonl "
                                              "here)")
    importer.add_argument("--format", help="read every file as this format instead of detecting it: "
                                           f"{', '.join(IMPORT_FORMATS)}")
    importer.add_argument("--session", help="lab: the session to import (required); hermes-state: only its "
                                            "conversation")
    importer.add_argument("--config", help="lab: the config whose built-in tool schemas are attached")
    importer.set_defaults(func=cmd_import)

    export = sub.add_parser(
        "export", help="a logged session (its whole compression lineage) as JSONL or Markdown, or a lab's "
                       "conversations as Inspect AI logs",
        description="Write a logged conversation, read back across its compressions. jsonl and md take one "
                    "SESSION; inspect writes Inspect AI .eval logs of the conversations of the SESSIONs named "
                    "(all of the lab's when none), one log per model, for 'inspect view' (needs pip install "
                    "'hermeslab[inspect]'). 'hermeslab ab' and 'hermeslab exam' write theirs with --inspect-log.")
    export.add_argument("session_id", nargs="*", metavar="SESSION",
                        help="any session of the conversation (its compression lineage is followed)")
    export.add_argument("--lab", help=LAB_HELP)
    export.add_argument("--config", help="YAML config: where the lab is, and which built-in tool schemas to attach")
    export.add_argument("--format", choices=("jsonl", "md", "inspect"), default="jsonl",
                        help="jsonl: one recorded-session line (default); md: a Markdown transcript; inspect: "
                             "Inspect AI logs (samples = conversations, usage per model as billed)")
    export.add_argument("--out", help="file to write (default: standard output); for inspect, an existing folder")
    export.set_defaults(func=cmd_export)

    ab = sub.add_parser("ab", help="replay recordings under two or more configs and compare them session by session",
                        description="Replay every session under every config and print, for each config after "
                                    "the first, the paired difference to the first with bootstrap intervals. "
                                    "Exit 1 when a line was skipped or a cell failed.")
    ab.add_argument("files", nargs="+", metavar="FILE", help="recorded sessions (JSONL)")
    ab.add_argument("--config", action="append", required=True, metavar="SPEC",
                    help="repeat for each config (the first is the baseline): a YAML file, a preset name "
                         "(seed, hermes-0.19), key=value overrides of the seed preset, or a base and overrides "
                         "joined by commas, e.g. hermes-0.19,model.context_length=16000")
    ab.add_argument("--out", help="DuckDB results file; a rerun skips the cells it already holds")
    ab.add_argument("--executor", choices=("processes", "dask", "serial"),
                    help="where the cells run: a pool of worker processes (default), a local Dask cluster, "
                         "or one by one in this process")
    ab.add_argument("--scheduler", metavar="ADDRESS",
                    help="run the cells on the Dask cluster of this scheduler (e.g. tcp://127.0.0.1:8786), whose "
                         "workers run from hermeslab's environment; implies --executor dask")
    ab.add_argument("--scheduler-timeout", type=float, metavar="SECONDS",
                    help="how long to wait for the scheduler to answer, and then for its first worker (default 10)")
    ab.add_argument("--workers", type=int, help="worker processes (default: one per CPU)")
    ab.add_argument("--limit", type=int, metavar="N", help="only the first N sessions of each file")
    ab.add_argument("--metric", action="append", help="compare only this metric (repeatable; default: every metric "
                                                     "some config changed)")
    ab.add_argument("--all-metrics", action="store_true",
                    help="also show metrics no config changed in any session, and the counts behind each share")
    ab.add_argument("--resamples", type=int, default=9_999, help="bootstrap resamples (default 9999)")
    ab.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    _add_exam_option(ab)
    _add_fallback_option(ab)
    _add_inspect_log_option(ab, "one log per config: a sample per session, its metrics as scores")
    ab.set_defaults(func=cmd_ab)

    replayer = sub.add_parser("replay", help="replay recorded sessions through the agent loop; one metrics line each",
                              description="Replay each recorded session of FILE through the agent loop under the "
                                          "config and print its metrics as one JSON line. Bad lines, and sessions "
                                          "that could not be replayed as configured, are reported on standard "
                                          "error and skipped; the exit status is 1 if there were any.")
    replayer.add_argument("file", metavar="FILE", help="recorded sessions (JSONL)")
    replayer.add_argument("--config", help=CONFIG_HELP)
    replayer.add_argument("--session", action="extend", nargs="+", metavar="ID", help="only these sessions")
    replayer.add_argument("--limit", type=int, metavar="N", help="only the first N sessions")
    replayer.add_argument("--store", metavar="PATH", help="also log the replays to this lab file, tagged with the run id")
    _add_exam_option(replayer)
    _add_fallback_option(replayer)
    replayer.set_defaults(func=cmd_replay)

    exam = sub.add_parser("exam", help="the probe exam: what an answerer can still answer after each compaction",
                          description="Replay every recording under every config and window, ask the probes "
                                      "of each compaction (compacted context, uncompacted ceiling, question-only "
                                      "floor) and print the scorecard: raw and normalised scores per probe type, "
                                      "retained tokens, and each config's paired difference to the first with "
                                      "session-bootstrap intervals. Exit 1 when nothing was scored.")
    exam.add_argument("files", nargs="+", metavar="RECORDINGS", help="recorded sessions (JSONL)")
    exam.add_argument("--config", action="append", required=True, metavar="SPEC",
                      help="repeat for each config (the first is the baseline); as for 'hermeslab ab'")
    exam.add_argument("--window", action="append", type=int, metavar="TOKENS",
                      help="context window to replay at (repeatable; default 8000)")
    exam.add_argument("--answerer", default="perfect", metavar="perfect|URL",
                      help="who answers: the perfect reader (default) or an OpenAI-compatible endpoint's URL")
    exam.add_argument("--judge", default="match", metavar="match|URL",
                      help="who judges: the deterministic matcher (default) or an endpoint's URL")
    exam.add_argument("--writer", metavar="URL",
                      help="also ask model-written probes, their questions written by this endpoint's model")
    exam.add_argument("--model", help="the endpoint's model (default: the first one it lists)")
    exam.add_argument("--api-key", help="the endpoint's API key, if it wants one")
    exam.add_argument("--answerer-window", type=int, metavar="TOKENS",
                      help="the answerer's own window: longer contexts are marked unfittable (default: no limit)")
    exam.add_argument("--type", action="append", metavar="TYPE",
                      help="ask only this probe type (repeatable; default: all)")
    exam.add_argument("--counter", default="tiktoken",
                      help="the token unit of every figure, one for all recordings: tiktoken (cl100k_base, the "
                           "default), tiktoken:<encoding> or rough (chars/4)")
    exam.add_argument("--lab", help="lab file that caches every answer and judgement (default: none, in memory)")
    exam.add_argument("--resamples", type=int, default=2_000, help="bootstrap resamples (default 2000)")
    exam.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    exam.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_inspect_log_option(exam, "one log per config, window and arm: a sample per probe asked")
    exam.set_defaults(func=cmd_exam)

    presets = sub.add_parser("presets", help="list the compression presets, each with its source and policy")
    presets.set_defaults(func=cmd_presets)

    reference = sub.add_parser("reference", help="install the Hermes and OpenHands reference environments the "
                               "comparisons and their tests use (hundreds of MB), or show which are installed")
    reference.add_argument("action", choices=("install", "status"),
                           help="install an environment (announcing its size first), or status to list what is there")
    reference.add_argument("which", nargs="?", choices=("hermes", "openhands", "zoo", "all"), default=None,
                           help="what to install: hermes (hermes-agent 0.19.0), openhands (two releases), zoo "
                                "(the zoo agents published as Python packages) or all")
    reference.set_defaults(func=cmd_reference)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
