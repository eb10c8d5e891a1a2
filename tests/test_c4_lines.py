"""C4's compiled line rules (`word_scan.c4_lines`, behind `C4QualityFilter.measure`) against the
regexes and group-bys they replaced (below, as they were), column for column."""

import random
import re

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from tokenmill.filters.c4 import (
    _NON_SENTENCE_PERIODS,
    _SENTENCE_BOUNDARY,
    CITATION_PATTERN,
    POLICY_SUBSTRINGS,
    C4QualityFilter,
)
from tokenmill.text.segmentation import (
    NEW_WORD_COUNTS,
    doc_index,
    explode,
    knows_words,
    split_lines,
)
from tokenmill.text.word_scan import count_words, word_counts_of, word_features_of

PHRASES = ("lorem ipsum", "javascript", *POLICY_SUBSTRINGS)


def _any_of(substrings) -> str:
    return "|".join(re.escape(s) for s in substrings)


def _lowered(lines: pl.Series) -> pl.Series:
    candidates = lines.str.contains("(?i)" + _any_of(PHRASES)).arg_true()
    lowered = pl.repeat("", len(lines), dtype=pl.String, eager=True)
    return lowered.scatter(candidates, lines.gather(candidates).str.to_lowercase())


def _has_long_word(flt: C4QualityFilter, lines: pl.Series) -> pl.Series:
    flags = pl.Series("has_long_word", np.zeros(len(lines), dtype=bool))
    if flt.max_word_length == -1:
        return flags
    candidates = (lines.str.len_chars() > flt.max_word_length).arg_true()
    if len(candidates):
        found = lines.gather(candidates).str.contains(rf"\S{{{flt.max_word_length + 1}}}")
        flags = flags.scatter(candidates, found)
    return flags


def _has_words(minimum: int) -> pl.Expr:
    if minimum <= 0:
        return pl.lit(True)
    return pl.col("line").str.contains(r"\S" + r"\S*\s+\S" * (minimum - 1))


def _line_flags(flt: C4QualityFilter) -> list[pl.Expr]:
    line, valid = pl.col("line"), pl.col("valid")
    if flt.filter_no_terminal_punct:
        valid &= line.str.contains(r"[.?!\"']$") & ~line.str.ends_with("...")
    lower = pl.col("lower")
    lorem = valid & lower.str.contains("lorem ipsum", literal=True) & flt.filter_lorem_ipsum
    javascript = lower.str.contains("javascript", literal=True) & flt.filter_javascript
    curly = valid & ~javascript & line.str.contains("{", literal=True) & flt.filter_curly_bracket
    policy = lower.str.contains(_any_of(POLICY_SUBSTRINGS)) & flt.filter_policy
    fatal = pl.when(lorem).then(pl.lit("lorem_ipsum")).when(curly).then(pl.lit("curly_bracket"))
    kept = valid & ~lorem & ~javascript & ~curly & ~policy
    return [kept.alias("kept"), fatal.alias("fatal")]


def _sentences(lines: pl.Expr) -> pl.Expr:
    without = lines.str.replace_all(_NON_SENTENCE_PERIODS, "$1")
    return without.str.count_matches(_SENTENCE_BOUNDARY) + 1


def _line_numbers(doc: np.ndarray, chosen: np.ndarray, n_docs: int) -> pl.Series:
    first = np.searchsorted(doc, np.arange(n_docs))
    numbers = (np.arange(len(doc)) - first[doc])[chosen].astype(np.uint32)
    offsets = np.zeros(n_docs + 1, dtype=np.int32)
    np.cumsum(np.bincount(doc[chosen], minlength=n_docs), out=offsets[1:])
    return pl.from_arrow(pa.ListArray.from_arrays(pa.array(offsets), pa.array(numbers)))


def _new_word_counts(docs: pl.DataFrame, lines: pl.DataFrame) -> pl.Series:
    removed = lines.filter(~pl.col("kept"))
    cited = lines.filter(pl.col("kept") & (pl.col("line") != pl.col("original")))
    removed_words = count_words(removed["original"]).cast(pl.Int64).to_numpy()
    cut = (count_words(cited["original"]).cast(pl.Int64) - count_words(cited["line"])).to_numpy()
    lost = np.bincount(removed["doc"].to_numpy(), removed_words, minlength=docs.height)
    lost += np.bincount(cited["doc"].to_numpy(), cut, minlength=docs.height)
    counts = word_counts_of(docs).cast(pl.Int64) - pl.Series(lost.astype(np.int64))
    unsplit = docs["text"].fill_null("").str.contains("[\x1c\x1d\x1e]")
    return pl.select(pl.when(unsplit).then(None).otherwise(counts)).to_series().cast(pl.UInt32)


def reference_measure(flt: C4QualityFilter, docs: pl.DataFrame, lowered=_lowered) -> pl.DataFrame:
    """C4QualityFilter.measure as the regexes and group-bys computed it."""
    text = docs["text"].fill_null("")
    lines = explode(split_lines(text))
    lines = pl.DataFrame({"doc": lines.doc, "line": lines.values.str.strip_chars()})
    counting = knows_words(docs)
    if counting:
        lines = lines.with_columns(original=pl.col("line"))
    lines = lines.with_columns(
        valid=~_has_long_word(flt, lines["line"]) & _has_words(flt.min_words_per_line)
    )
    if flt.remove_citations:
        lines = lines.with_columns(pl.col("line").str.replace_all(CITATION_PATTERN, ""))
    lines = lines.with_columns(lower=lowered(lines["line"]))
    lines = lines.with_columns(_line_flags(flt))
    kept = pl.col("line").filter("kept")
    per_doc = lines.group_by("doc", maintain_order=True).agg(
        new_text=kept.str.join("\n").str.strip_chars(),
        sentences=_sentences(kept).sum(),
        fatal=pl.col("fatal").drop_nulls().first(),
    )
    stats = pl.DataFrame([doc_index(len(text))]).join(per_doc, on="doc", how="left")
    stats = stats.sort("doc").select(
        pl.col("sentences").fill_null(0), "fatal", pl.col("new_text").fill_null("")
    )
    removed = _line_numbers(lines["doc"].to_numpy(), ~lines["kept"].to_numpy(), len(text))
    stats = stats.with_columns(removed.alias(flt.rewrite_signal))
    if counting:
        stats = stats.with_columns(_new_word_counts(docs, lines).alias(NEW_WORD_COUNTS))
    return stats


