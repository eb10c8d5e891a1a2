"""Deterministic generator of a realistic demo web crawl with known ground truth.

``generate_demo_crawl`` writes gzipped WARC/1.1 files (one gzip member per record) full of
realistic HTML pages plus a JSON ground-truth file describing every response record::

    {"crawl": str, "seed": int, "files": [file name, ...],
     "pages": [{"url", "file", "record_id", "offset", "kind", "language", "group", "jaccard",
                "charset"}, ...]}

``kind`` is one of ``good``, ``foreign:<lang>``, ``exact_dup``, ``near_dup``, ``spam:<type>``,
``non_html`` or ``broken:<type>``. ``group`` is the original page's URL for duplicates,
``jaccard`` the word-5-gram Jaccard similarity of a near duplicate to its original, and
``charset`` the encoding the body bytes really use (``None`` for binary bodies). ``offset`` is
where the record's gzip member starts, for corrupt members too.

Everything is derived from ``seed`` through ``random.Random`` and seeded Faker instances, so the
same arguments always produce the same bytes.
"""

from __future__ import annotations

import argparse
import calendar
import html
import io
import json
import random
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

try:
    from faker import Faker
    from faker.providers.lorem.la import Provider as LatinLorem
except ModuleNotFoundError as error:  # a development dependency, not in the production image
    raise ModuleNotFoundError(
        "the demo crawl generator needs the 'faker' package: install the development"
        " dependencies (`uv sync`) or `pip install faker`",
        name=error.name,
    ) from error

from tokenmill.demo.warc_writer import WarcWriter, make_record_id

GOOD = "good"
EXACT_DUP = "exact_dup"
NEAR_DUP = "near_dup"
NON_HTML = "non_html"
FOREIGN_PREFIX = "foreign:"
SPAM_TYPES = ("keyword_stuffing", "too_short", "lorem_ipsum", "symbols", "link_list")
BROKEN_TYPES = (
    "truncated_record",
    "corrupt_gzip",
    "binary_as_html",
    "mislabeled_charset",
    "empty_body",
)
TRUNCATED = "broken:truncated_record"
CORRUPT = "broken:corrupt_gzip"

# Shares of the non-broken pages; "good" takes whatever is left.
KIND_SHARES = {"foreign": 0.10, EXACT_DUP: 0.08, NEAR_DUP: 0.08, "spam": 0.08, NON_HTML: 0.02}
BROKEN_SHARE = 0.015
MIN_PAGES_PER_FILE = 10

FOREIGN_LOCALES = {
    "de": "de_DE",
    "fr": "fr_FR",
    "es": "es_ES",
    "it": "it_IT",
    "ru": "ru_RU",
    "nl": "nl_NL",
    "pl": "pl_PL",
    "zh": "zh_CN",
    "ja": "ja_JP",
}
LEGACY_CHARSETS = {"de": "iso-8859-1", "fr": "iso-8859-1", "ru": "windows-1251"}
UNSPACED_LANGUAGES = frozenset({"zh", "ja"})
MIN_NEAR_DUP_JACCARD = 0.85

_SLOT = re.compile(r"\{(\w+)\}")
_NON_WORD = re.compile(r"[^\w\s]")
_LOWER_A_BEFORE_VOWEL = re.compile(r"\ba (?=[aeiouAEIOU])")
_UPPER_A_BEFORE_VOWEL = re.compile(r"\bA (?=[aeiouAEIOU])")

# --------------------------------------------------------------------------------------------
# Sentence templates. Fixed runs stay short (at most four words between slots) so repeated
# templates do not create duplicated 5-grams that would trip Gopher-style repetition filters.
# --------------------------------------------------------------------------------------------

ENGLISH_TEMPLATES = (
    "the {adj} {noun} of the {noun} is {adv} {adj}.",
    "{name} said that the {noun} would {verb} the {noun} by {month}.",
    "it is not {adj} to {verb} a {noun} without the {noun}.",
    "why would anyone {verb} the {noun} when the {noun} is so {adj}?",
    "we have to {verb} the {noun} and {verb} with the {adj} {noun}.",
    "according to {name}, the {noun} in {city} has been {adj} for {num} years.",
    "this is a {adj} {noun} that can {verb} any {noun}!",
    "you should {adv} {verb} your {noun} before you {verb} the {noun}.",
    "there was a {adj} {noun} at the {noun} in {city} last {weekday}.",
    "if the {noun} is {adj}, then we will {verb} it with a {noun}.",
    "most {noun} experts in {city} {adv} agree with this {noun}.",
    "what does the {noun} of a {adj} {noun} have to do with {noun}?",
    "{name} and {name} {adv} {verb} the {noun} together.",
    "the {noun} was {adj}, but the {noun} was even more {adj}.",
    "for {num} years, the {noun} has been part of the local {noun}.",
    "do not {verb} the {noun} unless you know how to {verb} it.",
    "she told us that her {noun} is {adj} and {adj}.",
    "he wanted to {verb} the {noun}, so he asked {name} for help.",
    "in {city}, a {adj} {noun} can be found near every {noun}.",
    "that is why the {noun} needs a {adj} {noun} and a {adj} {noun}.",
    "our {noun} will {verb} the {adj} {noun} next {month}.",
    "they {adv} {verb} with the {noun} because it is {adj}.",
    "a report from {company} shows that {num} percent of {noun} users {verb} it.",
    "how can a {noun} {verb} without any {noun} at all?",
    "nobody expected the {noun} to be this {adj}!",
    "every {noun} has a {adj} {noun}, and ours is no exception.",
    "when the {noun} arrived, {name} decided to {verb} the {noun}.",
    "some people {verb} their {noun} with a {adj} {noun} every {weekday}.",
    "by {month}, the {adj} {noun} of {city} should be ready to {verb}.",
    "i think the {noun} is {adv} more {adj} than the {noun}.",
)

