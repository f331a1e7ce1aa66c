"""Session search at scale: hermeslab's index against SQLite FTS5 built the way Hermes 0.19 builds it.

The corpus is made of real text: the messages of the shared recorded sessions
are cut into lines, and every synthetic message is a deterministic mix of a few
lines of one recorded message and one line of another, keeping that message's
role, tool calls and tool name. Sessions hold equal shares of the messages and
form lineage chains of 1 to 7 sessions.

Baseline: a ``messages`` table with two standalone FTS5 tables filled by
insert triggers (``unicode61`` and ``trigram``) over content, tool name and
tool calls, queried as Hermes's session search does (sanitised MATCH,
``ORDER BY rank LIMIT 300`` with a snippet), then deduplicated by lineage root
in Python. hermeslab: ``SearchIndex.search(limit=3)``, including snippets and
neighbouring messages. Both answer the same query set in the same run,
interleaved query by query.

Same work on both sides: the baseline's connection gets the page cache and
memory map hermeslab's index connections use (read back from a connection
``hermeslab.search.storage.connect`` opens, so a change there follows), and
both search every role (Hermes's own query keeps to user and assistant rows;
hermeslab indexes tool calls and results too, so the baseline here does not
filter roles). After the timed queries, both answer every query again,
untimed, with 10 conversations, and the benchmark counts how often the two
top-10 answers agree (same set, same best conversation, mean overlap). Each
side's CPU seconds (``time.process_time`` around its own calls) are reported
beside its latencies.

Then, for hermeslab alone: 10-message inserts and a merge; with the delta one
message short of a merge, the first search of a new process; and the searches
of this process while ``merge_docs`` messages are merged.

Usage: python benchmarks/session_search.py [--messages N] [--sessions S] [--datasets DIR] [--workdir DIR] [--out FILE]
Prints one JSON object as its last line and writes it to benchmarks/results/session_search.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from _record import Record, add_out_option, children_cpu_seconds

from hermeslab.search import MessageDoc, SearchIndex, SessionInfo, message_text
from hermeslab.search import storage as search_storage

QUERIES_PER_KIND = 40
#: Targets for hermeslab's query latency, at this corpus size.
P50_TARGET_MS = 15.0
P95_TARGET_MS = 100.0
TARGET_MESSAGES = 1_000_000
INSERT_BATCHES = 200
EPOCH = 1_750_000_000.0
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{2,}")
_IDENTIFIER = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+|[a-z][A-Z][A-Za-z0-9]*|\.[a-z][A-Za-z0-9]*)+\b")


# ---------------------------------------------------------------- the corpus

def load_sources(datasets: Path) -> list[tuple[str, list[str], str | None, str | None]]:
    """(role, lines, tool_calls JSON, tool name) for every recorded message with text."""
    sources = []
    for path in sorted(datasets.glob("*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                names: dict[str, str] = {}
                for message in json.loads(line)["messages"]:
                    calls = message.get("tool_calls") or None
                    for call in calls or []:
                        names[str(call.get("id"))] = str((call.get("function") or {}).get("name"))
                    content = message.get("content")
                    if isinstance(content, list):
                        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
                    lines = [text[:400] for text in (content or "").splitlines() if text.strip()]
                    if lines or calls:
                        tool = names.get(str(message.get("tool_call_id"))) if message.get("role") == "tool" else None
                        sources.append((message.get("role") or "user", lines or [""],
                                        json.dumps(calls) if calls else None, tool))
    if not sources:
        raise SystemExit(f"no recorded messages under {datasets}")
    return sources


def corpus(sources: list, n_messages: int, n_sessions: int, *, first: int = 0,
           per_session: int | None = None) -> tuple[list[MessageDoc], list[SessionInfo], list]:
    """Messages ``first .. n_messages - 1``, the sessions, and each message's raw fields (for the baseline's table).

    Sessions hold ``per_session`` messages each (default: equal shares of
    ``n_messages``); messages past the last share go to the last session.
    """
    per_session = per_session or max(1, n_messages // n_sessions)
    sessions, docs, raw = [], [], []
    chain_start = 0
    for s in range(n_sessions):
        if s - chain_start >= 1 + chain_start % 7:
            chain_start = s
        parent = f"s{s - 1:06d}" if s > chain_start else None
        sessions.append(SessionInfo(f"s{s:06d}", parent_id=parent, title=f"session {s}", started_at=EPOCH + s * 600.0,
                                    source="cli"))
    for j in range(first, n_messages):
        role, lines, calls, tool = sources[(j * 2_654_435_761) % len(sources)]
        other = sources[(j * 40_503 + 17) % len(sources)][1]
        first = j % len(lines)
        content = "\n".join(lines[first:first + 1 + j % 3] + [other[j % len(other)]])
        session = min(j // per_session, n_sessions - 1)
        message_id = f"m{j:08d}"
        docs.append(MessageDoc(message_id, f"s{session:06d}", j % per_session, role, EPOCH + j,
                               message_text(role, content, calls, tool)))
        raw.append((message_id, f"s{session:06d}", role, content, calls, tool, EPOCH + j))
    return docs, sessions, raw


def query_set(docs: list[MessageDoc]) -> dict[str, list[str]]:
    """Rare, common, multi-word, identifier and phrase queries, drawn from the corpus deterministically."""
    sample = docs[:: max(1, len(docs) // 50_000)]
    words = Counter(word.lower() for doc in sample for word in set(_WORD.findall(doc.text)))
    common = [word for word, _ in words.most_common(QUERIES_PER_KIND)]
    rare_pool = sorted(word for word, count in words.items() if 2 <= count <= 5)
    identifiers = Counter(match for doc in sample for match in set(_IDENTIFIER.findall(doc.text)))
    ident_pool = sorted(name for name, count in identifiers.items() if count >= 2 and len(name) <= 40)
    multi, phrases = [], []
    for doc in sample[:: max(1, len(sample) // (4 * QUERIES_PER_KIND))]:
        found = _WORD.findall(doc.text)
        if len(found) >= 6 and len(multi) < QUERIES_PER_KIND:
            multi.append(" ".join(found[1:4:1] if len(multi) % 2 else found[2:4]))
        if len(found) >= 8 and len(phrases) < QUERIES_PER_KIND:
            phrases.append(f'"{found[5]} {found[6]}"')
    return {"rare": _spread(rare_pool), "common": common, "multi": multi, "identifier": _spread(ident_pool),
            "phrase": phrases}


def _spread(pool: list[str]) -> list[str]:
    step = max(1, len(pool) // QUERIES_PER_KIND)
    return pool[::step][:QUERIES_PER_KIND]


# ---------------------------------------------------------------- the FTS5 baseline

_BASELINE_TABLES = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, started_at REAL NOT NULL,
                       parent_session_id TEXT, title TEXT, model TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, role TEXT NOT NULL,
                       content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, timestamp REAL NOT NULL,
                       active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0);
CREATE INDEX messages_session ON messages (session_id, timestamp);
"""
_INDEXED_TEXT = "coalesce(new.content, '') || ' ' || coalesce(new.tool_name, '') || ' ' || coalesce(new.tool_calls, '')"


