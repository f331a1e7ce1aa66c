"""Stored benchmark results, and the README's benchmark figures checked against them.

``benchmarks/results/<benchmark>.json`` holds the JSON line of the latest run
of each benchmark, with the commit measured, the machine load and CPU seconds.
Every README paragraph or table that quotes benchmark figures names the file
it quotes (``benchmarks/results/<name>.json``); a table takes the file named by
the paragraph that introduces it. Every number in such a block (outside code
spans) must be a value of a file it names, rounded as printed, in the unit
printed after it: a figure in ms must be a value whose key (or an enclosing
key) says ms (``p50_ms``, ``commit_latency_ms_per_turn.p50``), or one in
seconds times 1000; ``s``, ``µs``, ``MB`` (from bytes or ``_mb``), ``GB``,
``K`` and ``M`` (thousands, millions), ``%`` (of a fraction, or as stored) and
``×`` (a key naming a ratio or speedup) likewise; a figure without a unit must
be a stored value as it is.

Each such block also lists, in an HTML comment GitHub does not show
(``<!-- figures: hermeslab.p50_ms fts5.by_kind.*.p95_ms ... -->``), the keys
its figures come from, as dotted paths (list positions left out, ``*`` for
any one key or part of one); a figure must be the value of one of those keys.
A table takes the list of the paragraph that introduces it. A block that
names a benchmark script and quotes numbers without naming a results file is
a figure nothing stored backs.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"

CITATION = re.compile(r"benchmarks/results/([A-Za-z0-9_]+)\.json")
FIGURES = re.compile(r"<!--\s*figures:(.*?)-->", re.DOTALL)
SCRIPT = re.compile(r"benchmarks/(?!results/)[A-Za-z0-9_]+\.py")
#: A number as printed: digits with optional thousands commas and decimals, then its unit if any; not part of
#: a word, a path or a version (``tau2``, ``p50``, ``cl100k``, ``0.19.0``).
NUMBER = re.compile(r"(?<![\w./\\-])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\d,]*\.\d)(?!\d)"
                    r"(?:\s?(ms|µs|s|K|M|MB|GB|×|%)(?![A-Za-z]))?")


# ---------------------------------------------------------------- the results files


def results_files() -> list[Path]:
    return sorted(RESULTS.glob("*.json"))


def load_result(path: Path) -> dict:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) == 1, f"{path.name}: expected one JSON line, found {len(lines)}"
    value = json.loads(lines[0])
    assert isinstance(value, dict), f"{path.name}: not a JSON object"
    return value


def leaves(value: object, key: str = ""):
    """(dotted key path, value) of every value in a JSON document; dict keys that are numbers count too."""
    if isinstance(value, dict):
        for name, item in value.items():
            path = f"{key}.{name}" if key else name
            try:
                yield key, float(name)
            except ValueError:
                pass
            yield from leaves(item, path)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item, key)
    else:
        yield key, value


def numbers_of(result: dict) -> list[tuple[str, float]]:
    """(key path, value) of every finite number in a result."""
    return [(path.lower(), float(v)) for path, v in leaves(result)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def _says(path: str, *units: str) -> bool:
    """Whether a key on the path ends in or contains one of the unit words (``_ms``, ``seconds``, ...)."""
    return any(part.endswith(unit) or f"{unit}_" in part for part in path.split(".") for unit in units)


def scales(unit: str, path: str) -> tuple[float, ...]:
    """The factors by which a stored value at ``path`` may be printed with ``unit``."""
    if unit == "ms":
        return ((1.0,) if _says(path, "_ms") else ()) + ((1e3,) if _says(path, "_s", "seconds") else ())
    if unit == "s":
        return ((1.0,) if _says(path, "_s", "seconds") else ()) + ((1e-3,) if _says(path, "_ms") else ())
    if unit == "µs":
        return ((1.0,) if _says(path, "_us") else ()) + ((1e3,) if _says(path, "_ms") else ())
    if unit in ("MB", "GB"):
        factor = 1e-6 if unit == "MB" else 1e-9
        return ((factor,) if _says(path, "bytes") else ()) + ((1.0,) if _says(path, f"_{unit.lower()}") else ())
    if unit == "K":
        return (1e-3,)
    if unit == "M":
        return (1e-6,)
    if unit == "%":
        return (100.0, 1.0)
    if unit == "×":
        return (1.0,) if _says(path, "ratio", "speedup") else ()
    return (1.0,)


def test_there_are_stored_results():
    assert results_files(), "benchmarks/results/ holds no results"


@pytest.mark.parametrize("path", results_files(), ids=lambda p: p.name)
def test_every_results_file_is_one_json_object_with_commit_load_and_cpu(path: Path):
    result = load_result(path)
    assert result.get("benchmark"), f"{path.name}: no benchmark name"
    assert re.fullmatch(r"[0-9a-f]{40}", str(result.get("commit"))), f"{path.name}: no commit"
    assert "dirty" in result or "uncommitted_changes" in result, f"{path.name}: does not say whether the tree was dirty"
    for before, after in (("load_before", "load_after"), ("loadavg_before", "loadavg_after")):
        if before in result:
            for key in (before, after):
                load = result.get(key)
                assert isinstance(load, list) and len(load) == 3 and all(isinstance(v, (int, float)) for v in load), \
                    f"{path.name}: {key} is not a load average triple"
            break
    else:
        pytest.fail(f"{path.name}: no load average before and after the run")
    cpu = [v for k, v in leaves(result) if "cpu" in k.lower() and isinstance(v, (int, float))
           and not isinstance(v, bool)]
    assert cpu, f"{path.name}: no CPU seconds"


# ---------------------------------------------------------------- the README's figures


def readme_blocks(text: str) -> list[str]:
    """Paragraphs, list items and tables of the README, without fenced code."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return [block.strip() for block in re.split(r"\n\s*\n", text) if block.strip()]


