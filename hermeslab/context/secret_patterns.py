"""The secrets ``redact`` recognises: one rule per format, and the mask each match is replaced with.

Each rule names the kind of secret it masks and picks out only the secret
itself: no prefix or suffix of it survives the mask ``[REDACTED:<kind>]``, so
nothing reusable can be copied back into a config file, while the surrounding
text (header names, variable names, URL hosts) stays readable.

Precision matters as much as recall. Ordinary identifiers that merely share a
prefix with a key format (``sk_learn_compatible_wrapper``), hashes, UUIDs,
phone-like numbers and environment *lookups* (``os.getenv("API_KEY")``,
``${DB_PASSWORD}``) pass unchanged. Phone numbers are deliberately not masked:
in code and tool output they are far more often ordinary digits. So a rule is
a literal-anchored regex plus a judge that reads the match in its context
(token boundaries, variable names, URL schemes, the rest of the line) and
decides what, if anything, to mask. Every rule but the private-key blocks
matches within one line and reads that context from that line only; each
declares the markers (a literal and the shape that must follow it) one of
which lies inside every match, which is what lets ``redact`` read only the
lines that hold one. This module is the table; applying it is ``redact``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

#: How every mask begins: a value that starts with it was masked already.
PLACEHOLDER_OPEN = "[REDACTED:"
#: A whole mask, wherever it stands: a new match may not cut one.
PLACEHOLDER_PATTERN = re.compile(r"\[REDACTED:[A-Za-z0-9_]*\]")
_PLACEHOLDER_END = re.compile(r"\[REDACTED:[A-Za-z0-9_]*\]$")
#: End of a self-identifying token: no more token characters and no mask glued on.
_TOKEN_END = r"(?![A-Za-z0-9_-]|\[REDACTED:)"
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")
_DIGITS = frozenset("0123456789")


def placeholder(kind: str) -> str:
    """The mask that replaces a secret of ``kind``."""
    return f"{PLACEHOLDER_OPEN}{kind}]"


# ---------------------------------------------------------------- value checks


def _has_digit(value: str) -> bool:
    return any(c.isdigit() for c in value)


def _body(value: str) -> str:
    """A vendor token without its prefix (``fw_``, ``am_org_`` ...): the random part."""
    return re.split(r"[-_.]", value, maxsplit=1)[-1]


def _has_digit_and_letter(value: str) -> bool:
    return _has_digit(value) and any(c.isalpha() for c in value)


def _mixed(value: str) -> bool:
    """At least two of lower / upper / digit: random tokens are, words rarely are."""
    classes = (
        any(c.islower() for c in value),
        any(c.isupper() for c in value),
        any(c.isdigit() for c in value),
    )
    return sum(classes) >= 2


_REFERENCE = re.compile(
    r"""^(?:
        \$\{?[A-Za-z_][A-Za-z0-9_]*\}?          # $VAR, ${VAR}
      | \$\{[^}]*\}                             # ${VAR:-default}
      | \$\(.*                                  # $(command)
      | %[A-Za-z_][A-Za-z0-9_]*%                # %VAR%
      | \{\{.*\}\}                              # {{ template }}
      | \{[A-Za-z_][A-Za-z0-9_.]*\}             # {name} in f-strings
      | <[^<>]*>                                # <your-token-here>
      | (?:os\.)?(?:getenv|environ)\b.*         # os.getenv(...), os.environ[...]
      | process\.env\b.*                        # process.env.X
      | ENV\[.*                                 # ENV["X"]
      | env\(.*                                 # env("X")
      | secrets?\.[A-Za-z_].*                   # secrets.X (CI templates)
      | ![a-z_]+(?:\s.*)?                        # YAML tags: !vault |, !secret db_password
      | ENC\[.*                                 # encrypted values
    )$""",
    re.VERBOSE | re.DOTALL,
)
#: Values that are never a credential: booleans, empties, YAML block markers and the object a method runs on.
_TRIVIAL = frozenset({"", "true", "false", "yes", "no", "on", "off", "none", "null", "nil", "~", "undefined", "|", ">",
                      "|-", ">-", "self", "cls", "this"})
_TYPE_HINT = re.compile(
    r"^(?:Optional\[)?(?:str|bytes|int|bool|Any|SecretStr|SecretBytes|string|number|boolean)\]?(?:\s*\|\s*None)?(?:\s*[=,)].*)?$"
)
_DOTTED_NAME = re.compile(r"^[a-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")
_CALL_OR_INDEX = re.compile(r"[A-Za-z_]\w*\s*[(\[]")


def _is_literal_secret(value: str, *, quoted: bool = False) -> bool:
    """False for empty values, booleans, lookups and paths; unquoted, also for code.

    Unquoted values that look like code (``settings.token``, ``get_key()``,
    ``str | None``) or short numbers (``TOKEN_TTL=3600``) are not literals;
    inside quotes the same characters are a literal string and count.
    """
    stripped = value.strip()
    if stripped.lower() in _TRIVIAL or stripped.startswith(PLACEHOLDER_OPEN) or _REFERENCE.match(stripped):
        return False
    if stripped.startswith(("/", "./", "../", "~/")):
        return False  # a path to a key file, not the key
    if quoted:
        return True
    if stripped.isdigit() and len(stripped) < 8:
        return False
    if _TYPE_HINT.match(stripped) or _DOTTED_NAME.match(stripped):
        return False
    return not _CALL_OR_INDEX.search(stripped)


def _is_quoted(value: str) -> bool:
    return len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'"


def _unquote(value: str) -> str:
    return value[1:-1] if _is_quoted(value) else value


#: Escape sequences that end a line or field inside serialised text, not a word.
_ESCAPES = frozenset({"\\n", "\\t", "\\r"})


def _at_token_start(text: str, pos: int) -> bool:
    """Nothing token-like right before ``pos``; a mask counts as token text, since it replaced some."""
    if pos == 0:
        return True
    if text[max(0, pos - 2):pos] in _ESCAPES:  # escaped JSON text: "...\nsk-..." starts a token too
        return True
    before = text[pos - 1]
    return before not in _ID_CHARS and not (before == "]" and _PLACEHOLDER_END.search(text, max(0, pos - 64), pos))


def _name_start(text: str, end: int, chars: frozenset[str] = _NAME_CHARS) -> int:
    """Where the run of ``chars`` that ends at ``end`` begins (names are found from their last part)."""
    start = end
    while start > 0 and text[start - 1] in chars:
        start -= 1
    return start


def _line_prefix(text: str, pos: int) -> str:
    return text[text.rfind("\n", 0, pos) + 1 : pos]


def _rest_of_line(text: str, pos: int) -> str:
    end = text.find("\n", pos)
    return text[pos:] if end == -1 else text[pos:end]


# ---------------------------------------------------------------- rules

#: A rule's verdict on one match: the kind of secret and the span to mask, or None.
Verdict = tuple[str, int, int] | None
Judge = Callable[[str, re.Match[str]], Verdict]


@dataclass(frozen=True)
class Rule:
    """One secret format: a cheap substring pre-check, a literal-anchored regex and a judge.

    ``triggers``: at least one must occur in the text (in the lower-cased text
    when ``lowered``) for the regex to run at all. The regex runs on the same
    text the triggers were checked against. ``judge`` sees the original text
    and the match and decides what, if anything, to mask.

    ``markers`` tell ``redact`` which lines to run the rule on: regex sources
    over the lower-case ASCII shadow, each a literal prefix and what must
    follow it, one of which lies inside every match (default: the triggers).
    A ``multiline`` rule runs over the whole text instead.
    """

    pattern: re.Pattern[str]
    triggers: tuple[str, ...]
    judge: Judge
    lowered: bool = False
    markers: tuple[str, ...] = ()
    multiline: bool = False

    def marker_sources(self) -> tuple[str, ...]:
        return self.markers or tuple(re.escape(trigger.lower()) for trigger in self.triggers)


def _token(kind: str, pattern: str, triggers: tuple[str, ...], check: Callable[[str], bool] | None = None,
           markers: tuple[str, ...] = ()) -> Rule:
    """A self-identifying token: the whole match, which must start a token and pass ``check``."""

    def judge(text: str, match: re.Match[str]) -> Verdict:
        start, end = match.span()
        if not _at_token_start(text, start) or (check is not None and not check(text[start:end])):
            return None
        return kind, start, end

    return Rule(re.compile(pattern + _TOKEN_END), triggers, judge, markers=markers)


def _group(kind: str, pattern: str, triggers: tuple[str, ...], check: Callable[[str], bool] | None = None, *,
           lowered: bool = False, markers: tuple[str, ...] = ()) -> Rule:
    """A secret identified by what stands before it: only the ``secret`` group is masked."""

    def judge(text: str, match: re.Match[str]) -> Verdict:
        start, end = match.span("secret")
        if check is not None and not check(text[start:end]):
            return None
        return kind, start, end

    return Rule(re.compile(pattern), triggers, judge, lowered, markers)


def _telegram(text: str, match: re.Match[str]) -> Verdict:
    """Anchored on the ``:``; the bot id before it is 8-12 digits, alone or after ``bot``, and the secret random."""
    start = _name_start(text, match.start(), _DIGITS)
    if not 8 <= match.start() - start <= 12 or not _mixed(text[match.start() + 1 : match.end()]):
        return None
    if not (_at_token_start(text, start) or (text.endswith("bot", 0, start) and _at_token_start(text, start - 3))):
        return None
    return "telegram_bot_token", start, match.end()


_DB_SCHEMES = frozenset(
    {"postgres", "postgresql", "mysql", "mariadb", "mongodb", "redis", "rediss", "amqp", "amqps", "mssql", "sqlserver", "cockroachdb"}
)


def _url_credential(text: str, match: re.Match[str]) -> Verdict:
    """``scheme://user:password@`` or ``scheme://TOKEN@``; the scheme decides the kind."""
    scheme = text[_name_start(text, match.start(), _SCHEME_CHARS) : match.start()]
    if not scheme or not scheme[0].isalpha():
        return None
    start, end = match.span("secret")
    secret = text[start:end]
    if match.group("user") is None:
        if len(secret) < 8 or not _has_digit_and_letter(secret):
            return None
    elif not _is_literal_secret(secret):
        return None
    base_scheme = scheme.lower().split("+")[0]  # postgresql+psycopg2, mongodb+srv
    return ("db_password" if base_scheme in _DB_SCHEMES else "url_credential"), start, end


_ENV_NAME_PARTS = frozenset(
    {"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "CREDENTIAL", "CREDENTIALS", "AUTH", "PASSPHRASE"}
)
#: Last name parts that only say how a credential is encoded: ``SECRET_KEY_BASE``, ``SIGNING_KEY_B64``.
_ENV_QUALIFIERS = frozenset({"BASE", "VALUE", "B64", "BASE64", "RAW", "DATA", "STRING", "PLAIN", "HEX"})
_ENV_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
#: A value that is itself a plain name: what ``DIMENSION_KEY = "_ARRAY_DIMENSIONS"`` holds is a lookup key.
_IDENTIFIER_VALUE = re.compile(r"_*(?:[a-z]+(?:_[a-z]+)*|[A-Z]+(?:_[A-Z]+)*)_*")


def _credential_word(name: str) -> str | None:
    """The credential word ending the name: ``DB_PASSWORD`` has one, ``PASSWORD_RESET_URL`` and ``MAX_TOKENS`` do not."""
    parts = [part for part in name.split("_") if part]
    if parts and parts[-1] in _ENV_QUALIFIERS:
        parts = parts[:-1]
    return parts[-1] if parts and parts[-1] in _ENV_NAME_PARTS else None


def _env_secret(text: str, match: re.Match[str]) -> Verdict:
    """``NAME=value`` with an upper-case NAME that ends in a credential word (``DB_PASSWORD``, ``GITHUB_TOKEN``).

    Values shorter than 6 characters are taken for configuration (``SORT_KEY=name``).
    """
    start = _name_start(text, match.start("name"), _ENV_NAME_CHARS)
    name = text[start : match.end("name")]
    if not name[:1].isalpha() or (start > 0 and text[start - 1] in "abcdefghijklmnopqrstuvwxyz.$"):
        return None
    word = _credential_word(name)
    if word is None:
        return None
    value_start, value_end = match.span("secret")
    quoted = _is_quoted(text[value_start:value_end])
    value = _unquote(text[value_start:value_end])
    if len(value) < 6 or not _is_literal_secret(value, quoted=quoted):
        return None
    if word == "KEY" and _IDENTIFIER_VALUE.fullmatch(value):
        return None
    if quoted:
        value_start, value_end = value_start + 1, value_end - 1
    return "env_secret", value_start, value_end


_FIELD_KEYWORDS = (
    r"(?:password|passwd|passphrase|secret|token|api[_-]?key|private[_-]?key|access[_-]?key|"
    r"secret[_-]?key|signing[_-]?key|credentials?)"
)


#: The next pair of a form-encoded body: ``&name=``.
_FORM_PAIR = re.compile(r"&[A-Za-z_][\w.\[\]-]*=")
#: An unquoted dict value made of name characters only is a variable, not a literal.
_BARE_NAME = re.compile(r"[A-Za-z_]+")
_BRACKET_END = re.compile(r"[\]})]")


def _secret_field(text: str, match: re.Match[str]) -> Verdict:
    """A field whose name ends in a sensitive word, in one of four layouts.

    JSON or dict literal (``"password": "x"``; a bare name as the value is a
    variable), YAML line (``password: x``), assignment or keyword argument with
    a quoted literal (``token = "x"``) and an ini/properties line or the first
    pair of a form body with a bare value (``db.password=x``,
    ``password=x&user=bob``). Anything else (prose such as ``token: the API
    token``, ``password = getpass()``) passes.
    """
    name_start = _name_start(text, match.start("key"))
    name = text[name_start : match.end("key")]
    before = text[name_start - 1] if name_start > 0 else "\n"
    close = match.group("close")
    separator = match.group("sep")
    start, end = match.span("secret")
    raw = text[start:end]
    if close and not _is_quoted(raw):  # a bare value inside a dict literal ends with the literal
        end = start + len(_BRACKET_END.split(raw, 1)[0])
        raw = text[start:end]
    value = _unquote(raw)
    if not _is_literal_secret(value, quoted=_is_quoted(raw)) or value.lower() == name.lower().rsplit(".", 1)[-1]:
        return None
    line_start = _line_prefix(text, name_start).strip() in ("", "-")
    line_ends = _rest_of_line(text, end).strip()[:1] in ("", "#") or bool(_FORM_PAIR.match(text, end))
    if close:
        layout_ok = before == close and separator == ":" and (_is_quoted(raw) or not _BARE_NAME.fullmatch(value))
    elif before in "\"'":
        layout_ok = False
    elif separator == "=":
        layout_ok = _is_quoted(raw) or (line_start and line_ends)
    else:
        layout_ok = line_start and line_ends
    if not layout_ok:
        return None
    if _is_quoted(raw):
        start, end = start + 1, end - 1
    return "secret_field", start, end


def _cli_secret(text: str, match: re.Match[str]) -> Verdict:
    """``--password VALUE``: a quoted value, or one that is not a plain prose word."""
    start, end = match.span("secret")
    raw = text[start:end]
    value = _unquote(raw)
    quoted = _is_quoted(raw)
    if not _is_literal_secret(value, quoted=quoted) or (not quoted and value.isalpha() and value.islower()):
        return None
    if _is_quoted(raw):
        start, end = start + 1, end - 1
    return "cli_secret", start, end


_QUERY_NAMES = (
    r"(?:access_token|id_token|refresh_token|auth_token|api_key|apikey|client_secret|password|passwd|secret|token|sig|signature)"
)

#: Where the credential-field rules can match: a secret-ish word, maybe more name characters, then ``=`` or ``:``.
_FIELD_MARKERS = tuple(
    word + r"[a-z0-9_-]*[\"']?[ \t]*[:=]" for word in ("key", "token", "secret", "pass", "pwd", "credential", "auth", "sig")
)

RULES: tuple[Rule, ...] = (
    # Multi-line blocks first, so later rules never see a fragment of them.
    Rule(
        re.compile(
            r"-----BEGIN (?P<label>[A-Z0-9 ]*)PRIVATE KEY(?: BLOCK)?-----.*?-----END (?P=label)PRIVATE KEY(?: BLOCK)?-----",
            re.DOTALL,
        ),
        ("PRIVATE KEY",),
        lambda text, m: ("private_key", *m.span()),
        multiline=True,
    ),
    Rule(  # A block cut off before its END line (truncated logs, shortened tool output).
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=\s:,-]|\\[nr])*"),
        ("PRIVATE KEY",),
        lambda text, m: ("private_key", *m.span()),
        multiline=True,
    ),
    # A JWT: header, and the payload and signature when present (a header alone is a token cut short).
    _token("jwt", r"eyJ[A-Za-z0-9_-]{10,}(?:\.[A-Za-z0-9_=-]{2,}){0,2}", ("eyJ",), markers=(r"eyj[a-z0-9_-]{10}",)),
    # Vendor formats recognisable by their prefix; the lengths cover each family's real range.
    _token("anthropic_key", r"sk-ant-[A-Za-z0-9_-]{20,}", ("sk-ant-",)),
    _token("openrouter_key", r"sk-or-v1-[A-Za-z0-9]{32,}", ("sk-or-",)),
    _token("openai_key", r"sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20,})", ("sk-",), _has_digit,
           (r"sk-[a-z0-9]{20}", "sk-proj-", "sk-svcacct-", "sk-admin-")),
    _token("elevenlabs_key", r"sk_[A-Za-z0-9]{32,}", ("sk_",), _mixed, (r"sk_[a-z0-9]{32}",)),
    _token("github_token", r"gh[pousr]_[A-Za-z0-9]{20,}", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    _token("github_token", r"github_pat_[A-Za-z0-9_]{22,}", ("github_pat_",)),
    _token("gitlab_token", r"gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,}", ("glpat-", "gldt-", "glrt-", "glptt-"), _has_digit),
    _token("slack_token", r"xox[abposr]-[A-Za-z0-9-]{10,}", ("xox",), _has_digit),
    _token("slack_token", r"xapp-\d-[A-Za-z0-9-]{20,}", ("xapp-",)),
    _group("slack_webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9/_-]{16,})", ("hooks.slack.com",)),
    _token("google_api_key", r"AIza[0-9A-Za-z_-]{30,}", ("AIza",)),
    _token("aws_access_key_id", r"(?:AKIA|ASIA)[A-Z0-9]{16}", ("AKIA", "ASIA")),
    _token("stripe_key", r"[spr]k_(?:live|test)_[A-Za-z0-9]{16,}", ("_live_", "_test_"), _has_digit, ("k_live_", "k_test_")),
    _token("stripe_key", r"whsec_[A-Za-z0-9]{24,}", ("whsec_",), _has_digit),
    _token("sendgrid_key", r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", ("SG.",), markers=(r"sg\.[a-z0-9_-]{16}",)),
    _token("huggingface_token", r"hf_[A-Za-z0-9]{30,}", ("hf_",), _mixed, (r"hf_[a-z0-9]{30}",)),
    _token("replicate_token", r"r8_[A-Za-z0-9]{30,}", ("r8_",), _mixed, (r"r8_[a-z0-9]{30}",)),
    _token("npm_token", r"npm_[A-Za-z0-9]{30,}", ("npm_",), _mixed, (r"npm_[a-z0-9]{30}",)),
    _token("pypi_token", r"pypi-[A-Za-z0-9_-]{50,}", ("pypi-",), _has_digit),
    _token("digitalocean_token", r"do[opr]_v1_[A-Za-z0-9]{32,}", ("_v1_",)),
    _token("groq_key", r"gsk_[A-Za-z0-9]{40,}", ("gsk_",), _mixed),
    _token("xai_key", r"xai-[A-Za-z0-9]{40,}", ("xai-",), _mixed),
    _token("fireworks_key", r"(?:fw[-_]|fpk_)[A-Za-z0-9]{20,}", ("fw-", "fw_", "fpk_"),
           lambda value: len(_body(value)) >= 30 or _mixed(_body(value)),
           (r"fw-[a-z0-9]{20}", r"fw_[a-z0-9]{20}", r"fpk_[a-z0-9]{20}")),
    _token("agentmail_key", r"am_(?:[a-z]{2,5}_)?[A-Za-z0-9]{20,}", ("am_",), lambda value: _has_digit(_body(value)),
           (r"am_[a-z0-9]{20}", r"am_[a-z]{2,5}_[a-z0-9]{20}")),
    _token("perplexity_key", r"pplx-[A-Za-z0-9]{20,}", ("pplx-",), _mixed),
    _token("tavily_key", r"tvly-(?:dev-|prod-)?[A-Za-z0-9]{20,}", ("tvly-",), _mixed),
    _token("exa_key", r"exa_[A-Za-z0-9]{16,}", ("exa_",), lambda value: _has_digit(value) and _mixed(_body(value)),
           (r"exa_[a-z0-9]{16}",)),
    _token("notion_token", r"ntn_[A-Za-z0-9]{30,}", ("ntn_",), _mixed),
    _token("matrix_token", r"syt_[A-Za-z0-9_]{20,}", ("syt_",), _mixed),
    _token("encrypted_token", r"gAAAAA[A-Za-z0-9_=-]{40,}", ("gAAAAA",)),
    _token("twilio_key", r"SK[0-9a-f]{32}", ("SK",), _has_digit, (r"sk[0-9a-f]{32}",)),
    _token("mailgun_key", r"key-[0-9a-z]{32}", ("key-",), _has_digit, (r"key-[0-9a-z]{32}",)),
    Rule(re.compile(r"(?<=\d):[A-Za-z0-9_-]{30,}" + _TOKEN_END), (":",), _telegram,
         markers=(r":(?<=\d:)[a-z0-9_-]{30}",)),
    _token(
        "discord_token",
        r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}",
        (".",),
        lambda value: _mixed(value) and _has_digit(value),
        (r"\.[a-z0-9_-]{6}\.[a-z0-9_-]{27}",),  # the signature's length too: code is full of ``.name.``
    ),
    _group("azure_key", r"(?:AccountKey|SharedAccessKey|SharedSecret)=(?P<secret>[^;\"'\s]{8,})",
           ("AccountKey=", "SharedAccessKey=", "SharedSecret="), markers=_FIELD_MARKERS),
    # Credentials identified by where they stand (these run on lower-cased text).
    _group(
        "authorization",
        r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:(?:bearer|basic|token|digest|bot|apikey|sso-key)[ \t]+)?(?P<secret>[^\s\"',;\\]{8,})",
        ("authorization",),
        _is_literal_secret,
        lowered=True,
        markers=_FIELD_MARKERS,
    ),
    _group(
        "api_key_header",
        r"(?:x-api-key|x-goog-api-key|x-auth-token|x-access-token|x-apikey|api-key|apikey|x-token)[\"']?[ \t]*:[ \t]*[\"']?(?P<secret>[^\s\"',;\\]{8,})",
        ("api-key", "apikey", "x-auth-token", "x-access-token", "x-token"),
        _is_literal_secret,
        lowered=True,
        markers=_FIELD_MARKERS,
    ),
    _group("bearer_token", r"bearer[ \t]+(?P<secret>[a-z0-9._~+/=-]{16,})", ("bearer",), _has_digit_and_letter,
           lowered=True, markers=(r"bearer[ \t]",)),
    _group(
        "aws_secret_key",
        r"aws_?secret_?access_?key[\"']?[ \t]*[:=][ \t]*[\"']?(?P<secret>[a-z0-9/+=]{40})(?![a-z0-9/+=])",
        ("secret",),
        lowered=True,
        markers=_FIELD_MARKERS,
    ),
    Rule(re.compile(r"://(?:(?P<user>[^:/@\s\[\]]*):)?(?P<secret>[^:@\s/\[\]\\]+)@"), ("://",), _url_credential,
         markers=(r"://[^/\s@]*@",)),
    Rule(
        re.compile(
            r"(?P<name>(?:KEY|TOKEN|SECRET|PASS|PWD|CREDENTIAL|AUTH)[A-Z0-9_]*)[ \t]*=(?!=)[ \t]*"
            r"(?P<secret>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'#;&|\\]+)"
        ),
        ("KEY", "TOKEN", "SECRET", "PASS", "PWD", "CREDENTIAL", "AUTH"),
        _env_secret,
        markers=_FIELD_MARKERS,
    ),
    Rule(
        re.compile(
            r"(?P<key>" + _FIELD_KEYWORDS + r")(?P<close>[\"']?)[ \t]*(?P<sep>:|=(?!=))[ \t]*"
            r"(?P<secret>\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|(?:[^\s\"'#;,\\&]|&(?![a-z_][\w.\[\]-]*=))+)"
        ),
        ("password", "passwd", "passphrase", "secret", "token", "key", "credential"),
        _secret_field,
        lowered=True,
        markers=_FIELD_MARKERS,
    ),
    _group(
        "url_parameter",
        r"[?&]" + _QUERY_NAMES + r"=(?P<secret>[^&\s#\"'<>\\]{6,})",
        ("token=", "key=", "secret=", "password=", "passwd=", "sig=", "signature="),
        _is_literal_secret,
        lowered=True,
        markers=_FIELD_MARKERS,
    ),
    Rule(
        re.compile(
            r"--(?:password|passwd|token|api-key|api_key|apikey|secret|client-secret|auth-token)"
            r"(?:=|[ \t]+)(?P<secret>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'\\]+)"
        ),
        ("--password", "--passwd", "--token", "--api-key", "--api_key", "--apikey", "--secret", "--client-secret", "--auth-token"),
        _cli_secret,
        lowered=True,
    ),
    _group(  # curl -u user:password
        "cli_secret",
        r"(?<![a-z0-9_-])(?:-u|--user)[ \t]+[\"']?[^\s:\"']+:(?P<secret>[^\s\"']+)",
        ("-u", "--user"),
        _is_literal_secret,
        lowered=True,
        markers=(r"-u[ \t]", r"--user[ \t]"),
    ),
)
