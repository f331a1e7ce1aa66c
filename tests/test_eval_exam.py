"""The recall exam: questions about what compressions removed, answered from what they kept, judged and cached."""

from __future__ import annotations

import json
import logging
import math
import pickle
from collections.abc import Iterator

import pytest

from hermeslab.cli import main
from hermeslab.policies.loading import apply_preset
from hermeslab.core.config import Config
from hermeslab.eval.ab import ReplayCell, run_ab
from hermeslab.eval.exam import (
    EXAM_METRICS,
    ExamCache,
    ExamOutputError,
    ExamSettings,
    Question,
    cache_key,
    clip_middle,
    examine,
    parse_grade,
    parse_questions,
    recall_exam,
    render,
)
from hermeslab.eval.metrics import measure, removed_messages
from hermeslab.recordings import Recording
from hermeslab.eval.replay import replay
from hermeslab.providers import LocalServer, OpenAICompatProvider
from hermeslab.core.provider import (
    ChatRequest,
    ChatResponse,
    ProviderError,
    StreamDelta,
    Usage,
)

QUESTIONS = [{"question": "Which file holds the parser?", "answer": "src/parser.py"},
             {"question": "Which port does the server use?", "answer": "8080"},
             {"question": "What is the release tag?", "answer": "v2.3.1"}]
#: The scripted model's answer to each question: one right, one partly right, one it cannot find.
ANSWERS = {"Which file holds the parser?": "src/parser.py", "Which port does the server use?": "port 80",
           "What is the release tag?": "unknown"}


class Examiner:
    """A scripted model that tells the exam's three steps apart by their system prompt."""

    name = model = "examiner"

    def __init__(self, questions: str = json.dumps(QUESTIONS), judge: str | None = None,
                 failing_answers: bool = False):
        self.questions = questions
        self.judge = judge
        self.failing_answers = failing_answers
        self.seen: list[tuple[str, str]] = []  # (step, user text) of every request
        self.caps: list[tuple[str, int | None]] = []  # (step, max_tokens) of every request, as the server got it

    def complete(self, request: ChatRequest) -> ChatResponse:
        system, user = request.messages[0]["content"], request.messages[-1]["content"]
        if "exam questions" in system:
            step, text = "questions", self.questions
        elif system.startswith("Answer the question"):
            step = "answer"
            if self.failing_answers:
                raise ProviderError("the answer model is unavailable", status=400)
            text = ANSWERS[user.rsplit("QUESTION: ", 1)[1]]
        elif system.startswith("You grade"):
            step = "judge"
            reference = user.split("REFERENCE ANSWER: ", 1)[1].split("\n", 1)[0]
            given = user.rsplit("ANSWER: ", 1)[1]
            text = self.judge or ("2" if given == reference else "1")
        else:
            raise AssertionError(f"unexpected request: {system[:60]!r}")
        self.caps.append((step, request.max_tokens))
        self.seen.append((step, user))
        return ChatResponse({"role": "assistant", "content": text}, usage=Usage(10, 2), model=self.model)

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        yield self.complete(request)


def reply(text: str, call_id: str, command: str) -> dict:
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]}


def long_recording() -> Recording:
    messages: list[dict] = [{"role": "system", "content": "You fix bugs."},
                            {"role": "user", "content": "Read every part and report."}]
    for i in range(12):
        messages += [reply(f"Reading part {i}.", f"c{i}", f"cat part{i}.txt"),
                     {"role": "tool", "tool_call_id": f"c{i}", "content": f"part {i}: " + "data " * 300}]
    messages.append({"role": "assistant", "content": "All parts read."})
    return Recording(id="exam-me", messages=messages, model="gpt-4.1")


def exam_config(url: str | None = None) -> Config:
    overrides = {"compression.summariser": "extractive", "model.context_length": 3_000, "model.name": "examiner"}
    if url:
        overrides["model.base_url"] = url
    return apply_preset(Config(), "seed").with_overrides(overrides)


@pytest.fixture(scope="module")
def run():
    result = replay(long_recording(), exam_config())
    assert sum(record.changed for record in result.compressions) >= 2
    return result