ENGLISH_TITLES = (
    "how to {verb} the {adj} {noun}",
    "why the {noun} of {city} is so {adj}",
    "{num} {adj} ideas for your {noun}",
    "what {name} learned about the {noun}",
    "the {adj} {noun} and the future of {noun}",
    "a {adj} guide to the {noun} in {city}",
    "inside the {adj} world of {noun}",
    "is the {noun} really {adj}",
)

ENGLISH_HEADINGS = (
    "the {adj} {noun}",
    "what about the {noun}",
    "a {adj} approach to {noun}",
    "the role of {noun}",
    "looking ahead to {month}",
)

FOREIGN_TEMPLATES: dict[str, tuple[str, ...]] = {
    "de": (
        "die {w} ist nicht so {w} wie der {w}.",
        "wir haben mit {name} über die {w} gesprochen.",
        "es gibt in {city} keinen {w}, der so {w} ist.",
        "nach dem {w} wurde die {w} auch {w}.",
        "ich glaube, dass die {w} noch {w} ist.",
        "warum ist der {w} für die {w} so wichtig?",
        "das ist ein {w} und eine {w} für alle.",
        "sie sagte, dass ihr {w} sehr {w} sei.",
        "im {w} gibt es viele {w} und {w}!",
        "auch wenn der {w} schon {w} ist, bleibt die {w} {w}.",
        "{name} hat gestern die {w} mit einem {w} verglichen.",
        "man kann nicht jeden {w} mit der {w} erklären.",
    ),
    "fr": (
        "le {w} de la {w} est très {w}.",
        "avec {name}, nous parlons de {w}.",
        "il faut que {w} soit plus {w} que le {w}.",
        "pourquoi le {w} est-il si {w} pour les {w} ?",
        "c'est {w} qui ne {w} pas le {w}.",
        "à {city}, les {w} sont {w}.",
        "elle pense que {w} était {w}.",
        "sans {w}, on ne {w} pas.",
        "les {w} et les {w} sont aussi dans le {w}.",
        "mais le {w} n'est pas {w} !",
        "il y a {w} qui {w} avec le {w}.",
    ),
    "es": (
        "el {w} de la {w} es muy {w}.",
        "hemos hablado con {name} sobre esta {w}.",
        "es necesario que la {w} sea más {w} que el {w}.",
        "¿por qué el {w} es tan {w} para los {w}?",
        "es una {w} que no {w} el {w}.",
        "en la ciudad de {city}, los {w} son {w}.",
        "ella dijo que su {w} era {w}.",
        "no se puede {w} sin una {w}.",
        "los {w} y las {w} también están en el {w}.",
        "¡pero el {w} todavía no es {w}!",
        "hay muchos {w} que {w} con el {w}.",
    ),
    "it": (
        "il {w} della {w} è molto {w}.",
        "abbiamo parlato con {name} di questa {w}.",
        "bisogna che la {w} sia più {w} del {w}.",
        "perché il {w} è così {w} per gli {w}?",
        "è una {w} che non {w} il {w}.",
        "nella città di {city}, gli {w} sono {w}.",
        "lei dice che il {w} era {w}.",
        "non si può {w} senza una {w}.",
        "i {w} e le {w} sono anche nel {w}.",
        "ma il {w} non è ancora {w}!",
        "ci sono molti {w} che {w} con il {w}.",
    ),
    "ru": (
        "это {w}, который не {w} в {w}.",
        "мы говорили с {name} о том, что {w} очень {w}.",
        "в городе {city} все {w} и {w} были {w}.",
        "почему {w} так {w} для {w}?",
        "она сказала, что её {w} уже {w}.",
        "но это не {w}, а {w}!",
        "если {w} будет {w}, то и {w} тоже.",
        "он всегда {w} с {w} и {w}.",
        "когда мы {w} в {w}, {w} был {w}.",
        "там есть много {w}, которые {w} на {w}.",
        "никто не знал, как {w} этот {w}.",
    ),
    "nl": (
        "de {w} van het {w} is niet zo {w}.",
        "we hebben met {name} over de {w} gesproken.",
        "het is een {w} die ook {w} is.",
        "waarom is de {w} zo {w} voor het {w}?",
        "ze zei dat haar {w} heel {w} was.",
        "in {city} zijn er veel {w} en {w}.",
        "maar de {w} is nog niet {w}!",
        "als het {w} {w} wordt, dan zal de {w} ook {w} zijn.",
        "hij heeft de {w} met een {w} vergeleken.",
        "er zijn geen {w} die zonder {w} kunnen.",
        "dat is waarom wij het {w} niet {w}.",
    ),
    "pl": (
        "to jest {w}, który nie {w} w {w}.",
        "rozmawialiśmy z {name} o tym, że {w} jest bardzo {w}.",
        "w mieście {city} wszystkie {w} były {w}.",
        "dlaczego {w} jest tak {w} dla {w}?",
        "powiedziała, że jej {w} jest już {w}.",
        "ale to nie {w}, tylko {w}!",
        "jeśli {w} będzie {w}, to {w} też.",
        "on zawsze {w} z {w} i {w}.",
        "kiedy byliśmy w {w}, {w} był {w}.",
        "jest tam wiele {w}, które {w} na {w}.",
        "nikt nie wiedział, jak {w} ten {w}.",
    ),
    "zh": (
        "我们的{w}是非常{w}的。",
        "他们在{city}的{w}中找到了很多{w}。",
        "这个{w}没有{w}，但是{w}可以{w}。",
        "为什么{w}对于{w}这么重要？",
        "{name}说，这个{w}已经{w}了。",
        "如果{w}不{w}，我们就不能{w}。",
        "因为{w}的问题，所以{w}还没有{w}。",
        "这是一个关于{w}和{w}的{w}。",
        "我们都认为{w}比{w}更{w}！",
        "在过去的几年里，{w}一直在{w}。",
    ),
    "ja": (
        "{w}は{w}の{w}です。",
        "私たちは{city}で{w}を{w}しました。",
        "この{w}はとても{w}ですが、{w}もあります。",
        "なぜ{w}は{w}にとって大切なのでしょうか？",
        "{name}さんは、{w}について話しました。",
        "もし{w}がなければ、{w}はできません。",
        "{w}と{w}の関係について考えてみましょう。",
        "それは{w}ではなく、{w}のためのものです。",
        "昨日、{w}で{w}を見ました！",
        "今年も{w}の{w}が行われる予定です。",
    ),
}