def is_table(block: str) -> bool:
    return all(line.lstrip().startswith("|") for line in block.splitlines())


def cited_blocks(text: str) -> list[tuple[str, list[str], list[str]]]:
    """(block without its key list, results files it quotes, keys its figures come from) for every block
    that quotes a results file."""
    found = []
    previous: tuple[list[str], list[str]] = ([], [])
    for block in readme_blocks(text):
        names = CITATION.findall(block)
        keys = [key.lower() for comment in FIGURES.findall(block) for key in comment.split()]
        block = FIGURES.sub(" ", block).strip()
        if not names and is_table(block):
            names, keys = previous
        if names:
            found.append((block, names, keys))
        if not is_table(block):
            previous = (names, keys)
    return found


def printed_numbers(block: str) -> list[tuple[str, float, int, str]]:
    """(as printed, value, decimals, unit) of every figure in a block, outside code spans."""
    prose = re.sub(r"`[^`]*`", " ", block)
    prose = CITATION.sub(" ", prose)
    prose = re.sub(r"https?://\S+", " ", prose)
    return [(m.group(0), float((m.group(1) + ("." + m.group(2) if m.group(2) else "")).replace(",", "")),
             len(m.group(2) or ""), m.group(3) or "") for m in NUMBER.finditer(prose)]


def backed(printed: float, decimals: int, unit: str, values: list[tuple[str, float]]) -> bool:
    """Whether some stored value, in the printed unit, rounds to the printed figure."""
    tolerance = 0.5 * 10.0 ** -decimals + 1e-9
    return any(abs(value * scale - printed) <= tolerance for path, value in values for scale in scales(unit, path))


def unbacked(block: str, names: list[str], keys: list[str]) -> list[str]:
    """The figures of ``block`` that no listed key of the named files holds, in the printed unit."""
    values = [(path, value) for name in names for path, value in numbers_of(load_result(RESULTS / f"{name}.json"))
              if any(fnmatch.fnmatchcase(path, key) for key in keys)]
    return [shown for shown, number, decimals, unit in printed_numbers(block)
            if not backed(number, decimals, unit, values)]


def test_the_readme_quotes_stored_results():
    blocks = cited_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "the README names no results file"
    cited = {name for _, names, _ in blocks for name in names}
    missing = sorted(name for name in cited if not (RESULTS / f"{name}.json").exists())
    assert not missing, f"the README cites results that are not stored: {missing}"


@pytest.mark.parametrize("block,names,keys", cited_blocks(README.read_text(encoding="utf-8")),
                         ids=lambda v: v[:60] if isinstance(v, str) else None)
