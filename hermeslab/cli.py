"""The ``hermeslab`` command: demo, chat, serve, sessions."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .core.config import Config, ConfigError

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
DEMO_CONTEXT_LENGTH = 5_000

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


def _load_config(path: str | None) -> Config:
    from .runtime import load_config

    try:
        return load_config(path)
    except (ConfigError, OSError) as exc:
        raise SystemExit(f"hermeslab: {exc}") from None


def cmd_demo(args: argparse.Namespace) -> int:
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
    overrides = {"tools.workspace": str(workspace), "tools.terminal.enabled": True,
                 "model.context_length": args.context_length}
    if args.lab:
        overrides["store.path"] = args.lab
    config = config.with_overrides(overrides)

    print(f"hermeslab demo · workspace {workspace}")
    with Runtime(config, source="demo") as runtime:
        print(f"model: {config.model.name} via {runtime.provider_handle.provider.name}"
              f" ({runtime.provider_handle.server.base_url if runtime.provider_handle.server else config.model.base_url}) · log: {runtime.lab_path}\n")
        runtime.bus.subscribe(ConsoleTranscript(context_length=config.model.context_length))
        for text in DEMO_SCRIPT:
            print(f"you> {text}")
            print("hermes> ", end="", flush=True)
            runtime.agent.chat(text)
        session_id = runtime.agent.session.id
        lab_path = runtime.lab_path
        compactor = runtime.agent.compactor
        threshold = compactor.budgets.threshold_tokens if compactor is not None else None

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
    from .console import ConsoleTranscript
    from .runtime import Runtime

    config = _load_config(args.config)
    if args.workspace:
        config = config.with_overrides({"tools.workspace": args.workspace})
    with Runtime(config, source="cli") as runtime:
        runtime.bus.subscribe(ConsoleTranscript(context_length=config.model.context_length))
        print(f"hermeslab chat · {config.model.name} · session {runtime.agent.session.id} · /quit to leave")
        while True:
            try:
                text = input("you> ").strip()
            except (EOFError, KeyboardInterrupt):
                print()
                break
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            print("hermes> ", end="", flush=True)
            runtime.agent.chat(text)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .providers import LocalServer, OfflineModel
    from .providers.faults import FaultSchedule, serve_with_faults

    if args.faults:
        try:
            schedule = FaultSchedule.from_file(args.faults)
        except ValueError as exc:
            raise SystemExit(f"hermeslab: {exc}") from None
        server = serve_with_faults(OfflineModel(), schedule, host=args.host, port=args.port,
                                   chunk_delay=args.chunk_delay)
    else:
        server = LocalServer(OfflineModel(), host=args.host, port=args.port, chunk_delay=args.chunk_delay)
    url = server.start()
    faults = f" with the faults of {args.faults}" if args.faults else ""
    print(f"hermeslab offline model served at {url}{faults} (Ctrl+C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    import pandas as pd

    from .runtime import lab_path
    from .store import open as open_lab

    path = Path(args.lab) if args.lab else lab_path(_load_config(args.config))
    if not path.exists():
        print(f"no lab database at {path}")
        return 1
    sessions = open_lab(path).sessions()
    columns = ["id", "parent_session_id", "source", "model", "started_at", "end_reason", "api_call_count",
               "input_tokens", "output_tokens", "message_count"]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(sessions[[c for c in columns if c in sessions.columns]].to_string(index=False))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hermeslab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="a scripted multi-turn session with the offline model, logged and plotted")
    demo.add_argument("--config", help="YAML config (Hermes key names)")
    demo.add_argument("--workspace", help="folder for the demo files (default: a new temporary folder)")
    demo.add_argument("--lab", help="lab database (default: .hermeslab/lab.duckdb)")
    demo.add_argument("--plot", help="where to save the PNG plot")
    demo.add_argument("--context-length", type=int, default=DEMO_CONTEXT_LENGTH,
                      help="context window in tokens (small by default so the demo shows a compression)")
    demo.set_defaults(func=cmd_demo)

    chat = sub.add_parser("chat", help="interactive chat in the terminal")
    chat.add_argument("--config")
    chat.add_argument("--workspace")
    chat.set_defaults(func=cmd_chat)

    serve = sub.add_parser("serve", help="serve the offline model as an OpenAI-compatible endpoint")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between streamed chunks")
    serve.add_argument("--faults", metavar="FILE",
                       help="YAML or JSON fault schedule: fail chosen calls the way real providers fail "
                            "(kinds: see hermeslab.providers.faults.FAULT_KINDS)")
    serve.set_defaults(func=cmd_serve)

    sessions = sub.add_parser("sessions", help="list logged sessions")
    sessions.add_argument("--config")
    sessions.add_argument("--lab")
    sessions.set_defaults(func=cmd_sessions)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
