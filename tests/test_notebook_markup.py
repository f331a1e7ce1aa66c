"""Model text becomes HTML with only our own tags: nothing from the model is passed through as markup."""

from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.notebook.markup import ALLOWED_TAGS, SAFE_URL, markdown_to_html


class TagAudit(HTMLParser):
    """Collects every tag and attribute the browser would see."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str, str | None]] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += [(tag, name, value) for name, value in attrs]

    def handle_data(self, data):
        self.text += data


def audit(html: str) -> TagAudit:
    parser = TagAudit()
    parser.feed(html)
    parser.close()
    return parser


def assert_safe(html: str) -> None:
    found = audit(html)
    assert set(found.tags) <= ALLOWED_TAGS, found.tags
    for tag, name, value in found.attributes:
        assert (tag, name) in {("a", "href"), ("a", "rel"), ("a", "target")}, (tag, name)
        if name == "href":
            assert SAFE_URL.match(value), value


@pytest.mark.parametrize("attack", [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "<iframe src='https://evil.example'></iframe>",
    '[click](javascript:alert(1))',
    '[click](data:text/html;base64,PHNjcmlwdD4=)',
    '<a href="javascript:alert(1)">x</a>',
    "```\n</code></pre><script>alert(1)</script>\n```",
    "`<b onmouseover=alert(1)>`",
    '**<svg onload=alert(1)>**',
    "<style>body{display:none}</style>",
])
def test_markup_from_the_model_is_shown_as_text_never_run(attack):
    html = markdown_to_html(attack)
    assert_safe(html)
    assert "<script" not in html and "<img" not in html and "<iframe" not in html
    assert "javascript:" not in " ".join(v or "" for _, _, v in audit(html).attributes)


def test_the_visible_text_of_an_attack_is_the_attack_itself():
    attack = '<img src=x onerror="alert(1)">'
    assert audit(markdown_to_html(attack)).text == attack


def test_markdown_subset_renders():
    html = markdown_to_html(
        "# Title\n\nSome **bold** and *soft* text with `code` and a [link](https://example.com/a?b=1&c=2).\n\n"
        "- one\n- two\n\n1. first\n2. second\n\n```python\nprint('<hi>')\n```"
    )
    assert "<h1>Title</h1>" in html
    assert "<strong>bold</strong>" in html and "<em>soft</em>" in html and "<code>code</code>" in html
    assert '<a href="https://example.com/a?b=1&amp;c=2"' in html
    assert "<ul><li>one</li><li>two</li></ul>" in html and "<ol><li>first</li><li>second</li></ol>" in html
    assert "<pre><code>print(&#x27;&lt;hi&gt;&#x27;)</code></pre>" in html
    assert_safe(html)


def test_an_open_fence_while_streaming_is_a_code_block():
    html = markdown_to_html("Here:\n```\nline one\nline two")
    assert html.endswith("<pre><code>line one\nline two</code></pre>")


def test_lines_of_a_paragraph_keep_their_breaks():
    assert markdown_to_html("a\nb") == "<p>a<br>b</p>"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>&\"'`*_[]()#-:/ \n=abcjsvrtpx1.")), max_size=120))
def test_any_text_renders_to_allowed_tags_only(text):
    assert_safe(markdown_to_html(text))