@pytest.fixture
def hosted():
    """Start an Examiner behind a local server; returns (server, examiner, url) for a given script."""
    servers: list[LocalServer] = []

    def start(examiner: Examiner) -> tuple[LocalServer, str]:
        server = LocalServer(examiner)
        servers.append(server)
        return server, server.start()

    yield start
    for server in servers:
        server.stop()


def client(url: str) -> OpenAICompatProvider:
    return OpenAICompatProvider(url, None, "examiner")


def regions(run) -> int:
    return sum(1 for record in run.compressions if record.changed and removed_messages(record))


# ---------------------------------------------------------------- the exam over the wire


def test_each_region_is_examined_from_the_compacted_context_and_a_rerun_costs_no_calls(run, hosted, tmp_path):
    examiner = Examiner()
    server, url = hosted(examiner)
    settings = ExamSettings(cache_path=tmp_path / "exam.sqlite")
    first = recall_exam(run, client(url), settings)
    count = regions(run)
    assert list(first) == list(EXAM_METRICS)
    assert (first["exam_questions"], first["exam_full"], first["exam_partial"], first["exam_wrong"]) == (
        3 * count, count, count, count)
    assert first["exam_score"] == pytest.approx(0.5) and first["exam_errors"] == 0
    # per region: the question list and three answers; the two judgements repeat, so the cache answers them after
    # the first region, and "unknown" needs no judge
    assert first["exam_calls"] == server.calls == 4 * count + 2

    changed = [record for record in run.compressions if record.changed]
    asked = [user for step, user in examiner.seen if step == "questions"]
    assert asked == [clip_middle(render(removed_messages(record)), settings.max_region_chars) for record in changed]
    assert "[TOOL]\npart 1: data" in asked[0]
    answers = [user for step, user in examiner.seen if step == "answer"]
    assert answers[0] == f"CONTEXT:\n{render(changed[0].after)}\n\nQUESTION: {QUESTIONS[0]['question']}"

    again = recall_exam(run, client(url), ExamSettings(cache_path=tmp_path / "exam.sqlite"),
                        ExamCache(tmp_path / "exam.sqlite"))
    assert again["exam_calls"] == 0 and server.calls == first["exam_calls"]
    assert {k: v for k, v in again.items() if k != "exam_calls"} == {
        k: v for k, v in first.items() if k != "exam_calls"}


def test_without_a_cache_file_replies_are_kept_for_one_exam_only(run, hosted):
    server, url = hosted(Examiner())
    first = recall_exam(run, client(url), ExamSettings(questions_per_region=1))
    second = recall_exam(run, client(url), ExamSettings(questions_per_region=1))
    assert first["exam_questions"] == regions(run) and first["exam_full"] == regions(run)
    assert first["exam_calls"] == second["exam_calls"] > 0
    assert server.calls == 2 * first["exam_calls"]


def test_a_malformed_question_list_is_an_error_per_region_never_a_zero(run, hosted, caplog):
    _, url = hosted(Examiner(questions=json.dumps({"question": "Which file?", "answer": "a.py"})))
    with caplog.at_level(logging.WARNING, logger="hermeslab.eval.exam"):
        row = recall_exam(run, client(url), ExamSettings())
    assert row["exam_errors"] == regions(run) and row["exam_questions"] == 0
    assert math.isnan(row["exam_score"])
    assert "non-empty JSON list" in caplog.text and "exam-me" in caplog.text


def test_an_unparseable_judgement_is_an_error_per_judged_question(run, hosted):
    _, url = hosted(Examiner(judge="2 - the answer is correct"))
    row = recall_exam(run, client(url), ExamSettings())
    count = regions(run)
    # the "unknown" answers score 0 without a judge; the other two per region cannot be judged
    assert (row["exam_questions"], row["exam_wrong"], row["exam_errors"]) == (count, count, 2 * count)
    assert row["exam_score"] == 0.0


