"""The C counter (``hermeslab.core._bpecount``) counts every text exactly as tiktoken does, in both encodings."""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import json
import threading
import time
import unicodedata
from functools import cache
from itertools import islice
from unittest import mock

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext import openai_public

from hermeslab.core import tokens
from hermeslab.core.tokens import ENCODINGS, PROBE_COUNTS, TokenCounter, counter_for

from shared_data import dataset

if importlib.util.find_spec("hermeslab.core._bpecount") is None:
    pytest.skip("hermeslab.core._bpecount was not built (no C compiler at install); tests/test_core_tokens.py "
                "checks the fallback", allow_module_level=True)

from hermeslab.core._bpecount import Counter  # noqa: E402


@cache
def rank_bytes(encoding: str) -> bytes:
    path = tokens._rank_file(encoding)
    assert path is not None, f"no {encoding} rank file"
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


@cache
def reference(encoding: str) -> tiktoken.Encoding:
    """tiktoken's own encoder; o200k_base from the same rank file, accepted only if it hashes as tiktoken expects."""
    if encoding == "cl100k_base":
        return tokens.encoding()

    def verified_ranks(_url: str, expected_hash: str) -> dict[bytes, int]:
        data = rank_bytes(encoding)
        assert hashlib.sha256(data).hexdigest() == expected_hash
        return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines())}

    with mock.patch.object(openai_public, "load_tiktoken_bpe", verified_ranks):
        spec = openai_public.o200k_base()
    return tiktoken.Encoding(spec["name"], pat_str=spec["pat_str"], mergeable_ranks=spec["mergeable_ranks"],
                             special_tokens=spec["special_tokens"])


def tiktoken_count(encoding: str, text: str) -> int:
    return len(reference(encoding).encode(text, disallowed_special=()))


