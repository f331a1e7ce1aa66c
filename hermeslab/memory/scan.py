"""Refuse memory and skill text that would attack the agent reading it later.

Whatever is saved to MEMORY.md, USER.md or a skill is pasted into every
future system prompt, so a poisoned entry (planted through a web page, a file
or a persuasive user) acts like an instruction from the operator. ``scan``
is a pure function: it names the first threat it finds, with a reason the
model can act on, or returns None for ordinary notes.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

#: Longest piece of the offending text quoted back in a refusal.
EXCERPT_CHARS = 60


@dataclass(frozen=True)
class Threat:
    #: ``injection``, ``exfiltration`` or ``invisible_unicode``.
    category: str
    reason: str
    excerpt: str

    def describe(self) -> str:
        return f"{self.reason} (found: {self.excerpt!r})"


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE | re.MULTILINE)


_SEND = r"(?:send|upload|post|transmit|exfiltrate|forward|e-?mail|leak|submit)"
_SECRET_FILE = (
    r"(?:~/\.ssh\b|\.ssh/|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/credentials|\.netrc\b|/etc/(?:shadow|passwd|sudoers)|"
    r"\.git-credentials|\.npmrc\b|\.pypirc\b|\.kube/config|\.gnupg\b|\.docker/config\.json|(?<![\w.])\.env(?![\w.])|"
    r"\bprivate[\s_-]?keys?\b|\bkeychain\b|\bwallet\.dat\b)"
)
_SECRET_VAR = r"\$\{?\w*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH)\w*\}?"
_NET_TOOL = (r"(?:\bcurl\b|\bwget\b|\bnc\b|\bncat\b|\bsocat\b|Invoke-WebRequest|Invoke-RestMethod|"
             r"requests\.(?:post|put|get)|\bfetch\s*\()")
_OVERRIDE = r"\b(?:ignore|disregard|forget|override|bypass)\b"

#: (category, reason, pattern), tried in order.
_PATTERNS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("injection", "tries to override the agent's instructions",
     _rx(rf"{_OVERRIDE}[^.\n]{{0,40}}?\b(?:previous|prior|above|earlier|preceding|your|system|developer|original|"
         r"initial)\b[^.\n]{0,25}?\b(?:instructions?|rules|directives?|prompts?|guidelines|guardrails|constraints|"
         rf"messages|context)\b|{_OVERRIDE}\s+(?:all|any|every)\s+(?:other\s+)?(?:instructions?|directives?|prompts?|"
         r"guardrails)\b")),
    ("injection", "claims to replace the system prompt",
     _rx(r"\b(?:new|updated|real|actual|true|hidden|secret|override)\s+(?:system|developer)\s+"
         r"(?:prompt|instructions?|message|directive)s?\s*(?::|=|—|-\s|follows\b|is\b|are\b|reads\b)")),
    ("injection", "imitates a chat role marker to pose as the system",
     _rx(r"^\s*(?:system|developer)\s+(?:message|prompt|override|instructions?)\s*:|"
         r"\[\s*(?:system|developer)(?:\s+(?:message|prompt|note))?\s*\]|"
         r"<\|?(?:im_start|im_end|system|endoftext)\|?>|"
         r"</?\s*(?:system|system_prompt|instructions|memory-snapshot|memory-context)\s*>")),
    ("injection", "tells the agent to take on an unrestricted persona",
     _rx(r"\byou\s+are\s+(?:now|no\s+longer)\s+(?:in\s+)?(?:dan\b|developer\s+mode|jailbroken|unrestricted|"
         r"unfiltered|uncensored|free\s+(?:of|from)|bound\b|an?\s+(?:unrestricted|unfiltered|uncensored|evil)\b)|"
         r"\b(?:act|behave|pretend|roleplay|role-play)\s+(?:as\s+(?:if\s+)?)?(?:you\s+(?:have|had)\s+no\s+"
         r"(?:rules|restrictions|limits|guidelines)|an?\s+(?:unrestricted|unfiltered|uncensored|jailbroken)\b)|"
         r"\b(?:enable|enter|activate)\s+(?:dan|developer|god|jailbreak)\s+mode\b")),
    ("injection", "tells the agent to switch off its safeguards",
     _rx(r"\b(?:disable|turn\s+off|switch\s+off|deactivate|circumvent)\s+(?:all\s+|your\s+|the\s+|any\s+)?"
         r"(?:safety(?:\s+\w+)?|security\s+(?:checks|rules|policies)|guardrails?|content\s+filters?|restrictions|"
         r"approvals?|sandbox(?:ing)?)\b")),
    ("injection", "tells the agent to hide what it does from the user",
     _rx(r"\b(?:do\s+not|don't|never|without)\s+(?:tell(?:ing)?|inform(?:ing)?|notify(?:ing)?|alert(?:ing)?|"
         r"mention(?:ing)?(?:\s+(?:it|this))?\s+to|let(?:ting)?)\s+the\s+(?:user|human|operator)\b"
         r"(?!\s+(?:wait|down))")),
    ("exfiltration", "asks to send a secret file or key somewhere",
     _rx(rf"\b{_SEND}\b[^\n]{{0,80}}?{_SECRET_FILE}|{_SECRET_FILE}[^\n]{{0,80}}?\b(?:to|into)\s+(?:https?://|"
         rf"ftp://|\S+@\S+\.\w+|(?:my|this|the|our|a|an)\s+(?:remote\s+)?(?:server|endpoint|webhook|url|address|"
         rf"email|inbox|pastebin|gist|bucket|channel)\b)")),
    ("exfiltration", "pipes a secret file into another command",
     _rx(rf"\b(?:cat|type|base64|xxd|tar|zip|gpg)\b[^\n|]{{0,60}}{_SECRET_FILE}[^\n|]{{0,40}}\|")),
    ("exfiltration", "sends credentials or secret files over the network",
     _rx(rf"{_NET_TOOL}[^\n]{{0,160}}?(?:{_SECRET_VAR}|{_SECRET_FILE}|\$\((?:env|printenv)\)|`(?:env|printenv)`)|"
         rf"(?:{_SECRET_VAR}|\bprintenv\b|\benv\b)[^\n]{{0,40}}\|\s*{_NET_TOOL}")),
    ("exfiltration", "puts a credential into a URL",
     _rx(r"\b(?:https?|ftp)://[^\s]*[?&](?:api[_-]?key|key|token|access[_-]?token|secret|password|passwd|pwd|auth|"
         r"sig)=[^\s&]+")),
)

#: Invisible code points used to hide text from a reader: zero-width and joiner characters,
#: bidirectional controls, tag characters and other format-only characters.
_INVISIBLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0x1D173, 0x1D17A), (0xE0000, 0xE007F),
)
_ZERO_WIDTH_JOINER = 0x200D
_INVISIBLE = re.compile("[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in _INVISIBLE_RANGES) + "]")


def scan(text: str) -> Threat | None:
    """The first threat in ``text``, or None when it reads as an ordinary note."""
    if not isinstance(text, str):
        raise TypeError(f"scan expects text, got {type(text).__name__}")
    hidden = _invisible(text)
    if hidden is not None:
        return hidden
    folded = unicodedata.normalize("NFKC", text)
    for category, reason, pattern in _PATTERNS:
        match = pattern.search(folded)
        if match is not None:
            return Threat(category, reason, _excerpt(match.group(0)))
    return None


def _invisible(text: str) -> Threat | None:
    for match in _INVISIBLE.finditer(text):
        index, point = match.start(), ord(match.group(0))
        if point == _ZERO_WIDTH_JOINER and _joins_symbols(text, index):
            continue
        name = unicodedata.name(match.group(0), "unnamed")
        return Threat("invisible_unicode", f"contains the invisible character U+{point:04X} ({name}), "
                      "which can hide text from a human reader", _excerpt(text[max(0, index - 20):index + 20]))
    return None


def _joins_symbols(text: str, index: int) -> bool:
    """A zero-width joiner inside an emoji sequence (both neighbours are symbols) is harmless."""
    if index == 0 or index + 1 >= len(text):
        return False
    return all(unicodedata.category(c) in ("So", "Sk", "Mn") or 0xFE00 <= ord(c) <= 0xFE0F
               for c in (text[index - 1], text[index + 1]))


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS - 1] + "…"