SECTIONS = (
    "world", "politics", "business", "technology", "science", "health",
    "sports", "culture", "travel", "opinion", "food", "lifestyle",
)  # fmt: skip
SITE_PREFIXES = ("news", "daily", "blog", "journal", "times", "herald", "review", "weekly")
FOREIGN_SITE_PREFIXES = {
    "de": "zeitung", "fr": "journal-fr", "es": "noticias", "it": "notizie", "ru": "novosti",
    "nl": "nieuws", "pl": "wiadomosci", "zh": "xinwen", "ja": "nyuusu",
}  # fmt: skip
SPAM_SITE_PREFIXES = ("best-deals", "cheap", "top-offers", "free-prizes", "win-big")
SERVERS = (
    "nginx/1.24.0",
    "Apache/2.4.58 (Ubuntu)",
    "cloudflare",
    "openresty",
    "Microsoft-IIS/10.0",
)
SYMBOL_TOKENS = ("#win", "#free", "$$$", ">>>", "!!!", "***", "🔥🔥", "💰", "%%", "@@", "+++", "🎁")
PARKED_MESSAGES = (
    "Coming soon!",
    "This domain is parked. Our new website is coming soon.",
    "This domain may be for sale. Contact the owner for details.",
    "Site under construction. Please check back later.",
)


# --------------------------------------------------------------------------------------------
# Prose
# --------------------------------------------------------------------------------------------


def _capitalize(text: str) -> str:
    # Skip leading punctuation such as Spanish "¿" / "¡".
    for index, char in enumerate(text):
        if char.isalpha():
            return text[:index] + char.upper() + text[index + 1 :]
    return text


class Prose:
    """Fills sentence templates with words drawn from per-slot vocabularies."""

    def __init__(
        self,
        rng: random.Random,
        templates: Sequence[str],
        vocab: dict[str, Sequence[str]],
        *,
        spaced: bool = True,
        polish: Callable[[str], str] | None = None,
    ) -> None:
        self._rng = rng
        self._polish = polish
        self._vocab = {slot: tuple(words) for slot, words in vocab.items()}
        self._compiled: dict[str, tuple[str, tuple[tuple[str, ...], ...]]] = {}
        # Slots at the start hold names and places, which are capitalized already.
        self._sentences = [
            self._compile(template if template.startswith("{") else _capitalize(template))
            for template in templates
        ]
        self.separator = " " if spaced else ""

    def fill(self, template: str) -> str:
        """``template`` with every ``{slot}`` replaced by a random word of that slot."""
        return self._fill(self._compiled.get(template) or self._compile(template))

    def sentence(self) -> str:
        sentence = self._fill(self._rng.choice(self._sentences))
        return self._polish(sentence) if self._polish else sentence

    def paragraph(self, sentences: int) -> str:
        choice = self._rng.choice
        text = self.separator.join(self._fill(choice(self._sentences)) for _ in range(sentences))
        return self._polish(text) if self._polish else text

    def word(self, slot: str = "noun") -> str:
        return self._rng.choice(self._vocab[slot])

    def _fill(self, compiled: tuple[str, tuple[tuple[str, ...], ...]]) -> str:
        pattern, slots = compiled
        rand = self._rng.random
        # Indexing with random() is several times faster than rng.choice in this hot loop.
        return pattern.format(*[words[int(rand() * len(words))] for words in slots])

    def _compile(self, template: str) -> tuple[str, tuple[tuple[str, ...], ...]]:
        slots = tuple(self._vocab[name] for name in _SLOT.findall(template))
        compiled = _SLOT.sub("{}", template), slots
        self._compiled[template] = compiled
        return compiled


def english_prose(rng: random.Random, fake: Faker) -> Prose:
    vocab = {
        pos: fake.get_words_list(part_of_speech=pos)
        for pos in ("noun", "verb", "adjective", "adverb")
    }
    vocab["adj"] = vocab.pop("adjective")
    vocab["adv"] = vocab.pop("adverb")
    vocab |= {
        "name": [fake.name() for _ in range(300)],
        "city": [fake.city() for _ in range(100)],
        "company": [fake.company() for _ in range(60)],
        "num": [str(number) for number in range(2, 100)],
        "month": list(calendar.month_name)[1:],
        "weekday": list(calendar.day_name),
    }
    return Prose(rng, ENGLISH_TEMPLATES, vocab, polish=_english_articles)


def _english_articles(sentence: str) -> str:
    """Use "an" before a vowel, so slot filling does not produce "a active wave"."""
    return _UPPER_A_BEFORE_VOWEL.sub("An ", _LOWER_A_BEFORE_VOWEL.sub("an ", sentence))


def foreign_prose(rng: random.Random, language: str, fake: Faker) -> Prose:
    # Faker's it_IT city() picks from a list built from a set, so it varies with
    # PYTHONHASHSEED; its province names are a fixed tuple.
    place = fake.state if language == "it" else fake.city
    vocab = {
        "w": fake.get_words_list(),
        "name": [fake.name() for _ in range(150)],
        "city": [place() for _ in range(40)],
    }
    spaced = language not in UNSPACED_LANGUAGES
    return Prose(rng, FOREIGN_TEMPLATES[language], vocab, spaced=spaced)


def _seeded_faker(locale: str, seed: int) -> Faker:
    fake = Faker(locale)
    fake.seed_instance(seed)
    return fake