class Deferred:
    """tiktoken as the fallback, remembering the texts handed to it."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self.texts: list[str] = []

    def __call__(self, text: str) -> int:
        self.texts.append(text)
        return tiktoken_count(self.encoding, text)


@cache
def counter(encoding: str) -> Deferred:
    """One C counter per encoding, shared by the tests, and its fallback."""
    deferred = Deferred(encoding)
    deferred.count = Counter(rank_bytes(encoding), deferred, encoding).count
    return deferred


def recorded_texts(name: str, limit: int, stride: int = 1) -> list[str]:
    """Message contents and tool-call arguments of every ``stride``-th session of a recording, up to ``limit``."""
    texts: list[str] = []
    with dataset(name).open(encoding="utf-8") as lines:
        for line in islice(lines, 0, None, stride):
            for message in json.loads(line)["messages"]:
                content = message.get("content")
                if isinstance(content, str) and content:
                    texts.append(content)
                for call in message.get("tool_calls") or ():
                    arguments = (call.get("function") or {}).get("arguments")
                    if isinstance(arguments, str) and arguments:
                        texts.append(arguments)
            if len(texts) >= limit:
                return texts[:limit]
    return texts


# ---------------------------------------------------------------- the backend tokens.py picks


def test_both_encodings_count_with_the_c_counter():
    assert [tokens.text_counter(encoding)[1] for encoding in ENCODINGS] == ["bpecount", "bpecount"]
    assert TokenCounter().backend == counter_for("o200k_base").backend == "bpecount"


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_c_counter_that_fails_the_probe_is_not_used(monkeypatch, caplog, encoding):
    monkeypatch.setattr(tokens, "_backends", {})
    monkeypatch.setitem(tokens.PROBE_COUNTS, encoding, (1,) + PROBE_COUNTS[encoding][1:])
    assert tokens._bpecount(encoding) is None
    assert f"C counter counts {encoding} differently" in caplog.text


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="rank line 2: expected 'base64 rank'"):
        Counter(b"IQ== 0\nIg==\n", len)
    with pytest.raises(ValueError, match="rank line 1: the token is not base64"):
        Counter(b"!!!! 0\n", len)
    with pytest.raises(ValueError, match="encoding must be cl100k_base or o200k_base, got p50k_base"):
        Counter(b"IQ== 0\n", len, "p50k_base")
    with pytest.raises(TypeError, match="count takes a str"):
        Counter(b"IQ== 0\n", len).count(b"bytes")


# ---------------------------------------------------------------- exact counts


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("name, limit", [
    ("mini_swe_agent_gemini3pro_swebv.jsonl", 2000),
    ("tau2_bench_gpt41.jsonl", 1500),
    ("tau_bench_airline_gpt4o.jsonl", 1500),
])
def test_recorded_messages_count_as_tiktoken_counts_them(encoding, name, limit):
    texts = recorded_texts(name, limit, stride=3)
    assert len(texts) == limit
    deferred = counter(encoding)
    before = len(deferred.texts)
    assert [deferred.count(text) for text in texts] == [tiktoken_count(encoding, text) for text in texts]
    assert len(deferred.texts) == before


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_code_point_this_python_knows_is_classed_as_tiktoken_classes_it(encoding):
    """Each assigned code point between letters of either case, digits, spaces, punctuation and apostrophes."""
    count = counter(encoding).count
    known = [chr(c) for c in range(0x110000)
             if not 0xD800 <= c < 0xE000 and unicodedata.category(chr(c)) != "Cn"]
    contexts = ("{c}", "a{c}b", "A{c}B", "'{c}ing", "{c}'s", "1{c}23{c}{c}{c}4", "  {c}  y", "{c}\n\n", "!{c}?/",
                " {c}'S", "{c}A{c}a{c}")
    for start in range(0, len(known), 400):
        text = "|".join(context.format(c=c) for c in known[start:start + 400] for context in contexts)
        assert count(text) == tiktoken_count(encoding, text), f"code points from U+{ord(known[start]):04X}"


WHITESPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"
DIGITS = "0123456789\u0660\u0661\u0669\u06f5\u0966\uff10\uff19\u2160\u00b2\u00bd\u3007\u4e00\u5341"
LETTERS = "aZsStTdDmMlLvVeErR\u017fKk\u00e9\u00c9\u00df\u0391\u03c9\u0416\u05d0\u0627\u0915\u0e01\u10d0\u3042\u30a2" \
          "\uac00\u01c5\u02b0\u1e9e"
MARKS = "\u0301\u0308\u093f\u0e31\u200d\ufe0f\u20e3"
SYMBOLS = "'\".,;:!?()[]{}<>/\\|-_=+*&^%$#@~`\u2019\u00bf\u2014\u20ac"
CJK_EMOJI = "\u4e2d\u6587\u65e5\u672c\U00020000\U0001f600\U0001f44d\U0001f3fd\U0001faf6\U0001f1fa\U0001f1f8"
SPECIALS = ("<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>")
CONTRACTIONS = ("'s", "'S", "'ll", "'LL", "'lL", "'ve", "'VE", "'re", "'Re", "'d", "'D", "'m", "'t", "'\u017f")

TEXT = st.lists(st.one_of(
    st.text(alphabet=WHITESPACE, min_size=1, max_size=6),
    st.text(alphabet=DIGITS, min_size=1, max_size=7),
    st.text(alphabet=LETTERS + MARKS, min_size=1, max_size=8),
    st.text(alphabet=SYMBOLS, min_size=1, max_size=4),
    st.text(alphabet=CJK_EMOJI, min_size=1, max_size=3),
    st.sampled_from(SPECIALS + CONTRACTIONS),
    st.text(max_size=4),  # any code point, lone surrogates and unassigned ones included
), max_size=30).map("".join)


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=1000, deadline=None)
@given(text=TEXT)
def test_mixed_text_counts_as_tiktoken_counts_it(encoding, text):
    assert counter(encoding).count(text) == tiktoken_count(encoding, text)


# ---------------------------------------------------------------- edge cases


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_empty_text_has_no_tokens(encoding):
    deferred = Deferred(encoding)
    assert Counter(rank_bytes(encoding), deferred, encoding).count("") == 0
    assert deferred.texts == []


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_texts_this_python_cannot_class_go_to_the_fallback(encoding):
    deferred = Deferred(encoding)
    count = Counter(rank_bytes(encoding), deferred, encoding).count
    unassigned = "\u0378"  # unassigned in every Unicode version so far
    texts = ["broken \ud800 pair \udfff end", f"a{unassigned}b"]
    assert [count(text) for text in texts] == [tiktoken_count(encoding, text) for text in texts]
    assert deferred.texts == texts
    deferred.texts.clear()
    assert count("plain text, 日本語, 🙂") == tiktoken_count(encoding, "plain text, 日本語, 🙂")
    assert deferred.texts == []


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("text", [
    "!\n/\n/x", "x  \n  ", "x \r\n\t\n  y", "HELLO'S don't WE'LL", "A\u0301B ", "\u0301AB c", "\u65e5A ",
    "\u02b0AB ", "abc\u0301DEF ghi", "\u01c5ungla \u01c4A", "'\u017fa", " 'sa", "1234567\u0661\u0662\u0663\u0664",
])
def test_texts_where_the_two_patterns_differ_count_exactly(encoding, text):
    assert counter(encoding).count(text) == tiktoken_count(encoding, text)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("run", ["a", "A", " ", "\n", "1", "日", "🙂", ".", "'s", "ab ", " \n", "\u3000", "é", "/\n"])
def test_long_runs_count_exactly(encoding, run):
    count = counter(encoding).count
    text = run * (4000 // len(run))
    assert count(text) == tiktoken_count(encoding, text)
    assert count(text + "x") == tiktoken_count(encoding, text + "x")


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("run", ["a", " ", "\t", "x" * 7 + "y", ".", "\u00e9"])
def test_a_200k_run_of_one_class_counts_fast(encoding, run):
    count = counter(encoding).count
    text = run * (200_000 // len(run))
    started = time.process_time()
    tokens_counted = count(text)
    assert time.process_time() - started < 1.0
    bpe_openai = tokens._bpe_openai(encoding)
    if bpe_openai is not None:  # linear, and exact for such runs; tiktoken takes seconds on some of them
        assert tokens_counted == bpe_openai[0](text)


def test_counting_on_several_threads_gives_the_same_counts():
    count = counter("cl100k_base").count
    texts = recorded_texts("tau2_bench_gpt41.jsonl", 300) + ["日本語のテキスト " * 50, "\u0915\u093f" * 100]
    expected = [count(text) for text in texts]
    results: list[list[int]] = []

    def run() -> None:
        results.append([count(text) for text in texts])

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4
