"""Model text to safe HTML: a small Markdown subset, built on escaped text.

Model output is untrusted, and JupyterLab renders HTML from the running session
without sanitising it. So nothing from the model is ever passed through as
markup: every character is escaped first, and the only tags in the result are
the ones emitted here (paragraphs, headings, lists, code, emphasis and
``http(s)``/``mailto`` links). Half-streamed text is fine: an open code fence
renders as a code block until it closes.
"""

from __future__ import annotations

import html
import re

#: Tags this module can emit, for tests and for anyone checking the output.
ALLOWED_TAGS = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "pre", "code", "strong",
                          "em", "a", "br"})
SAFE_URL = re.compile(r"^(?:https?://|mailto:)[^\s<>\"'`]+$", re.IGNORECASE)

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+.#-]*)\s*$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^ {0,3}[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^ {0,3}\d{1,9}[.)]\s+(.*)$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_LINK = re.compile(r"\[([^\[\]\n]+)\]\(([^()\s]+)\)")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.DOTALL)
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])")


def escape(text: str) -> str:
    """Escape text for an HTML element body or a quoted attribute."""
    return html.escape(text, quote=True)


def markdown_to_html(text: str) -> str:
    """Render ``text`` as HTML; every character of it ends up escaped or inside a known tag."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    list_tag = ""
    index = 0

    def close_paragraph() -> None:
        if paragraph:
            out.append("<p>" + "<br>".join(inline(line) for line in paragraph) + "</p>")
            paragraph.clear()

    def close_list() -> None:
        nonlocal list_tag
        if items:
            out.append(f"<{list_tag}>" + "".join(f"<li>{inline(item)}</li>" for item in items) + f"</{list_tag}>")
            items.clear()
        list_tag = ""

    while index < len(lines):
        line = lines[index]
        fence = _FENCE.match(line)
        if fence:
            close_paragraph()
            close_list()
            marker = fence.group(1)
            body: list[str] = []
            index += 1
            while index < len(lines) and not lines[index].strip().startswith(marker):
                body.append(lines[index])
                index += 1
            index += 1  # the closing fence (or the end of a still-streaming block)
            out.append("<pre><code>" + escape("\n".join(body)) + "</code></pre>")
            continue
        heading, bullet, numbered = _HEADING.match(line), _BULLET.match(line), _NUMBERED.match(line)
        if not line.strip():
            close_paragraph()
            close_list()
        elif heading:
            close_paragraph()
            close_list()
            level = len(heading.group(1))
            out.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif bullet or numbered:
            close_paragraph()
            tag = "ul" if bullet else "ol"
            if list_tag != tag:
                close_list()
                list_tag = tag
            items.append((bullet or numbered).group(1))
        elif items and line.startswith((" ", "\t")):
            items[-1] += " " + line.strip()
        else:
            close_list()
            paragraph.append(line)
        index += 1
    close_paragraph()
    close_list()
    return "".join(out)


def inline(text: str) -> str:
    """Inline Markdown (code spans, links, strong, emphasis) over escaped text."""
    parts: list[str] = []
    position = 0
    for match in _CODE_SPAN.finditer(text):
        parts.append(_links(text[position:match.start()]))
        parts.append("<code>" + escape(match.group(2)) + "</code>")
        position = match.end()
    parts.append(_links(text[position:]))
    return "".join(parts)


def _links(text: str) -> str:
    parts: list[str] = []
    position = 0
    for match in _LINK.finditer(text):
        label, url = match.group(1), match.group(2)
        if not SAFE_URL.match(url):
            continue
        parts.append(_emphasis(escape(text[position:match.start()])))
        parts.append(f'<a href="{escape(url)}" rel="noopener noreferrer" target="_blank">'
                     f"{_emphasis(escape(label))}</a>")
        position = match.end()
    parts.append(_emphasis(escape(text[position:])))
    return "".join(parts)


def _emphasis(escaped: str) -> str:
    """Strong and emphasis on already escaped text (``*`` and ``_`` survive escaping unchanged)."""
    escaped = _STRONG.sub(lambda m: f"<strong>{m.group(2)}</strong>", escaped)
    return _EMPHASIS.sub(lambda m: f"<em>{m.group(1)}</em>", escaped)