@dataclass(frozen=True)
class Article:
    """An article body: a title plus ``("p"|"h2", text)`` and ``("ul", items)`` blocks."""

    title: str
    blocks: tuple[tuple[str, str | tuple[str, ...]], ...]

    def lines(self) -> list[str]:
        lines = [self.title]
        for tag, content in self.blocks:
            lines.extend(content if tag == "ul" else [content])
        return lines

    @property
    def text(self) -> str:
        """The article as plain text, one line per heading, paragraph or list item."""
        return "\n".join(self.lines())

    def html(self) -> str:
        parts = ['<article class="post">', f"<h1>{_esc(self.title)}</h1>"]
        for tag, content in self.blocks:
            if tag == "ul":
                parts += ["<ul>", *(f"<li>{_esc(item)}</li>" for item in content), "</ul>"]
            else:
                parts.append(f"<{tag}>{_esc(content)}</{tag}>")
        parts.append("</article>")
        return "\n".join(parts)

    def summary(self, limit: int = 150) -> str:
        first = next((c for tag, c in self.blocks if tag == "p"), self.title)
        return first if len(first) <= limit else first[:limit].rsplit(" ", 1)[0] + "…"


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _unique_line(make: Callable[[], str], seen: set[str]) -> str:
    """A line from ``make`` that the article does not contain yet: no duplicate lines."""
    while (line := make()) in seen:
        pass
    seen.add(line)
    return line


def english_article(prose: Prose, rng: random.Random) -> Article:
    """150-900 words of paragraphs, with the occasional subheading and bullet list."""
    target_words = rng.randint(150, 900)
    title = _capitalize(prose.fill(rng.choice(ENGLISH_TITLES)))
    seen = {title}

    def heading() -> str:
        return _capitalize(prose.fill(rng.choice(ENGLISH_HEADINGS)))

    def paragraph() -> str:
        return prose.paragraph(rng.randint(3, 7))

    blocks: list[tuple[str, str | tuple[str, ...]]] = []
    words = 0
    while words < target_words:
        if len(blocks) >= 2 and blocks[-1][0] == "p" and rng.random() < 0.15:
            blocks.append(("h2", _unique_line(heading, seen)))
        if blocks and rng.random() < 0.08:
            items = tuple(_unique_line(prose.sentence, seen) for _ in range(rng.randint(3, 5)))
            blocks.append(("ul", items))
            words += sum(len(item.split()) for item in items)
        text = _unique_line(paragraph, seen)
        blocks.append(("p", text))
        words += len(text.split())
    return Article(title, tuple(blocks))


def foreign_article(prose: Prose, rng: random.Random) -> Article:
    """Paragraphs of roughly 150-900 words' worth of sentences (zh/ja: same sentence count)."""
    title = prose.sentence().rstrip(".!?。！？ ")
    if prose.separator:
        title = " ".join(title.split()[:10])
    seen = {title}
    sentences = rng.randint(150, 900) // 11
    paragraphs: list[str] = []
    while sentences > 0:
        count = min(sentences, rng.randint(3, 7))
        paragraphs.append(_unique_line(lambda count=count: prose.paragraph(count), seen))
        sentences -= count
    return Article(title, tuple(("p", paragraph) for paragraph in paragraphs))


def sample_articles(language: str, count: int, seed: int = 0) -> list[str]:
    """Article texts (before HTML wrapping) as the generator writes them for ``language``."""
    rng = random.Random(seed)
    if language == "en":
        prose = english_prose(rng, _seeded_faker("en_US", seed))
        return [english_article(prose, rng).text for _ in range(count)]
    prose = foreign_prose(rng, language, _seeded_faker(FOREIGN_LOCALES[language], seed))
    return [foreign_article(prose, rng).text for _ in range(count)]


# --------------------------------------------------------------------------------------------
# Near duplicates
# --------------------------------------------------------------------------------------------


def word_shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    """Sets of ``n`` consecutive words of lowercased, punctuation-stripped text."""
    words = _NON_WORD.sub("", text.lower()).split()
    return {tuple(words[i : i + n]) for i in range(max(1, len(words) - n + 1))}


def shingle_jaccard(first: str, second: str, n: int = 5) -> float:
    a, b = word_shingles(first, n), word_shingles(second, n)
    return len(a & b) / len(a | b) if a or b else 1.0


class _WordEditor:
    """Changes, inserts or deletes one word every ``gaps`` words (a gap drawn per edit)."""

    def __init__(self, rng: random.Random, replacement: Callable[[], str], gaps: range) -> None:
        self._rng = rng
        self._replacement = replacement
        self._gaps = gaps
        # A random phase: the first edit comes within one gap, so every text gets edited.
        self._countdown = rng.randint(1, rng.choice(gaps))

    def __call__(self, text: str) -> str:
        out: list[str] = []
        for word in text.split(" "):
            self._countdown -= 1
            # Only edit plain words so sentence punctuation and capitals stay intact.
            if self._countdown > 0 or not (word.isalpha() and word.islower()):
                out.append(word)
                continue
            self._countdown = self._rng.choice(self._gaps)
            operation = self._rng.choice(("change", "insert", "delete"))
            if operation == "change":
                out.append(self._replacement())
            elif operation == "insert":
                out += [word, self._replacement()]
        return " ".join(out)


def near_duplicate(article: Article, prose: Prose, rng: random.Random) -> tuple[Article, float]:
    """An edited copy of ``article`` and its shingle Jaccard similarity to the original.

    Edits land every 60-100 words; in the rare case that leaves the copy below the similarity
    floor, the edit is redone with wider gaps.
    """
    gaps = range(60, 101)
    while True:
        edit = _WordEditor(rng, prose.word, gaps)
        blocks = tuple(
            (tag, tuple(edit(item) for item in content) if tag == "ul" else edit(content))
            for tag, content in article.blocks
        )
        copy = Article(article.title, blocks)
        similarity = shingle_jaccard(article.text, copy.text)
        if similarity >= MIN_NEAR_DUP_JACCARD and copy.text != article.text:
            return copy, round(similarity, 4)
        gaps = range(gaps.start + 20, gaps.stop + 20)