def test_a_failing_endpoint_is_counted_and_the_replay_metrics_are_kept(run, hosted, tmp_path):
    _, url = hosted(Examiner(failing_answers=True))
    row = ReplayCell(exam=ExamSettings(cache_path=tmp_path / "exam.sqlite"))(long_recording(), exam_config(url))
    assert row["compressions"] > 0 and row["prompt_tokens"] > 0
    assert row["exam_questions"] == 0 and row["exam_errors"] == 3 * regions(run)


def test_the_replay_cell_merges_the_exam_into_the_replay_metrics(run, hosted, tmp_path):
    server, url = hosted(Examiner())
    cell = ReplayCell(exam=ExamSettings(cache_path=tmp_path / "exam.sqlite"))
    row = cell(long_recording(), exam_config(url))
    replayed = {k: v for k, v in row.items() if not k.startswith("exam_")}
    assert replayed.keys() == measure(run).keys()
    assert all(v == measure(run)[k] or (math.isnan(v) and math.isnan(measure(run)[k])) for k, v in replayed.items())
    assert row["exam_questions"] == 3 * regions(run) and row["exam_calls"] == server.calls
    assert cell(long_recording(), exam_config(url))["exam_calls"] == 0


def test_the_exam_needs_an_endpoint_in_the_config():
    with pytest.raises(ValueError, match="model.base_url"):
        ReplayCell(exam=ExamSettings())(long_recording(), exam_config())


# ---------------------------------------------------------------- capped requests and usable steps


def test_every_exam_request_reaches_the_endpoint_with_its_cap(run, hosted):
    examiner = Examiner()
    _, url = hosted(examiner)
    recall_exam(run, client(url), ExamSettings(max_tokens=40))
    steps = {step for step, _ in examiner.caps}
    assert steps == {"questions", "answer", "judge"}
    assert all(cap == (40 * 3 if step == "questions" else 40) for step, cap in examiner.caps), examiner.caps
    default = Examiner()
    _, url = hosted(default)
    recall_exam(run, client(url), ExamSettings())
    assert {cap for step, cap in default.caps if step != "questions"} == {ExamSettings().max_tokens}
    assert 0 < ExamSettings().max_tokens <= 1_000


def test_a_reply_cached_under_another_cap_is_asked_again(run, hosted, tmp_path):
    server, url = hosted(Examiner())
    cache = tmp_path / "exam.sqlite"
    first = recall_exam(run, client(url), ExamSettings(cache_path=cache, max_tokens=64))
    assert recall_exam(run, client(url), ExamSettings(cache_path=cache, max_tokens=64))["exam_calls"] == 0
    other_cap = recall_exam(run, client(url), ExamSettings(cache_path=cache, max_tokens=65))
    assert other_cap["exam_calls"] == first["exam_calls"]
    assert server.calls == 2 * first["exam_calls"]


def test_steps_and_usable_steps_are_counted(run, hosted):
    count = regions(run)
    _, url = hosted(Examiner())
    clean = examine(run, client(url), ExamSettings())
    # per region: a question list, three answers and two judgements ("unknown" needs none)
    assert (clean.metrics["exam_steps"], clean.metrics["exam_usable"]) == (6 * count, 6 * count)
    assert clean.problem is None and clean.first_error is None

    _, url = hosted(Examiner(judge="2 - the answer is correct"))
    judged = examine(run, client(url), ExamSettings()).metrics
    assert (judged["exam_steps"], judged["exam_usable"]) == (6 * count, 4 * count)

    _, url = hosted(Examiner(failing_answers=True))
    unanswered = examine(run, client(url), ExamSettings())
    assert (unanswered.metrics["exam_steps"], unanswered.metrics["exam_usable"]) == (4 * count, count)
    assert unanswered.problem.startswith(f"the recall exam scored no question: {count} of {4 * count} exam step(s)")
    assert "the answer model is unavailable" in unanswered.problem and "exam-me" in unanswered.first_error