def assert_same_measure(flt: C4QualityFilter, texts: list[str | None]) -> None:
    for docs in (
        pl.DataFrame({"text": pl.Series(texts, dtype=pl.Utf8)}),
        pl.DataFrame({"text": pl.Series(texts, dtype=pl.Utf8)}).pipe(
            lambda d: d.with_columns(word_features_of(d))
        ),
    ):
        got, expected = flt.measure(docs), reference_measure(flt, docs)
        assert got.columns == expected.columns
        for name in expected.columns:
            pairs = zip(got[name].to_list(), expected[name].to_list(), strict=True)
            differing = [i for i, (g, e) in enumerate(pairs) if g != e]
            assert not differing, (name, [(texts[i], got[name][i]) for i in differing[:3]])


# Where the line rules turn: every line break, whitespace, citations, the phrases and their
# letters' look-alikes under case folding (Kelvin sign, long s, dotted I), curly brackets,
# terminal punctuation, long words, abbreviations before periods.
LINE_TRICKY = (
    list("\n\n\n\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
    + ["\r\n", " ", " ", " ", "\t", "\u00a0", "\u3000", "{", "}", ".", "...", "!", "?", '"', "'"]
    + ["[1]", "[]", "[12]", "[٣]", "[edit]", "[citation needed]", "[x]", "[", "]"]
    + ["Lorem Ipsum", "lorem ipsum", "JavaScript", "java\u017fcript", "coo\u212aie policy"]
    + ["Terms of Use", "privacy policy", "uses cookies", "use of cookies", "USE COOKIES"]
    + [
        "\u0130",
        "\u0131",
        "\u212a",
        "\u017f",
        "e.g.",
        "Mr.",
        "U.S.",
        "x" * 12,
        "y" * 30,
        "日本語",
        "Да.",
        "😀",
    ]
    + ["word", "Word", "two words", "three short words", "one two three four."]
)


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"filter_no_terminal_punct": True},
        {"max_word_length": 10, "min_words_per_line": 1},
        {"max_word_length": -1, "min_words_per_line": 0, "remove_citations": False},
        {"filter_lorem_ipsum": False, "filter_javascript": False, "filter_policy": False},
        {"filter_curly_bracket": False, "max_word_length": 0},
    ],
)
def test_compiled_line_rules_measure_as_the_regexes(settings):
    flt = C4QualityFilter(**settings)
    rng = random.Random(len(str(settings)))
    texts = ["".join(rng.choices(LINE_TRICKY, k=rng.randrange(0, 40))) for _ in range(3000)] + [
        "",
        None,
        "\n",
        "a b c.\n\n",
        "[1]\nx y z. [2]",
        "  a b c {  \n d e f ",
        "x\ry\u2028z\r\n" * 300,  # more removed lines than newlines: room is made again
    ]
    assert_same_measure(flt, texts)


def test_compiled_line_rules_read_every_character_as_the_regexes():
    """Every code point inside a phrase, around a citation, beside whitespace and in a word."""
    every = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    # a sample, and every code point outside ASCII whose lowercase or case folding holds an
    # ASCII character (the Kelvin sign, U+0130, long s, ligatures, ...)
    folded = [
        c for c in every if ord(c) > 0x7F and any(x.isascii() for x in c.lower() + c.casefold())
    ]
    every = every[::7] + folded
    texts = [
        f"coo{c}ie policy here\nja{c}ascript a b\njavascr{c}pt x y\n"
        f"[{c}] x y z. {c}Next one two\n{c} a b {c}\n"
        f"lorem{c}ipsum a b{c}\nA b c{c}"
        for c in every
    ]
    assert_same_measure(C4QualityFilter(), texts)
    assert_same_measure(C4QualityFilter(filter_no_terminal_punct=True), texts[::5])


def test_the_phrases_are_found_as_in_every_line_lowercased():
    """The same lines removed and the same documents dropped as lowercasing every line, with
    letters whose lowercase or case folding is unusual (Kelvin sign, dotted capital I, long s)."""
    lines = [
        "Please ENABLE JAVASCRIPT to view the comments on this page.",
        "This site USES COO\u212aIES to improve your visit, as you know.",
        "Read the PR\u0130VACY POL\u0130CY before you write to us here.",
        "This page u\u017fes cookies only when you ask it to.",
        "Lorem Ipsum dolor sit amet, consectetur adipiscing elit sed.",
        "Plain words about the weather and the sea, nothing else.",
        "See the Terms Of Use { of this service } for the details.",
    ]
    rng = random.Random(2)
    texts = ["\n".join(rng.choices(lines, k=rng.randint(0, 8))) for _ in range(200)]
    docs = pl.DataFrame({"text": texts})
    found = C4QualityFilter().measure(docs)
    expected = reference_measure(C4QualityFilter(), docs, lambda lines: lines.str.to_lowercase())
    assert found.equals(expected)
    assert found["fatal"].drop_nulls().len() > 20
    assert (found["new_text"] != docs["text"]).sum() > 100