# --------------------------------------------------------------------------------------------
# Sites and HTML
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    host: str
    name: str
    url_style: str
    sections: tuple[str, ...]
    server: str
    header_html: str
    sidebar_html: str
    footer_html: str


def _slugify(text: str, max_words: int = 6) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.sub(r"[^a-z0-9 ]", "", ascii_text.lower()).split()
    return "-".join(words[:max_words]) or "article"


def _header_html(name: str, sections: Sequence[str]) -> str:
    links = [f'<li><a href="/{section}/">{section.title()}</a></li>' for section in sections]
    links += ['<li><a href="/about/">About</a></li>', '<li><a href="/contact/">Contact</a></li>']
    return "\n".join(
        [
            '<header class="site-header">',
            f'<div class="brand"><a href="/">{_esc(name)}</a></div>',
            '<nav class="main-nav"><ul>',
            *links,
            "</ul></nav>",
            "</header>",
        ]
    )


def _sidebar_html(name: str, popular: Sequence[str]) -> str:
    items = [f'<li><a href="/{_slugify(title)}/">{_esc(title)}</a></li>' for title in popular]
    return "\n".join(
        [
            '<aside class="sidebar">',
            '<section class="popular"><h3>Most popular</h3><ol>',
            *items,
            "</ol></section>",
            '<section class="newsletter"><h3>Newsletter</h3>',
            f"<p>Get the best stories from {_esc(name)} in your inbox every morning.</p>",
            '<form action="/subscribe" method="post"><input type="email" name="email" '
            'placeholder="Email address"><button type="submit">Subscribe</button></form>',
            "</section>",
            "</aside>",
        ]
    )


def _footer_html(company: str, year: int) -> str:
    return "\n".join(
        [
            '<footer class="site-footer">',
            f"<p>&copy; {year} {_esc(company)}. All rights reserved.</p>",
            '<ul class="legal"><li><a href="/privacy/">Privacy Policy</a></li>'
            '<li><a href="/cookies/">Cookie Policy</a></li>'
            '<li><a href="/terms/">Terms of Use</a></li></ul>',
            '<p class="cookie-notice">This website uses cookies to improve your experience. '
            "By continuing to browse, you agree to our use of cookies.</p>",
            "</footer>",
        ]
    )