def test_every_readme_figure_matches_the_results_file_it_cites(block: str, names: list[str], keys: list[str]):
    assert printed_numbers(block), f"a block citing {names} quotes no figure"
    assert keys, f"a block citing {names} does not list the keys of its figures (<!-- figures: ... -->):\n{block}"
    values = [path for name in names for path, _ in numbers_of(load_result(RESULTS / f"{name}.json"))]
    dead = [key for key in keys if not any(fnmatch.fnmatchcase(path, key) for path in values)]
    assert not dead, f"listed keys that {', '.join(names)} does not hold: {dead}"
    wrong = unbacked(block, names, keys)
    assert not wrong, (f"figures not found (rounded as printed) under the listed keys of {', '.join(names)}: "
                       f"{wrong}\n--- in:\n{block}")


# ---------------------------------------------------------------- each table figure in its own row


class Stored(tuple):
    """One stored number: (entry, segments of its key path, positions of the segments that name an entry,
    value). The entry names what the value belongs to, outermost first: an element of a list of objects, or
    one of several objects keyed by name (``()``: no such entry)."""

    entry = property(lambda self: self[0])
    segments = property(lambda self: self[1])
    naming = property(lambda self: self[2])
    value = property(lambda self: self[3])

    @property
    def path(self) -> str:
        return ".".join(self.segments).lower()


def records(result: dict) -> list[Stored]:
    """Every finite number of a result with the entries it belongs to (its key path is ``numbers_of``'s)."""
    found: list[Stored] = []

    def walk(value: object, segments: tuple[str, ...], naming: frozenset, entry: tuple[str, ...]) -> None:
        if isinstance(value, dict):
            keyed = sum(isinstance(item, dict) for item in value.values()) >= 2
            for name, item in value.items():
                inner = keyed and isinstance(item, dict)
                walk(item, segments + (name,), naming | {len(segments)} if inner else naming,
                     entry + (".".join(segments + (name,)),) if inner else entry)
        elif isinstance(value, list):
            for position, item in enumerate(value):
                walk(item, segments, naming, entry + (f"{'.'.join(segments)}[{position}]",)
                     if isinstance(item, dict) else entry)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            found.append(Stored((entry, segments, naming, float(value))))

    walk(result, (), frozenset(), ())
    return found


def _backings(shown: tuple[str, float, int, str], values: list[Stored]) -> list[Stored]:
    """The stored numbers the figure prints, in its unit and rounding."""
    _, number, decimals, unit = shown
    tolerance = 0.5 * 10.0 ** -decimals + 1e-9
    return [stored for stored in values
            if any(abs(stored.value * scale - number) <= tolerance for scale in scales(unit, stored.path))]


def _one_entry(figures: list[list[Stored]], *, exact: bool = False) -> bool:
    """Whether one entry holds every figure (an entry inside it too, unless ``exact``); values outside any
    entry fit every one."""
    if all(any(not stored.entry for stored in backing) for backing in figures):
        return True
    candidates = {stored.entry if exact else stored.entry[:depth] for backing in figures for stored in backing
                  for depth in range(1, len(stored.entry) + 1)}
    return any(all(any(not stored.entry or (stored.entry == candidate if exact else
                                            stored.entry[:len(candidate)] == candidate) for stored in backing)
                   for backing in figures) for candidate in candidates)


def _same_quantity(a: Stored, b: Stored) -> bool:
    """Two stored numbers measure the same thing of different entries: their key paths differ only where a
    segment names an entry."""
    return len(a.segments) == len(b.segments) and all(
        x == y or (i in a.naming and i in b.naming) for i, (x, y) in enumerate(zip(a.segments, b.segments)))


def _one_quantity(row: list[list[list[Stored]]]) -> bool:
    """Whether, across the cells of a row, the k-th figures print one quantity (of different entries)."""
    positions = max((len(cell) for cell in row), default=0)
    for k in range(positions):
        shown = [cell[k] for cell in row if k < len(cell)]
        if len(shown) > 1 and not any(all(any(_same_quantity(first, other) for other in backing)
                                          for backing in shown[1:]) for first in shown[0]):
            return False
    return True