def test_an_exam_with_nothing_to_examine_is_not_a_problem(hosted):
    _, url = hosted(Examiner())
    quiet = replay(Recording(id="short", messages=[{"role": "user", "content": "hi"},
                                                   {"role": "assistant", "content": "hello"}]), exam_config())
    report = examine(quiet, client(url), ExamSettings())
    assert report.metrics["exam_steps"] == 0 and report.problem is None


def test_a_cell_whose_exam_scored_nothing_is_kept_with_a_note(hosted, tmp_path):
    _, url = hosted(Examiner(questions="I would rather not."))
    frame = run_ab([long_recording()], {"exam": exam_config(url)}, executor="serial", progress=False,
                   cell=ReplayCell(exam=ExamSettings(cache_path=tmp_path / "exam.sqlite")))
    row = frame.iloc[0]
    assert row["status"] == "ok" and row["exam_questions"] == 0 and row["exam_usable"] == 0
    assert row["exam_steps"] == row["exam_errors"] > 0
    assert row["note"].startswith("the recall exam scored no question: 0 of ") and "not JSON" in row["note"]


# ---------------------------------------------------------------- the cell's identity


def test_the_exam_is_part_of_the_cell_identity_but_its_cache_place_is_not(tmp_path):
    assert ReplayCell().identity == "hermeslab.eval.ab.ReplayCell(summariser=config)"
    here = ReplayCell(exam=ExamSettings(cache_path=tmp_path / "a.sqlite"))
    there = ReplayCell(exam=ExamSettings(cache_path="b.sqlite"))
    assert here.identity == there.identity and "exam(questions=3," in here.identity
    assert ReplayCell(exam=ExamSettings(questions_per_region=5)).identity != here.identity
    assert ReplayCell(exam=ExamSettings(model="judge-model")).identity != here.identity
    assert ReplayCell(exam=ExamSettings(max_tokens=64)).identity != here.identity
    assert pickle.loads(pickle.dumps(here)) == here