def fts_table(name: str, tokenize: str | None = None) -> str:
    """A standalone FTS5 table over the message text and the trigger that fills it."""
    options = f", tokenize='{tokenize}'" if tokenize else ""
    return (f"CREATE VIRTUAL TABLE {name} USING fts5(content{options});\n"
            f"CREATE TRIGGER {name}_insert AFTER INSERT ON messages BEGIN\n"
            f"    INSERT INTO {name} (rowid, content) VALUES (new.id, {_INDEXED_TEXT});\nEND;\n")


_INSERT_MESSAGE = ("INSERT INTO messages (session_id, role, content, tool_calls, tool_name, timestamp) "
                   "VALUES (?, ?, ?, ?, ?, ?)")

_BASELINE_QUERY = """
SELECT m.id, m.session_id, m.role, snippet(messages_fts, 0, '>>>', '<<<', '...', 40), m.timestamp, s.started_at
FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid JOIN sessions s ON s.id = m.session_id
WHERE messages_fts MATCH ? AND (m.active = 1 OR m.compacted = 1)
ORDER BY rank LIMIT 300
"""


def sanitise_fts5(query: str) -> str:
    """The sanitising rules Hermes applies before MATCH (see HERMES_SPEC 4.4), in our own code."""
    query = query[:2048]
    phrases: list[str] = []

    def keep(match: re.Match) -> str:
        phrases.append(match.group())
        return f"\x00{len(phrases) - 1}\x00"

    text = re.sub(r'"[^"]*"', keep, query)
    text = re.sub(r'[+{}():"^]', " ", text)
    text = re.sub(r"\*+", "*", text)
    text = re.sub(r"(^|\s)\*", r"\1", text).strip()
    text = re.sub(r"(?i)^(AND|OR|NOT)\b\s*", "", text)
    text = re.sub(r"(?i)\s+(AND|OR|NOT)\s*$", "", text.strip())
    text = re.sub(r"\b(\w+(?:[._-]\w+)+)\b", r'"\1"', text)
    for number, phrase in enumerate(phrases):
        text = text.replace(f"\x00{number}\x00", phrase)
    return text.strip()


