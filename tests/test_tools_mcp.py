"""The MCP client manager: schema normalisation, tool names, and real server processes over stdio.

The servers in tests/mcp_servers start as separate Python processes (about a
second or two each here), so one manager with all of them is shared by the
module; each test uses its own server where it disturbs one.
"""

from __future__ import annotations

import copy
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab import store
from hermeslab.core.config import Config, ConfigError, MCPServerConfig
from hermeslab.core.events import EventBus, Notice
from hermeslab.policies.loading import load_config
from hermeslab.runtime import Runtime
from hermeslab.tools import Tool, ToolError, ToolRegistry, execute_tool_calls
from hermeslab.tools.mcp.manager import MCPManager
from hermeslab.tools.mcp.names import prefixed_name
from hermeslab.tools.mcp.results import result_text
from hermeslab.tools.mcp.schema import normalize_schema
from hermeslab.tools.mcp.variables import UnsetVariable, expand_variables, expanded_settings
from hermeslab.tools.schema_check import SchemaViolation, check_schema, validate
from scripted_provider import ScriptedProvider, tool_call

SERVERS = Path(__file__).parent / "mcp_servers"


def stdio(script: str, *args: str, **settings: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVERS / script), *args], "connect_timeout": 60, **settings}


def wait_for(predicate, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# ---------------------------------------------------------------- schema normalisation


def test_an_empty_or_missing_schema_becomes_an_empty_object():
    for schema in (None, {}, "junk", []):
        assert normalize_schema(schema) == {"type": "object", "properties": {}}


def test_a_nullable_union_becomes_its_non_null_form_and_optional_stays_in_required():
    schema = {"type": "object", "required": ["text"], "properties": {
        "text": {"type": "string"},
        "times": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": None, "title": "Times"},
    }}
    out = normalize_schema(schema)
    assert out["properties"]["times"] == {"type": "integer", "minimum": 1, "title": "Times"}
    assert out["required"] == ["text"]


def test_a_union_of_several_real_types_keeps_them_without_the_null_branch():
    union = {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}
    out = normalize_schema({"properties": {"v": union}})
    assert out["properties"]["v"] == {"oneOf": [{"type": "string"}, {"type": "integer"}]}


def test_type_lists_and_aliases_become_one_json_type():
    props = {"a": {"type": ["string", "null"]}, "b": {"type": ["integer", "number"]}, "c": {"type": "int"},
             "d": {"type": "float"}, "e": {"type": "bool"}, "f": {"type": ["str"]}, "g": {"type": "list"},
             "h": {"type": "uuid"}, "i": {"type": ["string", "integer"]}}
    out = normalize_schema({"type": "object", "properties": props})["properties"]
    assert out == {"a": {"type": "string"}, "b": {"type": "number"}, "c": {"type": "integer"},
                   "d": {"type": "number"}, "e": {"type": "boolean"}, "f": {"type": "string"},
                   "g": {"type": "array"}, "h": {}, "i": {}}


def test_objects_get_their_type_and_properties_and_required_only_names_declared_ones():
    schema = {"properties": {"filter": {"properties": {"tag": {"type": "string"}}, "required": ["tag", "ghost"]},
                             "opts": {"type": "object"}},
              "required": ["filter", "missing"]}
    out = normalize_schema(schema)
    assert out["type"] == "object" and out["required"] == ["filter"]
    assert out["properties"]["filter"] == {"type": "object", "properties": {"tag": {"type": "string"}},
                                           "required": ["tag"]}
    assert out["properties"]["opts"] == {"type": "object", "properties": {}}
    assert "required" not in normalize_schema({"type": "object", "required": ["nothing"]})


def test_nested_items_definitions_and_enums_are_cleaned_too():
    schema = {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"anyOf": [{"type": "str"}, {"type": "null"}]}},
        "mode": {"enum": ["fast", "slow", None], "type": ["string", "null"]},
        "meta": {"type": "object", "additionalProperties": {"type": "double"}},
    }, "$defs": {"Item": {"properties": {"n": {"type": "long"}}}}}
    out = normalize_schema(schema)
    assert out["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert out["properties"]["mode"] == {"enum": ["fast", "slow"], "type": "string"}
    assert out["properties"]["meta"]["additionalProperties"] == {"type": "number"}
    assert out["$defs"]["Item"] == {"type": "object", "properties": {"n": {"type": "integer"}}}


def test_a_root_that_is_not_an_object_becomes_one_and_junk_property_schemas_accept_anything():
    out = normalize_schema({"type": "string", "description": "d", "properties": {"x": True, "y": [1]}})
    assert out == {"type": "object", "description": "d", "properties": {"x": {}, "y": {}}}


_TYPE = st.sampled_from(["string", "integer", "number", "boolean", "object", "array", "null", "int", "float",
                         "bool", "str", "dict", "list", "uuid"])
_NAMES = st.sampled_from(["a", "b", "c", "path", "n"])
_JUNK = st.one_of(st.none(), st.integers(), st.text(max_size=3), st.booleans())


def _schemas() -> st.SearchStrategy[Any]:
    leaf = st.fixed_dictionaries({}, optional={
        "type": st.one_of(_TYPE, st.lists(_TYPE, max_size=3), _JUNK),
        "enum": st.lists(_JUNK, max_size=3), "default": _JUNK, "required": st.one_of(st.lists(_NAMES), _JUNK),
        "properties": _JUNK})
    return st.recursive(leaf, lambda children: st.one_of(
        st.fixed_dictionaries({}, optional={
            "type": st.one_of(_TYPE, st.lists(_TYPE, max_size=3)),
            "properties": st.dictionaries(_NAMES, st.one_of(children, _JUNK), max_size=3),
            "required": st.lists(st.one_of(_NAMES, _JUNK), max_size=3),
            "additionalProperties": st.one_of(children, st.booleans())}),
        st.fixed_dictionaries({"anyOf": st.lists(st.one_of(children, st.just({"type": "null"})), min_size=1,
                                                 max_size=3)}, optional={"default": st.none()}),
        st.fixed_dictionaries({"type": st.just("array")}, optional={"items": children}),
    ), max_leaves=12)


def _nodes(schema: Any):
    if isinstance(schema, dict):
        yield schema
        for key, value in schema.items():
            if key in ("properties", "$defs") and isinstance(value, dict):
                for sub in value.values():
                    yield from _nodes(sub)
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                yield from _nodes(value)
            elif key in ("anyOf", "oneOf") and isinstance(value, list):
                for sub in value:
                    yield from _nodes(sub)


@settings(max_examples=200, deadline=None)
@given(_schemas())
def test_any_schema_normalises_to_one_a_tool_accepts(schema):
    original = copy.deepcopy(schema)
    out = normalize_schema(schema)
    assert schema == original
    check_schema(out)
    Tool(name="t", description="d", parameters=out, handler=lambda args: "")
    for node in _nodes(out):
        assert not isinstance(node.get("type"), list)
        for keyword in ("anyOf", "oneOf"):
            assert {"type": "null"} not in node.get(keyword, [])
        if node.get("type") == "object":
            assert isinstance(node["properties"], dict)
            assert set(node.get("required", [])) <= set(node["properties"])
        assert None not in node.get("enum", [1])
    try:
        validate({}, out)
    except SchemaViolation:
        pass


# ---------------------------------------------------------------- names and results


def test_tool_names_are_prefixed_and_fit_the_model_name_pattern():
    assert prefixed_name("lab", "list_sessions") == "lab__list_sessions"
    assert prefixed_name("fs", "read.file v2") == "fs__read_file_v2"
    long = prefixed_name("server", "x" * 80)
    assert len(long) == 64 and long.startswith("server__xxx") and long == prefixed_name("server", "x" * 80)
    assert prefixed_name("server", "x" * 80) != prefixed_name("server", "x" * 81)


def test_names_that_would_collide_get_distinct_stable_suffixes():
    first = prefixed_name("fs", "read.file")
    second = prefixed_name("fs", "read_file", {first})
    assert first == "fs__read_file" and second.startswith("fs__read_file-") and second != first
    assert prefixed_name("fs", "read_file", {first}) == second


def test_result_text_joins_text_and_describes_other_content():
    result = types.CallToolResult(content=[
        types.TextContent(text="first"),
        types.ImageContent(data="AAAA", mime_type="image/png"),
        types.EmbeddedResource(resource=types.TextResourceContents(uri="file:///a.txt", text="inside")),
        types.ResourceLink(uri="file:///b.txt", name="b", description="the b file"),
    ])
    assert result_text(result) == "first\n[image image/png, 3 bytes]\ninside\n[resource link file:///b.txt: the b file]"
    structured = types.CallToolResult(content=[], structured_content={"n": 1})
    assert result_text(structured) == '{"n": 1}'


# ---------------------------------------------------------------- configuration


def test_mcp_servers_load_from_yaml_with_defaults(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("mcp_servers:\n  lab:\n    command: hermeslab\n    args: [mcp-server, --http, 8080]\n"
                    "  remote:\n    url: https://example.com/mcp\n    headers: {Authorization: Bearer x}\n"
                    "    timeout: 30\n")
    config = load_config(path)
    assert config.mcp_servers["lab"] == MCPServerConfig(command="hermeslab", args=["mcp-server", "--http", "8080"])
    remote = config.mcp_servers["remote"]
    assert (remote.url, remote.headers, remote.timeout, remote.connect_timeout, remote.keepalive_interval) == (
        "https://example.com/mcp", {"Authorization": "Bearer x"}, 30.0, 10.0, 30.0)
    assert Config.from_dict(config.to_dict()) == config


@pytest.mark.parametrize("servers, message", [
    ({"a__b": {"command": "x"}}, "server name 'a__b'"),
    ({"_a": {"command": "x"}}, "server name '_a'"),
    ({"a": {"command": "x", "url": "http://h"}}, "mcp_servers.a: set either command"),
    ({"a": {}}, "mcp_servers.a: set either command"),
    ({"a": {"url": "ftp://h"}}, "mcp_servers.a.url"),
    ({"a": {"command": "x", "timeout": 0}}, "mcp_servers.a.timeout"),
    ({"a": {"command": "x", "keepalive_interval": -1}}, "mcp_servers.a.keepalive_interval: expected 0 (off)"),
    ({"a": {"command": "x", "args": "one two"}}, "mcp_servers.a.args"),
    ({"a": {"command": "x", "env": {"K": ["v"]}}}, "mcp_servers.a.env"),
    ({"a": {"command": "x", "cwd": "/"}}, "mcp_servers.a: unknown key 'cwd'"),
    ({"a": "x"}, "mcp_servers.a: expected a mapping"),
    (["a"], "mcp_servers: expected a mapping"),
])
def test_bad_mcp_server_settings_name_the_key(servers, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Config.from_dict({"mcp_servers": servers})


def test_the_config_digest_ignores_mcp_secrets_but_not_the_server():
    def digest(**entry):
        return Config.from_dict({"mcp_servers": {"a": {"command": "x", **entry}}}).digest()

    assert digest(env={"TOKEN": "1"}, headers={"K": "1"}) == digest(env={"TOKEN": "2"}, headers={"K": "2"})
    assert digest() != digest(args=["--other"])


def test_variables_are_expanded_from_the_environment_and_a_missing_one_is_named():
    environ = {"TOKEN": "s3cret", "PORT": "8080"}
    assert expand_variables("Bearer ${TOKEN}", environ, "x") == "Bearer s3cret"
    assert expand_variables("http://h:${PORT}/${TOKEN}$TOKEN {TOKEN}", environ, "x") == "http://h:8080/s3cret$TOKEN {TOKEN}"
    with pytest.raises(UnsetVariable, match=r"mcp_servers.gh.headers.Authorization uses \$\{GH_TOKEN\}"):
        expand_variables("Bearer ${GH_TOKEN}", environ, "mcp_servers.gh.headers.Authorization")
    config = MCPServerConfig.from_mapping("gh", {"url": "https://h/${PORT}", "headers": {"Authorization": "${TOKEN}"}})
    expanded = expanded_settings("gh", config, environ)
    assert (expanded.url, expanded.headers) == ("https://h/8080", {"Authorization": "s3cret"})
    assert config.headers == {"Authorization": "${TOKEN}"}  # the configured form is kept, secrets stay out of it


def test_the_manager_refuses_events_without_a_session():
    with pytest.raises(ValueError, match="session_id"):
        MCPManager({}, bus=EventBus())


# ---------------------------------------------------------------- real servers


@pytest.fixture(scope="module")
def servers():
    """One manager over every test server, started once (the processes take a moment to import)."""
    bus = EventBus()
    notices: list[Notice] = []
    bus.subscribe(lambda event: notices.append(event) if isinstance(event, Notice) else None)
    registry = ToolRegistry()
    manager = MCPManager({
        "a": stdio("echo.py", "A"),
        "b": stdio("echo.py", "B", timeout=2),
        "victim": stdio("echo.py", "V"),
        "frozen": stdio("echo.py", "F", keepalive_interval=0.5),
        "crash": stdio("crash.py"),
        "hang": stdio("hang.py", connect_timeout=1.5),
        "missing": {"command": str(SERVERS / "no-such-server")},
        "labelled": stdio("echo.py", "${HERMESLAB_TEST_LABEL}"),
        "unset": stdio("echo.py", "${HERMESLAB_TEST_UNSET}"),
    }, bus=bus, session_id=lambda: "mcp-tests")
    os.environ["HERMESLAB_TEST_LABEL"] = "L"
    os.environ.pop("HERMESLAB_TEST_UNSET", None)
    try:
        manager.start(registry)
    finally:
        del os.environ["HERMESLAB_TEST_LABEL"]
    yield manager, registry, notices
    manager.close()
    assert len(registry) == 0


def test_working_servers_register_and_broken_ones_say_why(servers):
    manager, registry, notices = servers
    status = manager.status()
    for name in ("a", "b", "victim", "frozen"):
        assert status[name].state == "ready" and f"{name}__echo" in status[name].tools
    assert status["crash"].state == "failed" and "the database URL is not set" in status["crash"].error
    assert status["hang"].error == "no answer to the MCP handshake within 1.5 s"
    assert "not found" in status["missing"].error
    assert status["unset"].error == "mcp_servers.unset.args[1] uses ${HERMESLAB_TEST_UNSET}, which is not set in " \
                                    "the environment"
    assert registry.get("labelled__echo").handler({"text": "hi"}) == "L: hi"
    assert not any(name.startswith(("crash__", "hang__", "missing__", "unset__")) for name in registry.names())
    errors = [n.text for n in notices if n.level == "error"]
    assert len(errors) == 4 and all("failed to start" in text for text in errors)
    assert all(n.session_id == "mcp-tests" for n in notices)


def test_two_servers_with_the_same_tool_name_are_both_callable(servers):
    _, registry, _ = servers
    assert registry.get("a__echo").handler({"text": "hi"}) == "A: hi"
    assert registry.get("b__echo").handler({"text": "hi", "times": 2}) == "B: hi B: hi"


def test_annotations_and_normalised_schemas_reach_the_registry(servers):
    _, registry, _ = servers
    echo, pid = registry.get("a__echo"), registry.get("a__pid")
    assert echo.read_only and echo.idempotent and not pid.read_only and not pid.idempotent
    assert echo.description == "Repeat the text, prefixed with the server's label."
    assert echo.parameters["properties"]["times"] == {"type": "integer", "title": "Times"}
    assert echo.parameters["required"] == ["text"]


def test_a_slow_call_times_out_as_a_tool_error_and_the_server_stays_usable(servers):
    manager, registry, _ = servers
    call = tool_call("c1", "b__sleep", '{"seconds": 30}')
    [result] = execute_tool_calls([call], registry)
    assert result.is_error and result.content == "MCP tool 'sleep' on server 'b' did not answer within 2 s; " \
                                                 "the call was cancelled"
    with pytest.raises(ToolError, match="did not answer within 0.3 s"):
        manager.call("a", "sleep", {"seconds": 30}, timeout=0.3)
    assert manager.call("b", "echo", {"text": "still here"}) == "B: still here"


def test_every_failure_reaches_the_model_as_an_error_result(servers):
    manager, registry, _ = servers
    calls = [tool_call("1", "a__fail", '{"message": "disk full"}'),
             tool_call("2", "a__echo", '{"text": 5}'),
             tool_call("3", "a__echo", "{not json"),
             tool_call("4", "a__echo", '{"text": "fine"}')]
    results = execute_tool_calls(calls, registry)
    assert [r.is_error for r in results] == [True, True, True, False]
    assert results[0].content == "MCP tool 'fail' on server 'a' reported an error: Error executing tool fail: disk full"
    assert results[1].content.startswith("invalid arguments for a__echo")
    with pytest.raises(ToolError, match="(?s)reported an error: .*valid string"):
        manager.call("a", "echo", {"text": 5})  # past the local check, the server's own validation answers
    with pytest.raises(ToolError, match="failed to start"):
        manager.call("crash", "anything")
    with pytest.raises(ToolError, match="no MCP server named 'nope'"):
        manager.call("nope", "echo")


def test_an_announced_tool_list_change_registers_the_new_tool(servers):
    _, registry, _ = servers
    before = registry.names()
    assert registry.get("a__grow").handler({"name": "fresh"}) == "added fresh"
    assert wait_for(lambda: "a__fresh" in registry, timeout=20)
    assert registry.get("a__fresh").handler({}) == "A: fresh answers"
    assert registry.names() == [*before, "a__fresh"]  # the tools that did not change keep their place


def test_a_killed_server_is_reconnected_and_the_next_call_waits_for_it(servers):
    manager, registry, notices = servers
    first = int(manager.call("victim", "pid"))
    os.kill(first, signal.SIGKILL)
    assert wait_for(lambda: manager.status()["victim"].state != "ready", timeout=20)
    second = int(registry.get("victim__pid").handler({}))  # waits for the reconnect instead of failing
    assert second != first
    status = manager.status()["victim"]
    assert status.state == "ready" and status.connects == 2 and "victim__echo" in status.tools
    texts = [n.text for n in notices if "'victim'" in n.text]
    assert any("disconnected: the server closed the connection" in t for t in texts)
    assert any("reconnected" in t for t in texts)


def test_missed_heartbeats_mark_a_server_unavailable_and_it_comes_back(servers):
    manager, _, notices = servers
    before = manager.status()["frozen"].connects
    with pytest.raises(ToolError, match="did not answer"):
        manager.call("frozen", "freeze", {"seconds": 60}, timeout=0.3)
    assert wait_for(lambda: manager.status()["frozen"].connects > before, timeout=60)
    assert any("'frozen' disconnected: 2 heartbeats in a row went unanswered" in n.text for n in notices)
    assert manager.call("frozen", "echo", {"text": "back"}) == "F: back"


def test_the_agent_calls_an_mcp_tool_end_to_end_and_the_log_records_it(tmp_path):
    lab_path = tmp_path / "lab.duckdb"
    config = Config.from_dict({"store": {"path": str(lab_path)}, "mcp_servers": {"echo": stdio("echo.py", "E")}})
    provider = ScriptedProvider([
        {"content": "", "tool_calls": [tool_call("call-1", "echo__echo", '{"text": "ping"}')]},
        {"content": "The server said E: ping."},
    ])
    with Runtime(config) as runtime:
        runtime.agent.provider = provider
        result = runtime.agent.chat("ask the echo server")
        session_id = runtime.agent.session.id
        registry = runtime.tools
    assert "echo__echo" in [tool["function"]["name"] for tool in provider.requests[0].tools]
    assert result.status == "completed"
    lab = store.open(lab_path)
    calls = lab.tool_calls(session_id)
    assert calls[["name", "result", "is_error"]].values.tolist() == [["echo__echo", "E: ping", False]]
    tool_rows = lab.messages(session_id).query("role == 'tool'")
    assert tool_rows["content"].tolist() == ["E: ping"] and tool_rows["tool_name"].tolist() == ["echo__echo"]
    notices = lab.events(session_id, kind="notice")["payload"].tolist()
    assert any("MCP server 'echo' connected with 6 tools" in text for text in notices)
    assert "echo__echo" not in registry
