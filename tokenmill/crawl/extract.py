"""From an HTTP response payload to clean text: charset and HTML to text (the HTTP layer, with
bounded decompression, is `tokenmill.crawl.http_messages`).

Extractors (``EXTRACTORS``): ``resiliparse`` (its main-content heuristics, fast), ``trafilatura``
(slower, the library as it comes) and ``hybrid`` (the default): resiliparse, and where its main
content looks lost (``looks_lost``) on a page small enough (``FALLBACK_MAX_TAGS``), the page's
marked main region when that text is not it and does not look lost itself (``main_region``), else,
when it holds under ``TRAFILATURA_SHARE`` of the page's words, trafilatura (``fast`` mode, no
comments, without ``<nav>`` and ``<footer>``). The route depends on
the page alone, never on what a recipe keeps (languages, thresholds): extraction is shared by
every recipe.
Both resiliparse-based extractors first drop comment sections and keep them only when nothing
else is left (forum threads), and drop repeated lines.
``benchmarks/bench_clean.py`` measures all three.
"""

from __future__ import annotations

import codecs
import re
from collections import Counter
from dataclasses import dataclass

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding, map_encoding_to_html5
from resiliparse.parse.html import HTMLTree

from tokenmill.crawl import charsets
from tokenmill.crawl.html_words import words_bound
from tokenmill.crawl.http_messages import Skip, parse_http_head

HTML_TYPES = ("text/html", "application/xhtml+xml")
META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)""", re.I)
CONTROL_BYTES = bytes([*range(0x00, 0x09), *range(0x0E, 0x1B), *range(0x1C, 0x20)])
BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


# Bytes the charset detector reads (half from each end): uchardet's time grows with them (a
# 20 KB EUC-JP page costs as much as extracting it) while its answer rarely changes: the same
# on ../shared's undeclared real pages, and as often right on pages re-encoded in 20 legacy
# charsets as with the whole page (benchmarks/bench_charsets.py).
DETECTION_SAMPLE = 8192


def decode_html(body: bytes, declared: str | None) -> tuple[str, str]:
    """Decode with the byte-order mark, else the declared charset (HTTP, then <meta>) if it is a
    WHATWG label (see `tokenmill.crawl.charsets`) and fits, else UTF-8 if it fits, else the
    detected one."""
    meta = META_CHARSET.search(body[:2048])
    meta_codec = charsets.codec(meta.group(1).decode("ascii")) if meta else None
    if meta_codec and meta_codec.startswith("utf-16"):
        meta_codec = "utf-8"  # a page that could say so in ASCII is not UTF-16
    candidates = [bom for magic, bom in BOMS if body.startswith(magic)][:1]
    candidates += [charsets.codec(declared), meta_codec]
    for charset in filter(None, candidates):
        try:
            return body.decode(charset), charset
        except UnicodeDecodeError:
            continue
    # Legacy-encoded text is almost never valid UTF-8, and uchardet misreads some that is; the
    # 7-bit ISO-2022 encodings are, and their escape sequences say so.
    if b"\x1b" not in body:
        try:
            return body.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            pass
    detected = detected_charset(body)
    return bytes_to_str(body, detected, errors="replace"), detected


def detected_charset(body: bytes, sample: int = DETECTION_SAMPLE) -> str:
    """uchardet's answer as WHATWG decodes it (``iso-8859-1`` as windows-1252, ...), except
    where the standard has no name for it (CP949 Korean, ISO-2022-KR, HZ, IBM855, Mac
    Cyrillic): resiliparse's WHATWG mapping turns those into UTF-8, garbling every character,
    so the detected codec itself decodes them. uchardet reads ``sample`` bytes (0: all)."""
    found = detect_encoding(body, max_len=sample, html5_compatible=False)
    if found is None:
        return "utf-8"  # what the WHATWG mapping answers when nothing is detected
    whatwg = map_encoding_to_html5(found)
    if whatwg == "utf-8" and _text_codec(found) not in (None, "utf-8"):
        return found
    return whatwg


def _text_codec(name: str) -> str | None:
    """Python's name for a text encoding, or None (unknown, or a bytes-to-bytes codec)."""
    try:
        info = codecs.lookup(name)
    except LookupError:
        return None
    return info.name if info._is_text_encoding else None


