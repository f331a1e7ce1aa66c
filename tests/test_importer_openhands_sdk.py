"""OpenHands 1.x conversations: an events/ folder written by the SDK's own EventLog, and broken copies of it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.eval.importers import import_paths
from hermeslab.eval.importers.openhands_sdk import FORMAT
from hermeslab.recordings import Recording
from hermeslab.reference.openhands.venv import SDK
from hermeslab.reference.venv import venv_python
from tests.importer_props import read_all
from tests.shared_data import openhands_venv

# Runs under the SDK's own Python: each event is built with the SDK's event classes and appended with its
# EventLog on a LocalFileStore, as a conversation persists them. Two calls in one reply, one answered by an
# error; a condensation with its summary; a call left unanswered.
DRIVER = r'''
import json, sys
from openhands.sdk.conversation.event_store import EventLog
from openhands.sdk.event import (ActionEvent, AgentErrorEvent, Condensation, CondensationSummaryEvent, MessageEvent,
                                 ObservationEvent, SystemPromptEvent)
from openhands.sdk.io import LocalFileStore
from openhands.sdk.llm import Message, MessageToolCall, TextContent
from openhands.sdk.tool.schema import Observation

class ShellObservation(Observation):
    pass

def text(value):
    return [TextContent(text=value)]

def action(call_id, command, response, thought=""):
    return ActionEvent(thought=text(thought) if thought else [], tool_name="terminal", tool_call_id=call_id,
                       tool_call=MessageToolCall(id=call_id, name="terminal", arguments=json.dumps({"command": command}),
                                                 origin="completion"), llm_response_id=response, action=None)

log = EventLog(LocalFileStore(sys.argv[1]), dir_path="events")
log.append(SystemPromptEvent(system_prompt=TextContent(text="You are OpenHands."), tools=[]))
log.append(MessageEvent(source="user", llm_message=Message(role="user", content=text("List the files, twice."))))
first = action("call_ls", "ls", "resp-1", "Listing them both ways.")
log.append(first)
second = action("call_la", "ls -a", "resp-1")
log.append(second)
log.append(ObservationEvent(observation=ShellObservation(content=text("a.txt b.txt")), action_id=first.id,
                            tool_name="terminal", tool_call_id="call_ls"))
log.append(AgentErrorEvent(error="ls -a timed out", tool_name="terminal", tool_call_id="call_la"))
log.append(Condensation(forgotten_event_ids=[first.id, second.id], summary="Two listings.", summary_offset=1,
                        llm_response_id="resp-c"))
log.append(CondensationSummaryEvent(summary="Two listings."))
log.append(MessageEvent(source="agent", llm_message=Message(role="assistant", content=text("a.txt and b.txt."))))
log.append(MessageEvent(source="user", llm_message=Message(role="user", content=text("Now finish."))))
log.append(action("call_finish", "exit", "resp-2", "Finishing."))
'''


@pytest.fixture(scope="module")
def events_folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("openhands-sdk") / "conversation-7"
    root.mkdir()
    env = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
    env["OPENHANDS_SUPPRESS_BANNER"] = "1"
    result = subprocess.run([str(venv_python(openhands_venv(SDK))), "-I", "-c", DRIVER, str(root)],
                            capture_output=True, text=True, env=env, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "events"


def test_the_sdks_own_event_log_is_the_conversation_it_sent(events_folder):
    report = import_paths([events_folder.parent.parent])
    (recording,) = report.recordings
    assert not report.skipped and report.taken[0].format == "openhands-sdk"
    calls = [{"id": i, "type": "function", "function": {"name": "terminal", "arguments": json.dumps({"command": c})}}
             for i, c in (("call_ls", "ls"), ("call_la", "ls -a"))]
    assert recording.id == "openhands/conversation-7"
    assert recording.messages == [
        {"role": "system", "content": "You are OpenHands."},
        {"role": "user", "content": "List the files, twice."},
        {"role": "assistant", "content": "Listing them both ways.", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_ls", "content": "a.txt b.txt"},
        {"role": "tool", "tool_call_id": "call_la", "content": "ls -a timed out"},
        {"role": "assistant", "content": "a.txt and b.txt."},
        {"role": "user", "content": "Now finish."},
        {"role": "assistant", "content": "Finishing."}]
    assert recording.meta["compression_points"][0]["at_message"] == 5
    assert recording.meta["left_out"] == {"unanswered_calls": 1, "condensation_summaries": 1}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_damaged_event_folder_gives_the_conversation_or_a_reason(events_folder, tmp_path_factory, data):
    copy = tmp_path_factory.mktemp("damaged") / "events"
    copy.mkdir()
    files = sorted(p for p in events_folder.iterdir() if not p.name.startswith("."))
    for path in files:
        (copy / path.name).write_bytes(path.read_bytes())
    victim = copy / data.draw(st.sampled_from(files)).name
    raw = victim.read_bytes()
    victim.write_bytes(raw[:data.draw(st.integers(0, len(raw) - 1))] if data.draw(st.booleans())
                       else json.dumps(data.draw(st.sampled_from([None, [], {}, {"kind": 3}, "x"]))).encode())
    outcomes = read_all(FORMAT, copy)
    assert sum(isinstance(o, Recording) for o in outcomes) <= 1