def hermeslab_tuning(path: Path) -> dict[str, int]:
    """The page cache and memory map a connection to hermeslab's index gets (``PRAGMA`` values as set)."""
    con = search_storage.connect(path, timeout=30.0)
    try:
        return {"cache_size": int(con.execute("PRAGMA cache_size").fetchone()[0]),
                "mmap_size": int(con.execute("PRAGMA mmap_size").fetchone()[0])}
    finally:
        con.close()


class Baseline:
    def __init__(self, path: Path, *, trigram: bool = True, tuning: dict[str, int] | None = None):
        self.path = path
        self.trigram = trigram
        self.con = sqlite3.connect(path, isolation_level=None)
        self.tuning = tuning or {}
        for pragma, value in self.tuning.items():
            self.con.execute(f"PRAGMA {pragma} = {int(value)}")
        self.parents: dict[str, str | None] = {}

    def applied_tuning(self) -> dict[str, int]:
        return {pragma: int(self.con.execute(f"PRAGMA {pragma}").fetchone()[0]) for pragma in self.tuning}

    def build(self, raw: list, sessions: list[SessionInfo]) -> None:
        """Bulk load without a journal (like hermeslab's rebuild), then WAL as Hermes runs it."""
        self.con.execute("PRAGMA journal_mode = OFF")
        self.con.execute("PRAGMA synchronous = OFF")
        trigram = fts_table("messages_fts_trigram", "trigram") if self.trigram else ""
        self.con.executescript(_BASELINE_TABLES + fts_table("messages_fts") + trigram)
        self.con.execute("BEGIN")
        self.con.executemany("INSERT INTO sessions (id, source, started_at, parent_session_id, title) "
                             "VALUES (?, ?, ?, ?, ?)",
                             [(s.id, s.source, s.started_at, s.parent_id, s.title) for s in sessions])
        self.con.executemany(
            _INSERT_MESSAGE,
            [(session, role, content, calls, tool, ts) for _, session, role, content, calls, tool, ts in raw])
        self.con.execute("COMMIT")
        self.con.execute("PRAGMA journal_mode = WAL")
        self.con.execute("PRAGMA synchronous = NORMAL")
        self.parents = {s.id: s.parent_id for s in sessions}

    def messages(self) -> int:
        """Messages already in the file (0 for a new one)."""
        try:
            return int(self.con.execute("SELECT count(*) FROM messages").fetchone()[0])
        except sqlite3.OperationalError:
            return 0

    def prepare(self, sessions: list[SessionInfo]) -> None:
        """Use a file an earlier run built."""
        self.con.execute("PRAGMA journal_mode = WAL")
        self.con.execute("PRAGMA synchronous = NORMAL")
        self.parents = {s.id: s.parent_id for s in sessions}

    def insert(self, raw: list) -> None:
        self.con.execute("BEGIN")
        self.con.executemany(
            _INSERT_MESSAGE,
            [(session, role, content, calls, tool, ts) for _, session, role, content, calls, tool, ts in raw])
        self.con.execute("COMMIT")

    def search(self, query: str, limit: int = 3) -> list[tuple[str, str]]:
        match = sanitise_fts5(query)
        if not match:
            return []
        try:
            rows = self.con.execute(_BASELINE_QUERY, (match,)).fetchall()
        except sqlite3.OperationalError:
            return []
        roots: dict[str, str] = {}
        for row in rows:
            root = self._root(row[1])
            if root not in roots:
                roots[root] = row[3]
                if len(roots) == limit:
                    break
        return list(roots.items())

    def _root(self, session: str) -> str:
        seen = {session}
        while (parent := self.parents.get(session)) and parent not in seen and parent in self.parents:
            seen.add(parent)
            session = parent
        return session