def render_page(
    site: Site,
    article: Article,
    *,
    url: str,
    charset: str,
    language: str,
    byline: str,
) -> str:
    """A full HTML5 document: site header and nav, the article, sidebar and footer."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            f'<html lang="{language}">',
            "<head>",
            f'<meta charset="{charset}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_esc(article.title)} | {_esc(site.name)}</title>",
            f'<meta name="description" content="{html.escape(article.summary())}">',
            f'<link rel="canonical" href="{html.escape(url)}">',
            '<link rel="stylesheet" href="/static/css/main.css">',
            '<script src="/static/js/site.js" defer></script>',
            "</head>",
            "<body>",
            site.header_html,
            '<main class="content">',
            f'<div class="article-meta">{byline}</div>',
            article.html(),
            site.sidebar_html,
            "</main>",
            site.footer_html,
            "</body>",
            "</html>",
            "",
        ]
    )


# --------------------------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------------------------


@dataclass
class Page:
    url: str
    kind: str
    body: bytes
    content_type: str
    server: str
    language: str | None = None
    charset: str | None = None
    group: str | None = None
    jaccard: float | None = None


@dataclass(frozen=True)
class _Original:
    url: str
    article: Article
    site: Site


@dataclass
class PageFactory:
    """Builds one page of a requested kind; remembers good pages as sources for duplicates."""

    rng: random.Random
    english: Prose
    foreign: dict[str, Prose]
    sites: list[Site]
    spam_sites: list[Site]
    foreign_sites: dict[str, Site]
    year: int
    month: int
    originals: list[_Original] = field(default_factory=list)
    used_urls: set[str] = field(default_factory=set)
    foreign_pages: Counter[str] = field(default_factory=Counter)

    def build(self, kind: str) -> Page:
        if kind in (EXACT_DUP, NEAR_DUP) and not self.originals:
            kind = GOOD  # nothing to copy yet (only possible in tiny crawls)
        family, _, subtype = kind.partition(":")
        builders = {
            GOOD: self._good,
            EXACT_DUP: self._exact_dup,
            NEAR_DUP: self._near_dup,
            NON_HTML: self._non_html,
            "foreign": self._foreign,
            "spam": self._spam,
            "broken": self._broken,
        }
        return builders[family](subtype) if subtype else builders[family]()

    # -- regular pages ------------------------------------------------------------------------

    def _good(self) -> Page:
        site = self.rng.choice(self.sites)
        article = english_article(self.english, self.rng)
        page = self._html_page(site, article, GOOD)
        self.originals.append(_Original(page.url, article, site))
        return page

    def _exact_dup(self) -> Page:
        source = self.rng.choice(self.originals)
        page = self._html_page(self._site_for_copy(source), source.article, EXACT_DUP)
        page.group = source.url
        return page

    def _near_dup(self) -> Page:
        source = self.rng.choice(self.originals)
        article, similarity = near_duplicate(source.article, self.english, self.rng)
        page = self._html_page(self._site_for_copy(source), article, NEAR_DUP)
        page.group, page.jaccard = source.url, similarity
        return page

    def _site_for_copy(self, source: _Original) -> Site:
        return source.site if self.rng.random() < 0.4 else self.rng.choice(self.sites)

    def _foreign(
        self,
        language: str,
        kind: str | None = None,
        charset: str | None = None,
        declared_charset: str | None = None,
    ) -> Page:
        article = foreign_article(self.foreign[language], self.rng)
        if charset is None:
            # Alternate legacy and UTF-8 so even a small crawl has both for de, fr and ru.
            self.foreign_pages[language] += 1
            alternate = self.foreign_pages[language] % 2 == 1
            charset = LEGACY_CHARSETS.get(language, "utf-8") if alternate else "utf-8"
        site = self.foreign_sites[language]
        kind = kind or FOREIGN_PREFIX + language
        return self._html_page(
            site,
            article,
            kind,
            language=language,
            charset=charset,
            declared_charset=declared_charset,
        )

    def _html_page(
        self,
        site: Site,
        article: Article,
        kind: str,
        *,
        language: str = "en",
        charset: str = "utf-8",
        declared_charset: str | None = None,
    ) -> Page:
        declared = declared_charset or charset
        url = self._new_url(site, article.title)
        document = render_page(
            site, article, url=url, charset=declared, language=language, byline=self._byline()
        )
        return Page(
            url=url,
            kind=kind,
            # Characters outside a legacy charset become numeric references, as servers do.
            body=document.encode(charset, errors="xmlcharrefreplace"),
            content_type=f"text/html; charset={declared}",
            server=site.server,
            language=language,
            charset=charset,
        )

    def _byline(self) -> str:
        author = self.english.word("name")
        published = datetime(self.year, self.month, 1) - timedelta(days=self.rng.randrange(400))
        return (
            f'<span class="author">By {_esc(author)}</span> '
            f'<time datetime="{published:%Y-%m-%d}">{published:%B} {published.day}, '
            f"{published.year}</time>"
        )

    def _new_url(self, site: Site, title: str, suffix: str = "") -> str:
        while True:
            page_id = self.rng.randrange(10_000, 1_000_000)
            section = self.rng.choice(site.sections)
            slug = _slugify(title)
            if suffix:
                url = f"https://{site.host}/files/{slug}-{page_id}{suffix}"
            elif site.url_style == "dated":
                url = (
                    f"https://{site.host}/{section}/{self.year}/{self.month:02d}/{slug}-{page_id}/"
                )
            elif site.url_style == "slug":
                url = f"https://{site.host}/{section}/{slug}-{page_id}.html"
            else:
                url = f"https://{site.host}/index.php?p={page_id}"
            if url not in self.used_urls:
                self.used_urls.add(url)
                return url

    # -- non-HTML -----------------------------------------------------------------------------

    def _non_html(self) -> Page:
        site = self.rng.choice(self.sites)
        title = self.english.fill(self.rng.choice(ENGLISH_TITLES))
        variant = self.rng.choice(("pdf", "png", "json"))
        if variant == "pdf":
            body, content_type, charset = self._fake_pdf(title), "application/pdf", None
        elif variant == "png":
            body = b"\x89PNG\r\n\x1a\n" + self.rng.randbytes(self.rng.randint(200, 2000))
            content_type, charset = "image/png", None
        else:
            body = self._fake_json(title)
            content_type, charset = "application/json", "utf-8"
        url = self._new_url(site, title, suffix="." + variant)
        return Page(url, NON_HTML, body, content_type, site.server, None, charset)

    def _fake_pdf(self, title: str) -> bytes:
        text = title.replace("(", "").replace(")", "")
        return (
            "%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
            "1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
            "2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n"
            "3 0 obj\n<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>\nendobj\n"
            f"4 0 obj\n<< /Length {len(text) + 24} >>\nstream\nBT /F1 12 Tf ({text}) Tj ET\n"
            "endstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
        ).encode("latin-1", "replace")

    def _fake_json(self, title: str) -> bytes:
        items = [
            {"id": self.rng.randrange(1, 10**6), "name": self.english.word("name")}
            for _ in range(self.rng.randint(2, 6))
        ]
        return json.dumps({"title": title, "items": items}, ensure_ascii=False).encode("utf-8")

    # -- spam -----------------------------------------------------------------------------------

    def _spam(self, spam_type: str) -> Page:
        site = self.rng.choice(self.spam_sites)
        kind = "spam:" + spam_type
        if spam_type == "too_short":
            return self._parked_page(site, kind)
        title, blocks = {
            "keyword_stuffing": self._keyword_stuffing,
            "lorem_ipsum": self._lorem_ipsum,
            "symbols": self._symbol_soup,
            "link_list": self._link_list,
        }[spam_type]()
        page = self._html_page(site, Article(title, blocks), kind)
        page.language = {"lorem_ipsum": "la", "symbols": None}.get(spam_type, "en")
        return page

    def _keyword_stuffing(self) -> tuple[str, tuple]:
        word, city = self.english.word, self.english.word("city")
        promos = [
            f"Buy cheap {word()} online now best {word()} price guaranteed!",
            f"Best {word()} deals in {city} free shipping today only!",
            f"Click here for cheap {word()} and {word()} discount codes!",
            f"Top rated {word()} store lowest prices on every {word()}!",
        ][: self.rng.randint(3, 4)]
        repeats = self.rng.randint(30, 45)
        return f"Cheap {word()} deals", tuple(("p", line) for line in promos * repeats)

    def _lorem_ipsum(self) -> tuple[str, tuple]:
        words = LatinLorem.word_list

        def sentence() -> str:
            return _capitalize(" ".join(self.rng.choices(words, k=self.rng.randint(6, 14)))) + "."

        paragraphs = [" ".join(sentence() for _ in range(5)) for _ in range(self.rng.randint(4, 9))]
        paragraphs[0] = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " + paragraphs[0]
        return "Lorem ipsum dolor sit amet", tuple(("p", text) for text in paragraphs)

    def _symbol_soup(self) -> tuple[str, tuple]:
        def line() -> str:
            tokens = self.rng.choices(SYMBOL_TOKENS, k=self.rng.randint(8, 16))
            tokens += ["#" + self.english.word() for _ in range(self.rng.randint(3, 6))]
            self.rng.shuffle(tokens)
            return " ".join(tokens)

        lines = tuple(("p", line()) for _ in range(self.rng.randint(10, 20)))
        return "#win #free $$$ >>> 🔥", lines

    def _link_list(self) -> tuple[str, tuple]:
        word = self.english.word
        links = tuple(
            f"{word()} {word()} {word('city').lower()}" for _ in range(self.rng.randint(200, 400))
        )
        return "Top searches", (("ul", links),)

    def _parked_page(self, site: Site, kind: str) -> Page:
        message = self.rng.choice(PARKED_MESSAGES)
        url = self._new_url(site, "index")
        document = (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<title>{site.host}</title>\n</head>\n<body>\n<div class="parked">\n'
            f"<h1>{site.host}</h1>\n<p>{message}</p>\n</div>\n</body>\n</html>\n"
        )
        content_type = "text/html; charset=utf-8"
        return Page(url, kind, document.encode(), content_type, site.server, "en", "utf-8")

    # -- broken -------------------------------------------------------------------------------

    def _broken(self, broken_type: str) -> Page:
        kind = "broken:" + broken_type
        if broken_type == "mislabeled_charset":
            language = self.rng.choice(sorted(LEGACY_CHARSETS))
            legacy = LEGACY_CHARSETS[language]
            return self._foreign(language, kind, charset=legacy, declared_charset="utf-8")
        site = self.rng.choice(self.sites)
        if broken_type in ("truncated_record", "corrupt_gzip"):
            return self._html_page(site, english_article(self.english, self.rng), kind)
        url = self._new_url(site, self.english.fill(self.rng.choice(ENGLISH_TITLES)))
        if broken_type == "empty_body":
            return Page(url, kind, b"", "text/html; charset=utf-8", site.server, None, "utf-8")
        body = self.rng.randbytes(self.rng.randint(2000, 8000))  # binary_as_html
        return Page(url, kind, body, "text/html", site.server)


# --------------------------------------------------------------------------------------------
# Sites
# --------------------------------------------------------------------------------------------


def build_sites(
    rng: random.Random,
    fake: Faker,
    prose: Prose,
    prefixes: Sequence[str],
    count: int,
    *,
    year: int,
    taken: set[str],
) -> list[Site]:
    sites = []
    while len(sites) < count:
        prefix = prefixes[len(sites) % len(prefixes)]
        word = _slugify(prose.word("noun"), 1)
        host = f"{prefix}-{word}.example.com"
        if host in taken:
            continue
        taken.add(host)
        name = f"{word.title()} {prefix.split('-')[0].title()}"
        sections = tuple(rng.sample(SECTIONS, rng.randint(5, 7)))
        popular = [_capitalize(prose.fill(rng.choice(ENGLISH_TITLES))) for _ in range(5)]
        sites.append(
            Site(
                host=host,
                name=name,
                url_style=rng.choice(("dated", "slug", "query")),
                sections=sections,
                server=rng.choice(SERVERS),
                header_html=_header_html(name, sections),
                sidebar_html=_sidebar_html(name, popular),
                footer_html=_footer_html(fake.company(), year),
            )
        )
    return sites


# --------------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------------


def _spread(prefix: str, subtypes: Sequence[str], count: int) -> list[str]:
    return [prefix + subtypes[index % len(subtypes)] for index in range(count)]


def _regular_kinds(total: int) -> list[str]:
    counts = {name: round(share * total) for name, share in KIND_SHARES.items()}
    kinds = _spread(FOREIGN_PREFIX, tuple(FOREIGN_LOCALES), counts.pop("foreign"))
    kinds += _spread("spam:", SPAM_TYPES, counts.pop("spam"))
    for name, count in counts.items():
        kinds += [name] * count
    return kinds + [GOOD] * (total - len(kinds))


def _broken_kinds(total: int, files: int) -> list[str]:
    """Broken kinds, truncated records first (at most one per file, as each ends its file)."""
    count = min(max(len(BROKEN_TYPES), round(BROKEN_SHARE * total)), total // 10)
    truncated = min(files, max(1, count // len(BROKEN_TYPES)), count)
    return [TRUNCATED] * truncated + _spread("broken:", BROKEN_TYPES[1:], count - truncated)


def _move_good_before_dups(kinds: list[str]) -> None:
    """Swap so that every duplicate has at least one good page before it."""
    for index, kind in enumerate(kinds):
        if kind == GOOD:
            return
        if kind in (EXACT_DUP, NEAR_DUP):
            first_good = kinds.index(GOOD, index)
            kinds[index], kinds[first_good] = GOOD, kind
            return


def plan_kinds(rng: random.Random, files: int, pages_per_file: int) -> list[list[str]]:
    """The kind of every page, per file. Broken pages are spread round-robin over files."""
    total = files * pages_per_file
    broken = _broken_kinds(total, files)
    regular = _regular_kinds(total - len(broken))
    rng.shuffle(regular)
    _move_good_before_dups(regular)
    plan, cursor = [], 0
    for file_index in range(files):
        extra = broken[file_index::files]
        take = pages_per_file - len(extra)
        kinds = regular[cursor : cursor + take]
        cursor += take
        for kind in extra:
            if kind != TRUNCATED:  # never last, so a corrupt member is always followed by more
                kinds.insert(rng.randrange(len(kinds)), kind)
        kinds += [TRUNCATED] * extra.count(TRUNCATED)
        plan.append(kinds)
    return plan


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _crawl_month(crawl: str) -> tuple[int, int]:
    match = re.search(r"(\d{4})-(\d{2})$", crawl)
    if match and 1 <= int(match[2]) <= 12:
        return int(match[1]), int(match[2])
    return 2026, 1


def _capture_times(rng: random.Random, year: int, month: int, count: int) -> list[datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    seconds = calendar.monthrange(year, month)[1] * 86_400
    return [
        start + timedelta(seconds=s) for s in sorted(rng.randrange(seconds) for _ in range(count))
    ]


def _corrupt(member: bytes) -> bytes:
    """Flip a run of bytes mid-stream; the gzip header stays intact so it still looks like one."""
    middle = len(member) // 2
    damaged = bytes(byte ^ 0xFF for byte in member[middle : middle + 32])
    return member[:middle] + damaged + member[middle + 32 :]


def _write_page(
    writer: WarcWriter, page: Page, captured: datetime, record_id: str, request_id: str
) -> int:
    """Write the request/response pair for ``page``; returns the response member's offset."""
    date = captured.strftime("%Y-%m-%dT%H:%M:%SZ")
    writer.write_request(page.url, date=date, record_id=request_id, concurrent_to=record_id)
    response = {
        "content_type": page.content_type,
        "date": date,
        "record_id": record_id,
        "extra_http_headers": {
            "Date": format_datetime(captured, usegmt=True),
            "Server": page.server,
            "Connection": "close",
        },
    }
    if page.kind == CORRUPT:
        buffer = io.BytesIO()
        WarcWriter(buffer).write_response(page.url, page.body, **response)
        offset, _ = writer.write_raw(_corrupt(buffer.getvalue()))
    elif page.kind == TRUNCATED:
        offset, _ = writer.write_response(
            page.url, page.body, truncate_to=len(page.body) // 2, **response
        )
    else:
        offset, _ = writer.write_response(page.url, page.body, **response)
    return offset