def looks_binary(body: bytes) -> bool:
    sample = body[:4096]
    controls = len(sample) - len(sample.translate(None, CONTROL_BYTES))
    return b"\x00" in sample or controls > len(sample) // 100


EXTRACTORS = ("hybrid", "resiliparse", "trafilatura")
DEFAULT_EXTRACTOR = "hybrid"
# Chosen on wcxb-dev-sample, where 36 of 400 pages look lost without their comment sections
# and 25 of them go to trafilatura (see benchmarks/bench_clean.py).
FALLBACK_MAX_WORDS = 200
FALLBACK_SHARE = 0.3
# trafilatura costs ~40 resiliparse pages per page; it replaces a lost main content only when
# that text is under this share of the page's words. Between it and FALLBACK_SHARE, its gain
# is near zero on wcxb-dev-sample, scrapinghub and trafilatura's own evaluation set (pages
# trimmed, not lost); below it, the gain is most of what the fallback brings
# (benchmarks/bench_fallback.py).
TRAFILATURA_SHARE = 0.05
# trafilatura's time grows with the page's element count ("<" is a cheap proxy): above this a
# fallback costs as much as ~40 resiliparse pages, for a smaller gain on average.
FALLBACK_MAX_TAGS = 5000


def _line_list(text: str) -> list[str]:
    text = text.replace("\ufeff", "")  # byte-order marks pasted mid-page by templates
    return list(filter(None, map(str.strip, text.splitlines())))


def _lines(text: str) -> str:
    return "\n".join(_line_list(text))


def _without_repeats(text: str, lines: list[str] | None = None) -> str:
    """Drop the repeats of a line of two words or more (captions rendered twice, "Read more"
    under every teaser); single tokens such as prices or closing braces stay. ``text`` is one
    ``_lines`` made: "\n" is its only line break, and most texts come back as they are;
    ``lines``: its lines, if split already."""
    if lines is None:
        lines = text.split("\n")
    if len(set(lines)) == len(lines):
        return text
    seen: set[str] = set()
    remember = seen.add  # returns None: keeps the line after remembering it
    return "\n".join(line for line in lines if not (line in seen and " " in line or remember(line)))


def _resiliparse_lines(tree: HTMLTree, main_content: bool, comments: bool = True) -> list[str]:
    return _line_list(_plain_text(tree, main_content, comments))


def _plain_text(
    tree: HTMLTree, main_content: bool, comments: bool = True, skip: list[str] | None = None
) -> str:
    return extract_plain_text(
        tree,
        main_content=main_content,
        preserve_formatting=True,
        alt_texts=False,
        comments=comments,
        skip_elements=skip,
    )


# Every class or id resiliparse's comment-section rule drops (``comments=False``) contains one
# of these words; a page without any such element extracts the same either way.
COMMENT_SECTIONS = ",".join(
    f"[{attribute}*={word} i]" for attribute in ("class", "id") for word in ("comment", "reply")
)


def _has_comment_sections(tree: HTMLTree) -> bool:
    return tree.document.query_selector(COMMENT_SECTIONS) is not None


# Removed before the fallback's trafilatura sees the page: navigation and footers are never the
# content it recovers, and its page-wide passes (pruning, the page text it compares its result
# with) then have fewer elements to walk: faster, and a higher word F1 on wcxb-dev-sample and
# scrapinghub (benchmarks/bench_clean.py).
FALLBACK_PRUNE = ["//nav", "//footer"]


def load_extractor(extractor: str, main_content: bool = True) -> None:
    """Import the libraries ``extractor`` may call (trafilatura, for a lost main content):
    otherwise imported on first need, as it is slow to import and rarely needed."""
    if main_content and extractor != "resiliparse":
        import trafilatura  # noqa: F401


def _trafilatura(html: str, fast: bool = False) -> str:
    import trafilatura

    if fast:
        return _lines(
            trafilatura.extract(html, fast=True, include_comments=False, prune_xpath=FALLBACK_PRUNE)
            or ""
        )
    return _lines(trafilatura.extract(html) or "")


# Runs of characters of scripts written without spaces (Thai, Lao, Myanmar, Khmer, Kana, Han):
# a lost main content is judged by its words, and a Chinese page's text has few spaces, so
# about one word is counted per two such characters (the mean length of a Chinese word).
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
)