@pytest.mark.parametrize("kwargs, match", [
    ({"questions_per_region": 0}, "questions_per_region"),
    ({"max_region_chars": True}, "max_region_chars"),
    ({"max_context_chars": -1}, "max_context_chars"),
    ({"model": " "}, "model"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": 12.5}, "max_tokens"),
])
def test_bad_settings_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ExamSettings(**kwargs)


def test_an_exam_must_be_exam_settings():
    with pytest.raises(TypeError, match="ExamSettings"):
        ReplayCell(exam={"questions_per_region": 3})


# ---------------------------------------------------------------- reading replies


def test_a_question_list_may_come_in_a_json_fence_and_is_cut_to_the_limit():
    fenced = "```json\n" + json.dumps(QUESTIONS) + "\n```"
    assert parse_questions(fenced, 2) == [Question("Which file holds the parser?", "src/parser.py"),
                                          Question("Which port does the server use?", "8080")]


@pytest.mark.parametrize("reply, match", [
    ("Here are the questions: ...", "not JSON"),
    ("[]", "non-empty JSON list"),
    ('{"question": "q", "answer": "a"}', "non-empty JSON list"),
    ('[{"question": "q"}]', "question 0"),
    ('[{"question": "q", "answer": ""}]', "question 0"),
    ('["q"]', "question 0"),
])
def test_a_question_list_of_another_shape_is_refused_with_the_reason(reply, match):
    with pytest.raises(ExamOutputError, match=match):
        parse_questions(reply, 3)


@pytest.mark.parametrize("reply, points", [("2", 2), (" 1\n", 1), ("0", 0)])
def test_a_judgement_is_a_bare_digit(reply, points):
    assert parse_grade(reply) == points


@pytest.mark.parametrize("reply", ["3", "2.", "Score: 2", "", "two", "-1"])
def test_any_other_judgement_is_refused(reply):
    with pytest.raises(ExamOutputError, match="bare 0, 1 or 2"):
        parse_grade(reply)


def test_long_text_keeps_its_head_and_tail_within_the_limit():
    text = "head " + "x" * 1_000 + " tail"
    clipped = clip_middle(text, 200)
    assert len(clipped) <= 200 and clipped.startswith("head ") and clipped.endswith(" tail")
    left_out = int(clipped.split("[… ", 1)[1].split(" ", 1)[0])
    assert len(clipped) - len(clipped.split("\n")[1]) - 2 + left_out == len(text)
    assert clip_middle("short", 200) == "short"


def test_the_cache_keeps_the_first_reply_and_keys_by_step_model_prompt_and_cap(tmp_path):
    cache = ExamCache(tmp_path / "c.sqlite")
    key = cache_key("judge", "m", "system", "user", 16)
    assert len({key, cache_key("answer", "m", "system", "user", 16), cache_key("judge", "n", "system", "user", 16),
                cache_key("judge", "m", "system", "user2", 16), cache_key("judge", "m", "system", "user", 17)}) == 5
    cache.put(key, "2")
    cache.put(key, "1")
    other = ExamCache(tmp_path / "c.sqlite")
    assert other.get(key) == "2" and other.get("missing") is None
    cache.close()
    other.close()


# ---------------------------------------------------------------- the command line


def test_replay_with_exam_needs_an_endpoint(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(long_recording().to_dict()) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="--exam: the recall exam needs a real model endpoint"):
        main(["replay", str(path), "--exam", str(tmp_path / "exam.sqlite")])


def test_replay_with_exam_prints_the_exam_metrics(tmp_path, hosted, capsys):
    _, url = hosted(Examiner())
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(long_recording().to_dict()) + "\n", encoding="utf-8")
    config = tmp_path / "exam.yaml"
    config.write_text(f"model:\n  base_url: {url}\n  name: examiner\n  context_length: 3000\n"
                      "compression:\n  summariser: extractive\n", encoding="utf-8")
    assert main(["replay", str(path), "--config", str(config), "--exam", str(tmp_path / "exam.sqlite")]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["exam_questions"] > 0 and row["exam_score"] == pytest.approx(0.5)


def test_ab_with_exam_checks_every_config_before_running(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(long_recording().to_dict()) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="--exam: the recall exam needs a real model endpoint"):
        main(["ab", str(path), "--config", "hermes-0.19", "--config", "seed,model.context_length=8000", "--exam"])


def test_a_config_without_an_endpoint_is_examined_at_the_one_another_config_names():
    from hermeslab.policies.loading import load_config
    from hermeslab.eval.exam import ExamSettings, answering, shared_endpoint

    hosted = load_config("seed,model.base_url=http://answerer.example/v1,model.api_key=sk-secret")
    offline = load_config("hermes-0.19")
    base_url, api_key = shared_endpoint({"hosted": hosted, "offline": offline})
    assert (base_url, api_key) == ("http://answerer.example/v1", "sk-secret")
    settings = ExamSettings(base_url=base_url, api_key=api_key)
    assert answering(offline, settings).model.base_url == "http://answerer.example/v1"
    assert answering(offline, settings).compression == offline.compression  # only the answerer moves
    assert shared_endpoint({"a": hosted, "b": hosted}) == (None, None)  # each names its own
    assert "endpoint=http://answerer.example/v1" in settings.identity and "sk-secret" not in repr(settings)
    with pytest.raises(ValueError, match="needs a real model endpoint"):
        shared_endpoint({"offline": offline})
    other = load_config("seed,model.base_url=http://other.example/v1")
    with pytest.raises(ValueError, match="offline name\\(s\\) no endpoint and the others name 2 different ones"):
        shared_endpoint({"hosted": hosted, "other": other, "offline": offline})


def test_ab_with_exam_and_an_endpoint_on_one_config_does_not_say_the_endpoint_is_unset(tmp_path, capsys):
    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    with pytest.raises(SystemExit) as stop:  # stops at the empty file, after the exam's settings were accepted
        main(["ab", str(empty), "--config", "seed,model.base_url=http://127.0.0.1:9/v1", "--config", "hermes-0.19",
              "--exam", str(tmp_path / "cache.sqlite"), "--executor", "serial"])
    assert "endpoint" not in str(stop.value) and "no recording to replay" in str(stop.value)
    assert "examined at http://127.0.0.1:9/v1" in capsys.readouterr().err
