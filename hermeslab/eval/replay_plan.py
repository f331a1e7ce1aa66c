"""How a recording drives the agent loop: its turns, the replies each turn should get, and its tool results.

A recording is planned once (``plan_replay``) and the plan reused for every
config it is replayed under (an A/B run replays each recording many times):
the turns to run, each with the user texts it starts with and the recorded
replies it should get, the tool call after whose result the loop must stop,
and every recorded tool result by call id. ``RecordedTools`` answers the
loop's tool calls from it through the agent's own executor.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hermeslab.core.cache import bounded_put
from hermeslab.core.messages import parse_tool_arguments
from hermeslab.recordings import Recording, RecordingError, RecordingProblem, validate_recording
from hermeslab.tools.registry import Tool, ToolError, ToolRegistry


@dataclass(frozen=True)
class TurnPlan:
    """One turn of the loop: the user texts it starts with and the recorded replies it should get."""

    users: tuple[str, ...]
    #: Index of the turn's first reply among the recording's assistant messages.
    first_reply: int
    replies: int
    #: The last tool call of the turn when the loop must stop after its result (the recording moves on
    #: to a user message, or ends); None when the turn ends with a reply without tool calls.
    stop_after: str | None


@dataclass(frozen=True)
class ReplayPlan:
    system_prompt: str
    turns: tuple[TurnPlan, ...]
    #: Recorded result of every tool call, by call id.
    results: dict[str, str]
    #: Per tool name, its recorded calls in order: (parsed arguments, recorded result).
    calls: dict[str, list[tuple[dict[str, Any], str, int]]]
    #: Recorded messages no call can carry: a system message after the start, user messages after the last reply.
    unsent: int
    #: Every recorded tool call's arguments by call id: the recorded text and what it parses to.
    arguments: dict[str, tuple[Any, dict[str, Any]]]

    @property
    def longest_turn(self) -> int:
        return max((turn.replies for turn in self.turns), default=0)


class _Shape(ValueError):
    """Something the replay cannot drive; ``replay`` turns it into a full RecordingError."""


def plan_replay(messages: Sequence[dict[str, Any]]) -> ReplayPlan:
    """How the loop must be driven to make the recorded calls (the shapes are listed in the module docstring).

    Raises ValueError naming the message when the recording is not one the
    loop can replay (unknown role, non-text content, a call without an id,
    arguments that are not a JSON object, a result that answers no open call).
    """
    system_prompt = ""
    start = 0
    if messages and isinstance(messages[0], dict) and messages[0].get("role") == "system":
        system_prompt, start = _text(messages[0], 0), 1
    turns: list[TurnPlan] = []
    results: dict[str, str] = {}
    calls: dict[str, list[tuple[dict[str, Any], str, int]]] = {}
    pending: dict[str, tuple[str, dict[str, Any], int]] = {}  # call id -> (tool, arguments, reply), not answered
    parsed: dict[str, tuple[Any, dict[str, Any]]] = {}
    users: list[str] = []
    unsent = 0
    replies = 0
    turn: _OpenTurn | None = None
    for index in range(start, len(messages)):
        message = messages[index]
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant":
            _text(message, index)
            if turn is None or turn.last_call is None:  # the loop would have ended the turn here
                if turn is not None:
                    turns.append(turn.plan())
                turn, users = _OpenTurn(tuple(users), replies), []
            issued = _issued_calls(message, index, replies, pending, results, parsed)
            turn.replies += 1
            turn.last_call = issued[-1] if issued else None
            replies += 1
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise _Shape(f"message {index}: tool result {call_id!r} answers no open tool call")
            name, arguments, issued_by = pending.pop(call_id)
            results[call_id] = _text(message, index)
            calls.setdefault(name, []).append((arguments, results[call_id], issued_by))
        elif role == "user":
            if turn is not None:
                turns.append(turn.plan())
                turn = None
            users.append(_text(message, index))
        elif role == "system":
            _text(message, index)
            unsent += 1
        else:
            raise _Shape(f"message {index}: unknown role {role!r}")
    if turn is not None:
        turns.append(turn.plan())
    if pending:
        raise _Shape(f"tool call {next(iter(pending))!r} is never answered by a tool message")
    return ReplayPlan(system_prompt, tuple(turns), results, calls, unsent + len(users), parsed)


@dataclass
class _OpenTurn:
    """A turn being planned; ``last_call`` is the latest reply's last tool call (None: it called no tools)."""

    users: tuple[str, ...]
    first_reply: int
    replies: int = 0
    last_call: str | None = None

    def plan(self) -> TurnPlan:
        return TurnPlan(self.users, self.first_reply, self.replies, self.last_call)


def _text(message: dict[str, Any], index: int) -> str:
    content = message.get("content")
    if not isinstance(content, str):
        raise _Shape(f"message {index}: content must be a string")
    return content


