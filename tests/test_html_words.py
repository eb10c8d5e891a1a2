"""The upper bound of a page's words read off its HTML source (`tokenmill.crawl.html_words`):
never under the words of resiliparse's whole-page text, on hostile markup, random markup and
real pages, and close enough to answer the extractor's question on plain pages."""

from __future__ import annotations

import gzip
import random

import pytest
from resiliparse.parse.html import HTMLTree

import tokenmill.crawl.extract as extract
from testkit.shared_data import html_responses, shared_path
from tokenmill.crawl.extract import _plain_text, _word_count, decode_html, main_content_route
from tokenmill.crawl.html_words import words_bound


def page_words(html: str) -> int:
    """What the bound bounds: the words of the page's whole text, as the extractor counts."""
    return _word_count(_plain_text(HTMLTree.parse(html), main_content=False).replace("\ufeff", ""))


HOSTILE = [
    "",
    "<",
    "plain words, no markup at all",
    "<p>one&nbsp;two&#160;three&#x3000;four</p>",
    "<p>&#x4e00;&#x4e01;&#x4e02;&#x4e03;&#x4e04;&#x4e05;</p>",
    "<ul><li>a</li><li>b</li><li>c</li></ul><ol><li>x<li>y</ol>",
    "<p>a</p><!-- > not the end --><p>b c</p>",
    "<!--><p>after an abrupt comment</p><!---><p>and another</p>",
    "<p>x</p><!-- a --!> <p>after a bang end</p>",
    "<a title=\"x > y\" href='<script>'>link text</a> after",
    "<a b='unclosed quote>words that are an attribute value",
    '<div ="x>y">kept words</div>',
    "<body><title>a<b c d</title>e f</body>",
    "<xmp><a href=x>shown as text</a></xmp> tail words",
    "<plaintext><b>all</b> of this is text <i>too</i>",
    "<textarea>a <b>c</b></textarea> d",
    "<script>if (a<b) { x = '</scriptx>'; }</script><p>visible words here</p>",
    "<svg><title>t</title><![CDATA[ cdata words ]]></svg><p>z</p>",
    "<math><mi><![CDATA[ inside math ]]></mi></math>",
    "<p>a<![CDATA[ b > c ]]>d</p>",
    "<noscript><p>one two</p></noscript><p>three</p>",
    "<noembed>a b <i>c</i></noembed><noframes>d <b>e</b></noframes>",
    "<p>\ufeffbom\ufeff words</p><p>ไทยภาษา 日本語の文章 中文</p>",
    "<p>null\x00byte and \r\n crlf</p>",
    "<p>cut off utf-8 at the end: \u00e9",
    "<table>a<tr><td>b</td></tr>c</table>d",
    "<P>UPPER <LI>CASE <TITLE>T</TITLE> <XMP><B>raw</B></XMP>",
    "</ p>text</>more<?pi > after <!DOCTYPE x> end",
    "<p>a < b and c > d, x<y</p>",
]


@pytest.mark.parametrize("html", HOSTILE)
def test_the_bound_holds_on_hostile_markup(html):
    assert words_bound(html) >= page_words(html)


FRAGMENTS = [
    "<p>", "</p>", "word", " ", "中文", "&nbsp;", "&#x4e00;", "<li>", "<!--", "-->", "<title>",
    "</title>", "<xmp>", "</xmp>", "<script>", "</script>", '<a title="x>y">', "<", ">",
    "<![CDATA[", "]]>", "<textarea>", "</textarea>", "<plaintext>", "<b>", "a<b", "\u3000",
    "\xa0", "<math>", "</math>", "<svg>", "</svg>", "<ul>", "<ol>", 'x="', "'", "<!DOCTYPE html>",
    "<noscript>", "</noscript>", "<style>", "</style>", "<?x>", "</ >", "</>", "&amp;",
    "&lt;b&gt;", "\ufeff", "ไทย", "<table>", "<td>", "<br>", "<img alt='a b'>", "<figure>",
    "<iframe>", "</iframe>", "<!-->", "--!>", "=",
]  # fmt: skip


def test_the_bound_holds_on_random_markup():
    rng = random.Random(11)
    for _ in range(4000):
        html = "<html><body>" + "".join(rng.choice(FRAGMENTS) for _ in range(rng.randrange(60)))
        assert words_bound(html) >= page_words(html), html


def real_pages():
    folder = shared_path("corpora", "extraction")
    if folder is None:
        pytest.skip("../shared is absent")
    for path in sorted(folder.glob("*/html/*.html.gz")):
        yield decode_html(gzip.decompress(path.read_bytes()), None)[0]
    names = [p.name for p in shared_path("corpora", "warc").glob("*.warc.gz")]
    for response in html_responses(names):
        yield decode_html(response.html, response.charset)[0]


def test_the_bound_holds_on_real_pages():
    checked = 0
    for html in real_pages():
        assert words_bound(html) >= page_words(html), html[:200]
        checked += 1
    assert checked > 500


def test_the_bound_of_a_plain_page_is_near_its_words():
    body = "".join(f"<p>Paragraph {i} has exactly these eight words in it.</p>" for i in range(20))
    html = f"<html><head><title>Title</title><style>p {{ x: y }}</style></head><body>{body}"
    assert page_words(html) == 180
    assert 180 <= words_bound(html) <= 190  # the head's text: "Title", "p", "{", "x:", "y", "}"


ROUTE_PAGES = [
    "<html><body><nav>" + " ".join(f"<a href=/{i}>link {i}</a>" for i in range(300)) + "</nav>"
    "<article><p>A short article of a few words.</p></article></body></html>",
    "<html><body><main><table>"
    + "".join(f"<tr><td>key {i}</td><td>value {i}</td></tr>" for i in range(80))
    + "</table></main><aside>"
    + "side words " * 200
    + "</aside></body></html>",
    "<html><body><div class='comment-list'>"
    + "<p>a reader's comment on the post</p>" * 30
    + "</div><p>The post itself.</p></body></html>",
    "<html><body><p>Only a small page with a few words.</p></body></html>",
]


def test_routes_are_those_of_counting_every_page_word(monkeypatch):
    pages = list(ROUTE_PAGES)
    rng = random.Random(12)
    pages += [
        "<html><body>" + "".join(rng.choice(FRAGMENTS) for _ in range(rng.randrange(200)))
        for _ in range(300)
    ]
    with_bound = [main_content_route(html, fallback=True) for html in pages]
    monkeypatch.setattr(extract, "words_bound", lambda html: None)
    assert with_bound == [main_content_route(html, fallback=True) for html in pages]