def misplaced_rows(block: str, names: list[str], keys: list[str]) -> list[str]:
    """The rows of a table whose figures are not one entry's (a row per entry), unless every column is one
    entry's, every cell one entry's and every row one quantity (a column per entry): a figure moved to
    another row shows here."""
    values = [stored for name in names for stored in records(load_result(RESULTS / f"{name}.json"))
              if any(fnmatch.fnmatchcase(stored.path, key) for key in keys)]
    rows = [line.strip().strip("|").split("|") for line in block.splitlines()
            if not re.fullmatch(r"[\s|:-]*", line)]
    grid = [[[_backings(shown, values) for shown in printed_numbers(cell)] for cell in row[1:]] for row in rows]
    by_row = [not _one_entry([backing for cell in row for backing in cell]) for row in grid]
    if not any(by_row):
        return []
    columns = max((len(row) for row in grid), default=0)
    if (all(_one_entry([backing for row in grid if j < len(row) for backing in row[j]]) for j in range(columns))
            and all(_one_entry(cell, exact=True) for row in grid for cell in row)
            and all(_one_quantity(row) for row in grid)):
        return []
    return [rows[i][0].strip() for i, bad in enumerate(by_row) if bad]


def table_blocks() -> list[tuple[str, list[str], list[str]]]:
    return [(block, names, keys) for block, names, keys in cited_blocks(README.read_text(encoding="utf-8"))
            if is_table(block)]


@pytest.mark.parametrize("block,names,keys", table_blocks(), ids=lambda v: v[:60] if isinstance(v, str) else None)
def test_every_table_figure_stays_in_its_row(block: str, names: list[str], keys: list[str]):
    wrong = misplaced_rows(block, names, keys)
    assert not wrong, f"rows whose figures are not one stored entry's ({', '.join(names)}): {wrong}\n{block}"


def _swapped(block: str, first: int, second: int, column: int) -> str | None:
    """``block`` with the first figures of one column's cells in two rows swapped; None when either has none."""
    lines = block.splitlines()
    cells = [lines[index].strip().strip("|").split("|") for index in (first, second)]
    shown = [printed_numbers(row[column])[:1] if column < len(row) else [] for row in cells]
    if not all(shown):
        return None
    for row, mine, theirs in ((cells[0], shown[0][0][0], shown[1][0][0]), (cells[1], shown[1][0][0], shown[0][0][0])):
        row[column] = row[column].replace(mine, theirs, 1)
    lines[first], lines[second] = ("|" + "|".join(row) + "|" for row in cells)
    return "\n".join(lines)


def swap_trials(block: str, names: list[str], keys: list[str]) -> tuple[int, list[tuple]]:
    """(swaps tried, swaps the check let through) over every pair of rows and column of one README table.

    A swap is tried where both figures are stored once (under the listed keys) and each row has another
    figure that tells the rows apart (a row holding a single figure, or two rows whose other figures are all
    the same, are bound to their rows only by their words, which no check reads)."""
    values = [stored for name in names for stored in records(load_result(RESULTS / f"{name}.json"))
              if any(fnmatch.fnmatchcase(stored.path, key) for key in keys)]
    lines = block.splitlines()
    data = [index for index, line in enumerate(lines) if not re.fullmatch(r"[\s|:-]*", line)]
    tried, missed = 0, []
    for first, second in itertools.combinations(data, 2):
        for column in range(1, len(lines[first].split("|"))):
            swapped = _swapped(block, first, second, column)
            cells = [lines[index].strip().strip("|").split("|") for index in (first, second)]
            if swapped is None or column >= min(len(cells[0]), len(cells[1])):
                continue
            figures = [printed_numbers(row[column])[0] for row in cells]
            if figures[0][1] == figures[1][1] or any(len(_backings(f, values)) != 1 for f in figures):
                continue
            if any(len(printed_numbers("|".join(row[1:]))) < 2 for row in cells):
                continue
            others = [[cell.strip() for index, cell in enumerate(row) if index not in (0, column)] for row in cells]
            if others[0] == others[1]:
                continue
            tried += 1
            if not misplaced_rows(swapped, names, keys) and not unbacked(swapped, names, keys):
                missed.append((cells[0][0].strip(), cells[1][0].strip(), figures[0][0], figures[1][0]))
    return tried, missed


@pytest.mark.parametrize("block,names,keys", table_blocks(), ids=lambda v: v[:60] if isinstance(v, str) else None)
def test_swapping_two_rows_figures_in_a_readme_table_fails_the_check(block: str, names: list[str], keys: list[str]):
    """Every swap of two figures between two rows that the rows' other figures tell apart is caught."""
    _, missed = swap_trials(block, names, keys)
    assert not missed, f"swaps the check let through: {missed}"