# ---------------------------------------------------------------- measuring

def percentiles(values_ms: list[float]) -> dict[str, float]:
    ordered = sorted(values_ms)

    def at(fraction: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 2)

    return {"p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99), "max_ms": round(ordered[-1], 2),
            "mean_ms": round(statistics.fmean(ordered), 2)}


def run_queries(index: SearchIndex, baseline: Baseline, queries: dict[str, list[str]]) -> dict:
    flat = [(kind, query) for kind, items in queries.items() for query in items]
    for _, query in flat:  # warm both page caches
        index.search(query, limit=3)
        baseline.search(query)
    ours: dict[str, list[float]] = {kind: [] for kind in queries}
    theirs: dict[str, list[float]] = {kind: [] for kind in queries}
    inexact, empty_ours, empty_theirs = 0, 0, 0
    cpu_ours = cpu_theirs = 0.0
    for kind, query in flat:
        cpu = time.process_time()
        started = time.perf_counter()
        result = index.search(query, limit=3)
        ours[kind].append((time.perf_counter() - started) * 1000)
        cpu_ours += time.process_time() - cpu
        cpu = time.process_time()
        started = time.perf_counter()
        found = baseline.search(query)
        theirs[kind].append((time.perf_counter() - started) * 1000)
        cpu_theirs += time.process_time() - cpu
        inexact += not result.exact
        empty_ours += not result.hits
        empty_theirs += not found
    return {
        "hermeslab": {**percentiles([v for vs in ours.values() for v in vs]),
                      "by_kind": {kind: percentiles(vs) for kind, vs in ours.items() if vs},
                      "inexact_queries": inexact, "queries_without_hits": empty_ours,
                      "query_cpu_s": round(cpu_ours, 3)},
        "fts5": {**percentiles([v for vs in theirs.values() for v in vs]),
                 "by_kind": {kind: percentiles(vs) for kind, vs in theirs.items() if vs},
                 "queries_without_hits": empty_theirs, "query_cpu_s": round(cpu_theirs, 3)},
    }


def top10_agreement(index: SearchIndex, baseline: Baseline, queries: dict[str, list[str]]) -> dict:
    """Both sides' 10 best conversations (lineage roots) for every query, untimed, compared.

    ``same_set``: the same conversations in any order; ``same_best``: the same
    first conversation (or both none); ``mean_overlap``: the share of the
    larger answer found in the other, averaged over queries (1 when both are
    empty).
    """
    def compare(items: list[str]) -> dict:
        same_set = same_best = only_ours_empty = only_theirs_empty = 0
        overlap = 0.0
        for query in items:
            ours = [hit.root_session_id for hit in index.search(query, limit=10).hits]
            theirs = [root for root, _ in baseline.search(query, limit=10)]
            same_set += set(ours) == set(theirs)
            same_best += ours[:1] == theirs[:1]
            overlap += len(set(ours) & set(theirs)) / max(len(ours), len(theirs)) if ours or theirs else 1.0
            only_ours_empty += not ours and bool(theirs)
            only_theirs_empty += bool(ours) and not theirs
        return {"queries": len(items), "same_set": same_set, "same_best": same_best,
                "mean_overlap": round(overlap / max(1, len(items)), 3),
                "empty_only_hermeslab": only_ours_empty, "empty_only_fts5": only_theirs_empty}

    by_kind = {kind: compare(items) for kind, items in queries.items() if items}
    total = sum(entry["queries"] for entry in by_kind.values())
    return {"queries": total,
            "same_set": sum(entry["same_set"] for entry in by_kind.values()),
            "same_best": sum(entry["same_best"] for entry in by_kind.values()),
            "mean_overlap": round(sum(entry["mean_overlap"] * entry["queries"] for entry in by_kind.values())
                                  / max(1, total), 3),
            "empty_only_hermeslab": sum(entry["empty_only_hermeslab"] for entry in by_kind.values()),
            "empty_only_fts5": sum(entry["empty_only_fts5"] for entry in by_kind.values()),
            "by_kind": by_kind}