def _issued_calls(message: dict[str, Any], index: int, reply: int, pending: dict[str, tuple[str, dict[str, Any], int]],
                  results: dict[str, str], parsed: dict[str, tuple[Any, dict[str, Any]]]) -> list[str]:
    """Ids of an assistant message's tool calls, each registered as pending with its parsed arguments
    (and its arguments' text and parse kept in ``parsed``)."""
    ids = []
    for number, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") if isinstance(call, dict) else None
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str) or not call_id or not isinstance(function, dict) \
                or not isinstance(function.get("name"), str):
            raise _Shape(f"message {index}: tool call {number} needs an id and a function name")
        if call_id in pending or call_id in results:
            raise _Shape(f"message {index}: tool call id {call_id!r} is used twice")
        try:
            arguments = parse_tool_arguments(function.get("arguments"))
        except (ValueError, TypeError, AttributeError) as exc:
            raise _Shape(f"message {index}: tool call {number}: {exc}") from None
        pending[call_id] = (function["name"], arguments, reply)
        parsed[call_id] = (function.get("arguments"), arguments)
        ids.append(call_id)
    return ids


# ---------------------------------------------------------------- recorded tools


class RecordedTools(ToolRegistry):
    """A registry that offers the recorded schemas and answers each call with its recorded result.

    Every tool the recording calls gets a handler holding that tool's
    recorded calls in order; a call is answered by the first one whose
    arguments match (the calls before it were skipped by the loop and are
    dropped). A call with no recorded match becomes the tool's error result.
    ``forget_before`` drops the calls of replies the loop will never make (a
    turn that failed), so a later call with the same arguments gets its own
    result, not theirs.
    """

    def __init__(self, plan: ReplayPlan, schemas: list[dict[str, Any]] | None):
        super().__init__()
        self._schemas = schemas or []
        self._queues: list[deque[tuple[dict[str, Any], str, int]]] = []
        for name, calls in plan.calls.items():  # only called tools need a handler; the schemas are data
            queue = deque(calls)
            try:
                self.register(Tool(name, f"Answers {name} calls with their recorded results.", _ANY_ARGUMENTS,
                                   self._handler(queue)))
            except ValueError:
                continue  # a name no tool may have: its calls come back as "unknown tool" and count as deviations
            self._queues.append(queue)

    def forget_before(self, reply: int) -> None:
        """Drop the recorded calls issued by replies before ``reply`` (the loop is past them)."""
        for queue in self._queues:
            while queue and queue[0][2] < reply:
                queue.popleft()

    def schemas(self) -> list[dict[str, Any]]:
        """The recorded schemas, verbatim and as the same list on every call."""
        return self._schemas

    @staticmethod
    def _handler(queue: deque[tuple[dict[str, Any], str, int]]):
        def answer(arguments: dict[str, Any]) -> str:
            for position, (recorded, result, _) in enumerate(queue):
                if recorded == arguments:
                    for _ in range(position + 1):
                        queue.popleft()
                    return result
            raise ToolError("the recording holds no result for a call with these arguments")

        return answer


#: Recorded calls are answered as recorded, whatever their arguments: the schema accepts any object.
_ANY_ARGUMENTS: dict[str, Any] = {"type": "object"}



def planned_recording(recording: Recording | Mapping[str, Any]) -> tuple[Recording, ReplayPlan]:
    """The recording and its plan, or RecordingError naming every problem of a recording that cannot be replayed.

    The plan's own checks are the fast path; when one fails, the format's full
    validator says what is wrong, with every problem and where it is.
    """
    if isinstance(recording, Mapping):
        data = dict(recording)
        problems = validate_recording(data)
        if problems:
            raise RecordingError(problems)
        recording = Recording.from_dict(data)
    elif not isinstance(recording, Recording):
        raise TypeError(f"recording must be a Recording or a recorded-session dict, got {type(recording).__name__}")
    cached = _plans.get(id(recording))
    if cached is not None and cached[0] is recording and cached[1] is recording.messages \
            and cached[2] == len(recording.messages) and cached[3] is recording.tools:
        return recording, cached[4]
    try:
        if not isinstance(recording.messages, list):
            raise _Shape("messages must be a list")
        _check_schemas(recording.tools)
        plan = plan_replay(recording.messages)
    except _Shape as exc:
        problems = validate_recording(recording.to_dict()) or [
            RecordingProblem(str(exc), recording_id=recording.id)]
        raise RecordingError(problems) from None
    entry = (recording, recording.messages, len(recording.messages), recording.tools, plan)
    bounded_put(_plans, id(recording), entry, _PLANS_MAX)
    return recording, plan


#: Plans of the recordings replayed lately, by identity (an A/B run replays each one under every config).
#: An entry holds its recording, so the id stays its own; a recording whose message list was replaced or
#: grew is planned again.
_plans: dict[int, tuple[Recording, list, int, Any, ReplayPlan]] = {}
_PLANS_MAX = 1_024


def _check_schemas(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)
            for t in tools):
        raise _Shape("tools must be a list of {\"type\": \"function\", \"function\": {\"name\": ...}} schemas")
