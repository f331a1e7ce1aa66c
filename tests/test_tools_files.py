"""Workspace confinement and the file tools, on real files in a temporary directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hermeslab.core.config import TerminalConfig, ToolsConfig
from hermeslab.tools import ToolError, Workspace, builtin_registry, execute_tool_calls
from hermeslab.tools.files import LIST_MAX_ENTRIES, READ_MAX_LINE_CHARS, SEARCH_MAX_HITS, file_tools


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("outside secret\n")
    return workspace


@pytest.fixture()
def registry(root: Path):
    return builtin_registry(ToolsConfig(workspace=str(root)))


def run_one(registry, name: str, **arguments):
    [result] = execute_tool_calls(
        [{"id": "call-1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}],
        registry,
        retry_backoff=0.0,
    )
    return result


# ---------------------------------------------------------------- Workspace


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../../etc/passwd", "escapes the workspace root"),
        ("../secret.txt", "escapes the workspace root"),
        ("a/../../x", "escapes the workspace root"),
        ("/etc/passwd", "absolute path '/etc/passwd' is not allowed"),
        ("", "path is empty"),
        ("   ", "path is empty"),
        ("a\0b", "NUL byte"),
    ],
)
def test_workspace_refuses_paths_that_leave_the_root(root: Path, path: str, message: str):
    with pytest.raises(ToolError, match=message):
        Workspace(root).resolve(path)


def test_workspace_refuses_a_symlink_pointing_outside(root: Path):
    (root / "link").symlink_to(root.parent / "secret.txt")
    (root / "dirlink").symlink_to(root.parent)
    workspace = Workspace(root)
    with pytest.raises(ToolError, match="symlink to a location outside"):
        workspace.resolve("link")
    with pytest.raises(ToolError, match="symlink to a location outside"):
        workspace.resolve("dirlink/secret.txt")


def test_workspace_allows_paths_and_symlinks_that_stay_inside(root: Path):
    (root / "data").mkdir()
    (root / "data" / "f.txt").write_text("x")
    (root / "alias").symlink_to(root / "data")
    workspace = Workspace(root)
    real_root = Path(os.path.realpath(root))
    assert workspace.resolve("data/f.txt") == real_root / "data" / "f.txt"
    assert workspace.resolve("alias/f.txt") == real_root / "data" / "f.txt"
    assert workspace.resolve("data/../data/./f.txt") == real_root / "data" / "f.txt"
    assert workspace.resolve(".") == real_root
    assert workspace.resolve("not/yet/there.txt") == real_root / "not" / "yet" / "there.txt"
    assert workspace.relative(workspace.resolve(".")) == "."
    assert workspace.relative(workspace.resolve("alias/f.txt")) == "data/f.txt"


def test_workspace_root_must_exist(tmp_path: Path):
    with pytest.raises(ValueError, match="not an existing directory"):
        Workspace(tmp_path / "missing")


@pytest.mark.parametrize("name", ["read_file", "write_file", "list_dir", "search_files"])
def test_every_file_tool_turns_an_escape_into_an_error_result(registry, root: Path, name: str):
    (root / "link").symlink_to(root.parent / "secret.txt")
    for path in ["../../etc/passwd", "/etc/passwd", "link", "a/../../x"]:
        arguments = {"path": path}
        if name == "write_file":
            arguments["content"] = "pwned"
        if name == "search_files":
            arguments["pattern"] = "secret"
        result = run_one(registry, name, **arguments)
        assert result.is_error, (name, path)
        assert "workspace root" in result.content
        assert "outside secret" not in result.content
    assert (root.parent / "secret.txt").read_text() == "outside secret\n"


# ---------------------------------------------------------------- read_file


def test_read_file_numbers_lines_and_reports_the_total(registry, root: Path):
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    result = run_one(registry, "read_file", path="notes.txt")
    assert not result.is_error
    assert result.content == "notes.txt: 3 lines\n    1| alpha\n    2| beta\n    3| gamma"


def test_read_file_pages_large_files_and_says_how_to_continue(registry, root: Path):
    (root / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    first = run_one(registry, "read_file", path="big.txt").content.splitlines()
    assert first[0] == "big.txt: lines 1-400 of 1000"
    assert first[1] == "    1| line 1"
    assert first[-1] == "[600 more lines; call read_file with offset=401 to continue]"
    page = run_one(registry, "read_file", path="big.txt", offset=990, limit=5).content.splitlines()
    assert page == [
        "big.txt: lines 990-994 of 1000",
        "  990| line 990",
        "  991| line 991",
        "  992| line 992",
        "  993| line 993",
        "  994| line 994",
        "[6 more lines; call read_file with offset=995 to continue]",
    ]
    tail = run_one(registry, "read_file", path="big.txt", offset=999).content.splitlines()
    assert tail == ["big.txt: lines 999-1000 of 1000", "  999| line 999", " 1000| line 1000"]


def test_read_file_errors_are_specific(registry, root: Path):
    (root / "dir").mkdir()
    (root / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (root / "short.txt").write_text("one\ntwo\n")
    cases = {
        "missing.txt": "no such file: missing.txt",
        "dir": "dir is a directory; use list_dir",
        "blob.bin": "blob.bin is a binary file",
    }
    for path, message in cases.items():
        result = run_one(registry, "read_file", path=path)
        assert result.is_error and message in result.content
    past = run_one(registry, "read_file", path="short.txt", offset=5)
    assert past.is_error and past.content == "offset 5 is past the end of short.txt, which has 2 lines"
    bad_limit = run_one(registry, "read_file", path="short.txt", limit=0)
    assert bad_limit.is_error and "limit: 0 is less than the minimum of 1" in bad_limit.content


def test_read_file_handles_empty_files_long_lines_and_bad_bytes(registry, root: Path):
    (root / "empty.txt").write_text("")
    assert run_one(registry, "read_file", path="empty.txt").content == "empty.txt: empty file (0 lines)"
    (root / "wide.txt").write_text("x" * (READ_MAX_LINE_CHARS + 500) + "\n")
    wide = run_one(registry, "read_file", path="wide.txt").content
    assert f"[line cut at {READ_MAX_LINE_CHARS} of {READ_MAX_LINE_CHARS + 500} characters]" in wide
    (root / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    assert "caf\ufffd" in run_one(registry, "read_file", path="latin.txt").content


# ---------------------------------------------------------------- write_file


def test_write_file_creates_parents_and_reports_size(registry, root: Path):
    result = run_one(registry, "write_file", path="src/pkg/mod.py", content="print('hi')\nx = 1\n")
    assert not result.is_error
    assert result.content == "created src/pkg/mod.py: 18 bytes, 2 lines"
    assert (root / "src" / "pkg" / "mod.py").read_text() == "print('hi')\nx = 1\n"
    again = run_one(registry, "write_file", path="src/pkg/mod.py", content="é")
    assert again.content == "overwrote src/pkg/mod.py: 2 bytes, 1 line"
    assert (root / "src" / "pkg" / "mod.py").read_text(encoding="utf-8") == "é"


def test_write_file_is_atomic_and_keeps_the_mode(registry, root: Path):
    target = root / "run.sh"
    target.write_text("old\n")
    target.chmod(0o755)
    run_one(registry, "write_file", path="run.sh", content="new\n")
    assert target.read_text() == "new\n"
    assert target.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in root.iterdir()) == ["run.sh"]  # no temporary file left behind


def test_write_file_through_an_inside_symlink_writes_the_target(registry, root: Path):
    (root / "real.txt").write_text("before")
    (root / "alias.txt").symlink_to(root / "real.txt")
    run_one(registry, "write_file", path="alias.txt", content="after")
    assert (root / "real.txt").read_text() == "after"
    assert (root / "alias.txt").is_symlink()


def test_write_file_errors(registry, root: Path):
    (root / "dir").mkdir()
    (root / "file").write_text("x")
    on_dir = run_one(registry, "write_file", path="dir", content="x")
    assert on_dir.is_error and "dir is a directory" in on_dir.content
    under_file = run_one(registry, "write_file", path="file/child.txt", content="x")
    assert under_file.is_error and under_file.content.startswith("cannot write file/child.txt")
    missing = run_one(registry, "write_file", path="a.txt")
    assert missing.is_error and "'content' is a required property" in missing.content


def test_write_then_read_keeps_order_in_one_batch(registry):
    calls = [
        {"id": "w", "type": "function", "function": {"name": "write_file", "arguments": json.dumps({"path": "a.txt", "content": "fresh\n"})}},
        {"id": "r", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": "a.txt"})}},
    ]
    write, read = execute_tool_calls(calls, registry)
    assert not write.is_error and read.content == "a.txt: 1 line\n    1| fresh"


# ---------------------------------------------------------------- list_dir


def test_list_dir_sorts_marks_dirs_and_shows_hidden_files_and_sizes(registry, root: Path):
    (root / "b.txt").write_text("x" * 10)
    (root / ".env").write_text("A=1\n")
    (root / "src").mkdir()
    (root / "big.bin").write_bytes(b"\0" * 2048)
    (root / "to_src").symlink_to(root / "src")
    result = run_one(registry, "list_dir")
    assert result.content.splitlines() == [
        "./: 5 entries",
        ".env  (4 B)",
        "b.txt  (10 B)",
        "big.bin  (2.0 KB)",
        "src/",
        "to_src@  (symlink)",
    ]
    assert run_one(registry, "list_dir", path="src").content == "src/: empty directory"


def test_list_dir_caps_entries_and_says_how_many_are_hidden(registry, root: Path):
    for i in range(LIST_MAX_ENTRIES + 7):
        (root / f"f{i:04d}").write_text("")
    lines = run_one(registry, "list_dir", path=".").content.splitlines()
    assert lines[0] == f"./: {LIST_MAX_ENTRIES + 7} entries"
    assert len(lines) == LIST_MAX_ENTRIES + 2
    assert lines[-1] == "[7 more entries not shown]"


def test_list_dir_errors(registry, root: Path):
    (root / "f.txt").write_text("x")
    on_file = run_one(registry, "list_dir", path="f.txt")
    assert on_file.is_error and "f.txt is a file, not a directory; use read_file" in on_file.content
    missing = run_one(registry, "list_dir", path="nope")
    assert missing.is_error and missing.content == "no such directory: nope"


# ---------------------------------------------------------------- search_files


def make_tree(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (root / "src" / "util.py").write_text("def helper():\n    pass\n")
    (root / "README.md").write_text("Call main() to start.\n")
    (root / "image.png").write_bytes(b"def main\0binary")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("def main in git\n")


def test_search_files_reports_hits_as_path_line_text(registry, root: Path):
    make_tree(root)
    result = run_one(registry, "search_files", pattern=r"def \w+\(")
    assert result.content.splitlines() == [
        "2 matches in 2 files under .",
        "src/app.py:3: def main():",
        "src/util.py:1: def helper():",
    ]


def test_search_files_skips_binary_and_git_and_respects_path_and_glob(registry, root: Path):
    make_tree(root)
    everywhere = run_one(registry, "search_files", pattern="main").content
    assert "image.png" not in everywhere and ".git" not in everywhere
    assert everywhere.splitlines()[0] == "2 matches in 2 files under ."
    only_md = run_one(registry, "search_files", pattern="main", glob="*.md").content
    assert only_md.splitlines() == ["1 match in 1 file under . (files matching '*.md')", "README.md:1: Call main() to start."]
    in_src = run_one(registry, "search_files", pattern="os", path="src").content
    assert in_src.splitlines()[0] == "2 matches in 1 file under src"
    one_file = run_one(registry, "search_files", pattern="pass", path="src/util.py").content
    assert one_file.splitlines() == ["1 match in 1 file under src/util.py", "src/util.py:2:     pass"]
    none = run_one(registry, "search_files", pattern="nothing_like_this")
    assert not none.is_error and none.content == "no matches for 'nothing_like_this' under ."


def test_search_files_does_not_follow_symlinks_out_of_the_root(registry, root: Path):
    (root / "leak.txt").symlink_to(root.parent / "secret.txt")
    (root / "leakdir").symlink_to(root.parent)
    result = run_one(registry, "search_files", pattern="secret")
    assert result.content == "no matches for 'secret' under ."


def test_search_files_caps_hits_and_gives_the_total(registry, root: Path):
    (root / "many.txt").write_text("hit\n" * (SEARCH_MAX_HITS + 50))
    lines = run_one(registry, "search_files", pattern="hit").content.splitlines()
    assert lines[0].startswith(f"{SEARCH_MAX_HITS + 50} matches in 1 file under .; showing the first {SEARCH_MAX_HITS}")
    assert len(lines) == SEARCH_MAX_HITS + 1
    assert lines[-1] == f"many.txt:{SEARCH_MAX_HITS}: hit"


def test_search_files_invalid_regex_is_a_clear_error(registry, root: Path):
    result = run_one(registry, "search_files", pattern="(unclosed")
    assert result.is_error
    assert result.content.startswith("invalid regular expression '(unclosed': missing ), unterminated subpattern")


def test_search_files_missing_path(registry):
    result = run_one(registry, "search_files", pattern="x", path="nowhere")
    assert result.is_error and result.content == "no such file or directory: nowhere"


# ---------------------------------------------------------------- registry assembly


def test_builtin_registry_flags_and_descriptions(root: Path):
    registry = builtin_registry(ToolsConfig(workspace=str(root)))
    assert registry.names() == ["read_file", "write_file", "list_dir", "search_files", "todo"]
    flags = {tool.name: (tool.read_only, tool.idempotent) for tool in registry}
    assert flags == {
        "read_file": (True, True),
        "write_file": (False, False),
        "list_dir": (True, True),
        "search_files": (True, True),
        "todo": (False, False),
    }
    for tool in registry:
        assert "Use it" in tool.description and "Not for" in tool.description, tool.name


def test_builtin_registry_defaults_to_the_current_directory(root: Path, monkeypatch):
    (root / "here.txt").write_text("found me\n")
    monkeypatch.chdir(root)
    registry = builtin_registry(ToolsConfig())
    assert "found me" in run_one(registry, "read_file", path="here.txt").content


def test_file_tools_are_bound_to_their_workspace(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "only_b.txt").write_text("b\n")
    tools_a = {tool.name: tool for tool in file_tools(Workspace(tmp_path / "a"))}
    with pytest.raises(ToolError, match="no such file: only_b.txt"):
        tools_a["read_file"].handler({"path": "only_b.txt"})
    assert builtin_registry(ToolsConfig(workspace=str(tmp_path), terminal=TerminalConfig(enabled=False))).get("terminal") is None