def insert_costs(index: SearchIndex, baseline: Baseline, sources: list, n_messages: int, n_sessions: int) -> dict:
    """10-message inserts into both, after the bulk build (new ids continuing the corpus and earlier inserts)."""
    held = int(index.stats()["messages"])
    extra_docs, _, extra_raw = corpus(sources, held + 10 * INSERT_BATCHES, n_sessions, first=held,
                                      per_session=max(1, n_messages // n_sessions))
    ours, theirs = [], []
    cpu_ours = cpu_theirs = 0.0
    for batch in range(INSERT_BATCHES):
        part = slice(batch * 10, batch * 10 + 10)
        cpu = time.process_time()
        started = time.perf_counter()
        index.add(extra_docs[part])
        ours.append((time.perf_counter() - started) * 1000)
        cpu_ours += time.process_time() - cpu
        cpu = time.process_time()
        started = time.perf_counter()
        baseline.insert(extra_raw[part])
        theirs.append((time.perf_counter() - started) * 1000)
        cpu_theirs += time.process_time() - cpu
    pending = index.stats()["unmerged_messages"]
    cpu, children = time.process_time(), children_cpu_seconds()
    started = time.perf_counter()
    index.merge()
    merge_s = time.perf_counter() - started
    merge_cpu = time.process_time() - cpu + children_cpu_seconds() - children
    return {"hermeslab": {**percentiles(ours), "insert_cpu_s": round(cpu_ours, 3), "merge_s": round(merge_s, 3),
                          "merge_cpu_s": round(merge_cpu, 3), "merged_messages": int(pending),
                          "merge_every_messages": index.merge_docs,
                          "merge_ms_per_10_messages": round(merge_s * 1000 * 10 / max(1, pending), 2)},
            "fts5": {**percentiles(theirs), "insert_cpu_s": round(cpu_theirs, 3)}}


def more_messages(index: SearchIndex, sources: list, count: int, n_messages: int, n_sessions: int
                  ) -> list[MessageDoc]:
    """``count`` new messages continuing the corpus after what the index holds."""
    held = int(index.stats()["messages"])
    return corpus(sources, held + count, n_sessions, first=held, per_session=max(1, n_messages // n_sessions))[0]


def fill_delta(index: SearchIndex, sources: list, n_messages: int, n_sessions: int) -> int:
    """Add messages (untimed) until one more would make a merge due: the most a process can find unmerged."""
    missing = index.merge_docs - 1 - int(index.stats()["unmerged_messages"])
    docs = more_messages(index, sources, max(0, missing), n_messages, n_sessions)
    for start in range(0, len(docs), 500):
        index.add(docs[start:start + 500])
    return int(index.stats()["unmerged_messages"])


_FIRST_SEARCH = """
import json, sys, time
from hermeslab.search import SearchIndex
started = time.perf_counter()
index = SearchIndex(sys.argv[1])
index.search(sys.argv[2], limit=3)
first = time.perf_counter() - started
started = time.perf_counter()
index.search(sys.argv[2], limit=3)
print(json.dumps([first * 1000, (time.perf_counter() - started) * 1000]))
"""


def first_search_in_a_new_process(index: SearchIndex, query: str, runs: int = 3) -> dict:
    """Opening the index and answering one query in a new process (imports not counted), then a second query."""
    package_root = Path(sys.modules[SearchIndex.__module__].__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(package_root),
                                                                     os.environ.get("PYTHONPATH")]))}
    timings = [json.loads(subprocess.run([sys.executable, "-c", _FIRST_SEARCH, str(index.path), query], env=env,
                                         check=True, capture_output=True, text=True, timeout=600).stdout)
               for _ in range(runs)]
    return {"first_search_ms": round(statistics.median(first for first, _ in timings), 1),
            "second_search_ms": round(statistics.median(second for _, second in timings), 1),
            "unmerged_messages": int(index.stats()["unmerged_messages"])}


def searches_during_merge(index: SearchIndex, docs: list[MessageDoc], queries: list[str]) -> dict:
    """Search in a loop, in this process, while ``docs`` are added from another thread and make a merge due.

    Runs until the merge is committed; a search that has to wait for the
    merge shows up as the slowest one.
    """
    adder = threading.Thread(target=index.add, args=(docs,))
    latencies: list[float] = []
    started = time.perf_counter()
    adder.start()
    while True:
        query = queries[len(latencies) % len(queries)]
        began = time.perf_counter()
        index.search(query, limit=3)
        latencies.append((time.perf_counter() - began) * 1000)
        if not adder.is_alive() and index.stats()["unmerged_messages"] < index.merge_docs:
            break
    merged_s = time.perf_counter() - started
    adder.join()
    return {"merge_every_messages": index.merge_docs, "merge_wall_s": round(merged_s, 2),
            "searches_during_merge": len(latencies), "max_search_ms_during_merge": round(max(latencies), 1),
            "p50_search_ms_during_merge": round(statistics.median(latencies), 1)}


def merging_and_opening(index: SearchIndex, sources: list, queries: dict[str, list[str]], n_messages: int,
                        n_sessions: int) -> dict:
    """A full delta: what a new process pays for its first search, then what searches pay while it is merged."""
    fill_delta(index, sources, n_messages, n_sessions)
    opening = first_search_in_a_new_process(index, queries["multi"][0])
    trigger = more_messages(index, sources, 10, n_messages, n_sessions)
    during = searches_during_merge(index, trigger, [query for kind in ("common", "multi", "rare")
                                                    for query in queries[kind]])
    return {"first_search_new_process": opening, "merge": during}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=None, help="default: one per 100 messages")
    parser.add_argument("--datasets", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "datasets")
    parser.add_argument("--workdir", type=Path, default=None, help="where the two index files go (default: a temp dir)")
    parser.add_argument("--no-trigram", action="store_true",
                        help="leave out the baseline's trigram table (it serves only CJK queries; halves its build)")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse both indexes of this corpus left in --workdir by an earlier run (builds not timed)")
    add_out_option(parser, "session_search")
    options = parser.parse_args()
    if options.messages < 100:
        parser.error("--messages must be at least 100")
    n_sessions = options.sessions or max(1, options.messages // 100)
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="session_search_"))
    workdir.mkdir(parents=True, exist_ok=True)
    record = Record("session_search")
    try:
        started = time.perf_counter()
        sources = load_sources(options.datasets)
        docs, sessions, raw = corpus(sources, options.messages, n_sessions)
        queries = query_set(docs)
        print(f"corpus: {len(docs)} messages, {len(sessions)} sessions in {time.perf_counter() - started:.1f}s",
              file=sys.stderr)

        index = SearchIndex(workdir / "hermeslab.search.sqlite")
        tuning = hermeslab_tuning(index.path)
        baseline = Baseline(workdir / "fts5.sqlite", trigram=not options.no_trigram, tuning=tuning)
        ours_build: float | None = None
        theirs_build: float | None = None
        build_cpu: dict[str, float] = {}
        held = int(index.stats()["messages"])
        if not (options.reuse and held >= len(docs) and baseline.messages() >= len(docs)):
            cpu, children = time.process_time(), children_cpu_seconds()
            started = time.perf_counter()
            index.rebuild(docs, sessions)
            ours_build = time.perf_counter() - started
            build_cpu["hermeslab"] = time.process_time() - cpu + children_cpu_seconds() - children
            print(f"hermeslab index built in {ours_build:.1f}s", file=sys.stderr)
            baseline.con.close()
            _remove_files(workdir / "fts5.sqlite")
            baseline = Baseline(workdir / "fts5.sqlite", trigram=not options.no_trigram, tuning=tuning)
            cpu = time.process_time()
            started = time.perf_counter()
            baseline.build(raw, sessions)
            theirs_build = time.perf_counter() - started
            build_cpu["fts5"] = time.process_time() - cpu
            print(f"FTS5 baseline built in {theirs_build:.1f}s", file=sys.stderr)
        else:
            baseline.prepare(sessions)
        del raw

        # The corpus is millions of live objects: keep the collector's full passes out of the timings.
        gc.collect()
        gc.freeze()
        timings = run_queries(index, baseline, queries)
        print(f"queries timed: hermeslab p50 {timings['hermeslab']['p50_ms']} ms, "
              f"FTS5 p50 {timings['fts5']['p50_ms']} ms", file=sys.stderr)
        agreement = top10_agreement(index, baseline, queries)
        inserts = insert_costs(index, baseline, sources, options.messages, n_sessions)
        lifecycle = merging_and_opening(index, sources, queries, options.messages, n_sessions)
        ours_bytes, theirs_bytes = index.size_bytes(), _size(baseline.path)
        report = {
            "benchmark": "session_search",
            "messages": len(docs),
            "sessions": len(sessions),
            "queries": {kind: len(items) for kind, items in queries.items()},
            "roles_searched": "all (user, assistant, tool) on both sides",
            "sqlite_tuning": {"hermeslab": tuning, "fts5": baseline.applied_tuning()},
            "hermeslab": {**timings["hermeslab"], "build_s": None if ours_build is None else round(ours_build, 1),
                          "build_cpu_s": round(build_cpu["hermeslab"], 1) if build_cpu else None,
                          "insert_10": inserts["hermeslab"], **lifecycle, "bytes": ours_bytes,
                          "terms": index.stats()["terms"]},
            "fts5": {**timings["fts5"], "build_s": None if theirs_build is None else round(theirs_build, 1),
                     "build_cpu_s": round(build_cpu["fts5"], 1) if build_cpu else None,
                     "insert_10": inserts["fts5"],
                     "bytes": theirs_bytes, "trigram_table": not options.no_trigram},
            "top10_agreement": agreement,
            "targets": {"p50_ms": P50_TARGET_MS, "p95_ms": P95_TARGET_MS, "inexact_queries": 0,
                        "at_messages": TARGET_MESSAGES},
            "ratios": {
                "p50_fts5_over_hermeslab": round(timings["fts5"]["p50_ms"] / timings["hermeslab"]["p50_ms"], 2),
                "p95_fts5_over_hermeslab": round(timings["fts5"]["p95_ms"] / timings["hermeslab"]["p95_ms"], 2),
                "build_hermeslab_over_fts5": None if ours_build is None else round(ours_build / theirs_build, 2),
                "reused_indexes": ours_build is None,
                "bytes_hermeslab_over_fts5": round(ours_bytes / theirs_bytes, 2),
            },
        }
        report["target_met"] = {
            "p50": timings["hermeslab"]["p50_ms"] <= P50_TARGET_MS,
            "p95": timings["hermeslab"]["p95_ms"] <= P95_TARGET_MS,
            "exact": timings["hermeslab"]["inexact_queries"] == 0,
            "at_target_size": len(docs) >= TARGET_MESSAGES,
        }
        report["all_targets_met"] = all(report["target_met"].values())
        index.close()
        baseline.con.close()
    finally:
        if options.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    record.finish(report, options.out)


def _remove_files(path: Path) -> None:
    for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        leftover.unlink(missing_ok=True)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


if __name__ == "__main__":
    main()