def _word_count(text: str) -> int:
    words = len(text.split())
    if text.isascii():
        return words
    return words + sum(map(len, _UNSPACED.findall(text))) // 2


def _fewer_words(text: str, limit: int) -> bool:
    """``_word_count(text) < limit`` without splitting a long text to its end, nor copying
    it: a start holding ``limit`` words answers (a word cut at its end is still one), before
    the text is searched for scripts without spaces (which only add words)."""
    head = text[: 16 * limit]
    if len(head.split(maxsplit=limit)) >= limit:
        return False
    if not text.isascii() and _UNSPACED.search(text):
        return _word_count(text) < limit
    return len(head) == len(text) or len(text.split(maxsplit=limit)) < limit


def html_to_text(
    html: str,
    main_content: bool = True,
    extractor: str = DEFAULT_EXTRACTOR,
) -> str:
    """Text of an HTML page. ``main_content=False`` keeps the whole page (resiliparse only)."""
    if extractor not in EXTRACTORS:
        raise ValueError(f"unknown extractor {extractor!r}, expected one of {EXTRACTORS}")
    if extractor == "trafilatura" and main_content:
        return _trafilatura(html)
    if not main_content:
        return "\n".join(_resiliparse_lines(HTMLTree.parse(html), main_content=False))
    return main_content_route(html, fallback=extractor == "hybrid")[0]


ROUTES = ("main content", "with comments", "main region", "trafilatura")


def main_content_route(html: str, fallback: bool) -> tuple[str, str]:
    """Main content by resiliparse, and which of ``ROUTES`` gave it: without comment sections;
    with them when nothing else is left (forum threads); if ``fallback``, when resiliparse's
    text still looks lost and the page is small enough, what ``_recovered`` finds instead.
    Whether the text looks lost is asked only where the answer can change it: a page without
    comment sections and too large to recover keeps its main content (nor are its words
    counted)."""
    tree = HTMLTree.parse(html)
    lines = _resiliparse_lines(tree, main_content=True, comments=False)
    text, route = "\n".join(lines), ROUTES[0]
    if _fewer_words(text, FALLBACK_MAX_WORDS):
        recoverable = fallback and html.count("<") <= FALLBACK_MAX_TAGS
        if (recoverable or _has_comment_sections(tree)) and looks_lost(
            text, page_words := PageWords(tree, words_bound(html))
        ):
            if _has_comment_sections(tree):
                lines = _resiliparse_lines(tree, main_content=True)
                text = "\n".join(lines)
            route = ROUTES[1]
            if recoverable and looks_lost(text, page_words):
                recovered = _recovered(tree, html, text, page_words)
                if recovered is not None:
                    (text, route), lines = recovered, None
    return _without_repeats(text, lines), route


def _recovered(
    tree: HTMLTree, html: str, text: str, page_words: PageWords
) -> tuple[str, str] | None:
    """What replaces a main content that looks lost, and its route: nothing when it is the
    page's marked main region (``covers``); that region's text when it does not look lost
    itself (a documentation page's tables and lists, which resiliparse drops as boilerplate);
    else, when ``text`` is nearly none of the page (``TRAFILATURA_SHARE``), trafilatura's main
    content, if it finds any."""
    region = main_region(tree, len(html))
    if region is not None:
        whole = _plain_text(region, main_content=False)
        if covers(region, text, whole):
            return None
        if region.document.query_selector(",".join(REGION_BOILERPLATE)) is not None:
            whole = _plain_text(region, main_content=False, skip=REGION_BOILERPLATE)
        region_text = _lines(whole)
        if not looks_lost(region_text, page_words):
            return region_text, ROUTES[2]
    if not page_words.share_exceeds(_word_count(text), TRAFILATURA_SHARE):
        return None
    recovered = _trafilatura(html, fast=True)
    return (recovered, ROUTES[3]) if recovered else None