def test_the_swap_check_tries_swaps_in_most_readme_tables():
    """A table whose swaps were all exempt would pass without being checked; most tables must be tried."""
    tried = [swap_trials(block, names, keys)[0] for block, names, keys in table_blocks()]
    assert sum(tried) >= 10 and sum(1 for count in tried if count) * 2 >= len(tried), tried


def test_no_benchmark_figure_without_a_stored_result():
    offenders = []
    for block in readme_blocks(README.read_text(encoding="utf-8")):
        if SCRIPT.search(block) and not CITATION.search(block) and printed_numbers(block):
            offenders.append(block[:200])
    assert not offenders, "blocks quoting a benchmark's figures without naming its results file:\n" + \
        "\n---\n".join(offenders)


# ---------------------------------------------------------------- the checker itself


def test_the_checker_rounds_as_printed_in_the_printed_unit_and_rejects_other_figures():
    values = numbers_of({"p50_ms": 6.2849, "max_ms": 1_729.4, "bytes": 667_123_456, "share": 0.2,
                         "build_s": 30.04, "ratio_seed_cold": 4.85, "commit_ms_per_turn": {"p95": 12.5},
                         "window": 16_000})
    assert backed(6.3, 1, "ms", values) and backed(6.28, 2, "ms", values) and backed(1729, 0, "ms", values)
    assert backed(1.7, 1, "s", values)  # 1,729.4 ms
    assert backed(30, 0, "s", values) and backed(30_040, 0, "ms", values)
    assert backed(667, 0, "MB", values) and backed(20, 0, "%", values) and backed(4.85, 2, "×", values)
    assert backed(13, 0, "ms", values)  # the unit is named by an enclosing key
    assert backed(16, 0, "K", values) and backed(16_000, 0, "", values)
    assert not backed(6.4, 1, "ms", values) and not backed(31, 0, "s", values)
    assert not backed(20, 0, "", values)  # 0.2 is not 20 without a percent sign
    assert not backed(6.3, 1, "s", values) and backed(6_285, 0, "µs", values)  # ms as ms, or µs
    assert not backed(30.04, 2, "×", values)  # not a ratio
    assert not backed(16, 0, "", values)
    figures = [(shown, unit) for shown, _, _, unit in printed_numbers(
        "ran 1,000,000 messages in 6.3 ms on tau2 (p50, `x=7`) with Hermes 0.19.0: 17–38× faster, "
        "20% less, 768 MB, 10,000 sessions, 200K window, 12.02 s wall")]
    assert figures == [("1,000,000", ""), ("6.3 ms", "ms"), ("17", ""), ("38×", "×"), ("20%", "%"),
                       ("768 MB", "MB"), ("10,000", ""), ("200K", "K"), ("12.02 s", "s")]


# ---------------------------------------------------------------- the worker's timing hooks the benchmarks use


@pytest.mark.slow
def test_the_reference_worker_times_its_own_work():
    from shared_data import hermes_venv

    from hermeslab.reference.client import HermesReference

    messages = [{"role": "system", "content": "You are a careful agent."}]
    for i in range(12):
        messages += [{"role": "user", "content": f"question {i} " + "about the parser " * 300},
                     {"role": "assistant", "content": f"answer {i} " + "the parser reads tokens " * 300}]
    with HermesReference(hermes_venv(), timeout=120) as ref:
        before = ref.worker_cpu_seconds()
        timed = ref.time_compress_cpu(messages[1:], context_length=8_000, repeats=3)
        assert len(timed["ms"]) == len(timed["cpu_ms"]) == 3
        assert all(ms > 0 and cpu >= 0 for ms, cpu in zip(timed["ms"], timed["cpu_ms"]))
        replayed = ref.replay_many_timed([{"id": "a", "messages": messages}], context_length=8_000)
        assert replayed["results"][0]["id"] == "a" and replayed["results"][0]["totals"]["calls"] == 12
        assert replayed["seconds"] > 0 and replayed["cpu_seconds"] > 0
        assert replayed["results"] == ref.replay_many([{"id": "a", "messages": messages}], context_length=8_000)
        assert ref.worker_cpu_seconds() > before
        assert isinstance(ref.time_compress(messages[1:], context_length=8_000, repeats=1), list)