def _truth_entry(page: Page, file_name: str, record_id: str, offset: int) -> dict:
    return {
        "url": page.url,
        "file": file_name,
        "record_id": record_id,
        "offset": offset,
        "kind": page.kind,
        "language": page.language,
        "group": page.group,
        "jaccard": page.jaccard,
        "charset": page.charset,
    }


def _page_factory(rng: random.Random, seed: int, year: int, month: int, total: int) -> PageFactory:
    english_fake = _seeded_faker("en_US", seed)
    english = english_prose(rng, english_fake)
    foreign = {
        language: foreign_prose(rng, language, _seeded_faker(locale, seed))
        for language, locale in FOREIGN_LOCALES.items()
    }
    hosts: set[str] = set()
    common = {"year": year, "taken": hosts}
    sites = build_sites(rng, english_fake, english, SITE_PREFIXES, max(6, total // 150), **common)
    spam_sites = build_sites(
        rng, english_fake, english, SPAM_SITE_PREFIXES, max(3, total // 500), **common
    )
    foreign_sites = {
        language: build_sites(rng, english_fake, english, [prefix], 1, **common)[0]
        for language, prefix in FOREIGN_SITE_PREFIXES.items()
    }
    return PageFactory(rng, english, foreign, sites, spam_sites, foreign_sites, year, month)


def generate_demo_crawl(
    warc_dir: Path,
    truth_path: Path,
    *,
    crawl: str = "CC-MAIN-DEMO-2026-01",
    files: int = 8,
    pages_per_file: int = 500,
    seed: int = 0,
) -> dict:
    """Write ``files`` WARC files of ``pages_per_file`` pages each plus the ground-truth JSON.

    Returns a summary: crawl, seed, file names, page count, per-kind counts and bytes written.
    """
    if files < 1 or pages_per_file < MIN_PAGES_PER_FILE:
        raise ValueError(f"need files >= 1 and pages_per_file >= {MIN_PAGES_PER_FILE}")
    warc_dir, truth_path = Path(warc_dir), Path(truth_path)
    warc_dir.mkdir(parents=True, exist_ok=True)
    truth_path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    year, month = _crawl_month(crawl)
    factory = _page_factory(rng, seed, year, month, files * pages_per_file)
    plan = plan_kinds(rng, files, pages_per_file)

    file_names, truth_pages, total_bytes = [], [], 0
    for file_index, kinds in enumerate(plan):
        file_name = f"{crawl}-{file_index:05d}.warc.gz"
        file_names.append(file_name)
        times = _capture_times(rng, year, month, len(kinds))
        with open(warc_dir / file_name, "wb") as stream:
            writer = WarcWriter(stream, id_seed=f"{crawl}/{seed}/{file_name}")
            writer.write_warcinfo(
                file_name,
                date=times[0].strftime("%Y-%m-%dT%H:%M:%SZ"),
                record_id=make_record_id(crawl, seed, file_name, "warcinfo"),
                fields=_warcinfo_fields(crawl),
            )
            for index, (kind, captured) in enumerate(zip(kinds, times, strict=True)):
                page = factory.build(kind)
                record_id = make_record_id(crawl, seed, file_name, index, "response")
                request_id = make_record_id(crawl, seed, file_name, index, "request")
                offset = _write_page(writer, page, captured, record_id, request_id)
                truth_pages.append(_truth_entry(page, file_name, record_id, offset))
            total_bytes += writer.offset

    truth = {"crawl": crawl, "seed": seed, "files": file_names, "pages": truth_pages}
    truth_path.write_text(json.dumps(truth, indent=1, ensure_ascii=False) + "\n", "utf-8")
    return {
        "crawl": crawl,
        "seed": seed,
        "files": file_names,
        "pages": len(truth_pages),
        "kinds": dict(sorted(Counter(page["kind"] for page in truth_pages).items())),
        "bytes": total_bytes,
    }


def _warcinfo_fields(crawl: str) -> dict[str, str]:
    return {
        "software": "tokenmill-demo/1.0",
        "format": "WARC File Format 1.1",
        "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/"
        "warc-1.1/",
        "isPartOf": crawl,
        # fixed text (not this module's path): part of the demo crawl's bytes, which never change
        "description": "Synthetic demo crawl generated by tokenmill.demo",
        "operator": "tokenmill",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate a deterministic demo web crawl.")
    parser.add_argument("--out", type=Path, default=Path("demo_crawl/warc"), help="WARC dir")
    parser.add_argument("--truth", type=Path, default=None, help="ground-truth JSON path")
    parser.add_argument("--crawl", default="CC-MAIN-DEMO-2026-01")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--pages-per-file", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    truth = args.truth or args.out.parent / "truth.json"
    summary = generate_demo_crawl(
        args.out,
        truth,
        crawl=args.crawl,
        files=args.files,
        pages_per_file=args.pages_per_file,
        seed=args.seed,
    )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