class PageWords:
    """A whole page's words (as ``_word_count`` counts them), counted only as far as a
    comparison needs: not at all where an upper ``bound`` of them answers (the page's text is
    extracted on first need), and a long text is neither split to its end nor searched for
    scripts without spaces."""

    __slots__ = ("_page", "_text", "bound")

    def __init__(self, page: HTMLTree | str, bound: int | None = None):
        self._page = page
        self._text = page if isinstance(page, str) else None
        self.bound = bound

    @property
    def text(self) -> str:
        """The words of _lines(page): _lines changes no word but a byte-order mark's."""
        if self._text is None:
            self._text = _plain_text(self._page, main_content=False).replace("\ufeff", "")
        return self._text

    def share_exceeds(self, words: int, share: float = FALLBACK_SHARE) -> bool:
        """Whether ``share`` of the page's words is more than ``words`` (never, for 0)."""
        if share <= 0:
            return False
        needed = int(words / share)  # the fewest page words whose share is more
        while needed > 0 and share * (needed - 1) > words:
            needed -= 1
        while not share * needed > words:
            needed += 1
        if self.bound is not None and self.bound < needed:
            return False
        return not _fewer_words(self.text, needed)


def looks_lost(main_text: str, page_words: PageWords) -> bool:
    """Whether a main content looks like it lost the page's content: it is short and a small
    share of the whole page's words."""
    words = _word_count(main_text)
    return words < FALLBACK_MAX_WORDS and page_words.share_exceeds(words)


# A page's own mark of its main content. Documentation sites put their navigation beside it, and
# tables of contents or indexes of links inside it: their main text is a small share of the
# page's words without being lost (resiliparse and trafilatura both leave link lists out).
MAIN_REGION = "main, [role=main]"
REGION_PRECISION = 0.9
REGION_SLACK = 5  # words outside the region a text may have whatever its length (a title, a date)
REGION_COVERAGE = 0.7
# Left out of a main region's text when it replaces a lost main content: landmarks that are
# never the content (a region's <header> holds its title, kept).
REGION_BOILERPLATE = ["nav", "footer", "aside"]
WORD = re.compile(r"\w+")


def main_region(tree: HTMLTree, page_chars: int) -> HTMLTree | None:
    """The page's marked main region(s), parsed on their own (a node's .text runs the text of
    adjacent blocks together), or None: none marked, or regions nested in each other so deep
    that their HTML adds up to more than twice the page's length, ``page_chars``."""
    parts, chars = [], 0
    for node in tree.document.query_selector_all(MAIN_REGION):
        parts.append(node.html)
        chars += len(parts[-1])
        if chars > 2 * page_chars:
            return None
    return HTMLTree.parse("".join(parts)) if parts else None


def covers(region: HTMLTree, text: str, whole: str | None = None) -> bool:
    """Whether ``text`` is the main ``region``: at least ``REGION_PRECISION`` of its words (all
    but ``REGION_SLACK`` of a short text) are the region's, and they are at least
    ``REGION_COVERAGE`` of the region's words outside links. Chosen on wcxb-dev-sample (its F1
    unchanged) and documentation pages (benchmarks/bench_clean.py). ``whole``: the region's
    text, if extracted already."""
    found = _word_bag(text)
    if whole is None:
        whole = _plain_text(region, main_content=False)
    shared = (found & _word_bag(whole)).total()
    outside = found.total() - shared
    if not shared or outside > max((1 - REGION_PRECISION) * found.total(), REGION_SLACK):
        return False
    prose = _word_bag(_plain_text(region, main_content=False, skip=["a"]))
    return (found & prose).total() >= REGION_COVERAGE * prose.total()


def _word_bag(text: str) -> Counter:
    return Counter(WORD.findall(text.lower()))


@dataclass(frozen=True, slots=True)
class Extracted:
    text: str
    charset: str


def extract_document(
    block: bytes,
    max_html_bytes: int,
    main_content: bool = True,
    extractor: str = DEFAULT_EXTRACTOR,
) -> Extracted:
    """Text of an HTTP response block, or `Skip` saying why there is none."""
    response = parse_http_head(block)
    if response.status != 200:
        raise Skip("http_status", str(response.status))
    if response.mime and response.mime not in HTML_TYPES:
        raise Skip("non_html", response.mime)
    response = response.decoded(max_html_bytes)
    if not response.body.strip():
        raise Skip("empty_body")
    if len(response.body) > max_html_bytes:
        raise Skip("html_too_large", f"{len(response.body)} bytes > {max_html_bytes}")
    if looks_binary(response.body):
        raise Skip("binary_payload", f"labeled {response.mime or 'without type'}")
    html, charset = decode_html(response.body, response.declared_charset)
    text = html_to_text(html, main_content, extractor)
    if not text:
        raise Skip("no_text")
    return Extracted(text, charset)
