"""C4 quality (datatrove C4QualityFilter, FineWeb configuration)."""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import polars as pl
import pyarrow as pa

from tokenmill.filters.chain import FilterResult
from tokenmill.filters.rules import Judgement, Rule, judged
from tokenmill.filters.text import (
    ABBREVIATIONS,
    NEW_WORD_COUNTS,
    count_per_doc,
    count_words,
    doc_index,
    explode,
    knows_words,
    split_lines,
    word_counts_of,
)
from tokenmill.filters.word_scan import count_sentences

CITATION_PATTERN = r"\[\d*]|\[edit]|\[citation needed]"
POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)
_SENTENCE_END = (
    "[.!?\u0589\u061f\u06d4\u0964\u0965\u3002\uff01\uff0e\uff1f\uff61\u203c\u203d\u2047-\u2049]"
)
# Periods that spaCy's tokenizer keeps inside a token (abbreviation exceptions, single letters
# like "J." or "e.g.", ellipses) cannot end a sentence; they are removed before counting.
_NON_SENTENCE_PERIODS = rf"\.{{2,}}|(^|\W)(?:[A-Za-z]|{ABBREVIATIONS})\."
# spaCy's sentencizer starts a sentence at the first non-punctuation token after a sentence-ending
# punctuation token. Tokens are whitespace separated here (see the module docstring).
_SENTENCE_BOUNDARY = _SENTENCE_END + r"\p{P}*\s[\s\p{P}]*[^\s\p{P}]|\p{Ll}\.\p{Lu}"
# A line's sentences are counted by compiled code that follows these two regexes
# (word_scan.count_sentences; tests/test_word_scan.py holds them equal): 5x faster.


def _any_of(substrings: Iterable[str]) -> str:
    """A regex matching any of ``substrings`` (on C4's lines 7x faster than polars'
    ``str.contains_any``)."""
    return "|".join(re.escape(s) for s in substrings)


def _has_words(lines: pl.Expr, minimum: int) -> pl.Expr:
    """Whether each line has at least ``minimum`` whitespace-separated words (a regex search
    stops at the first match, cheaper than counting every word)."""
    if minimum <= 0:
        return pl.lit(True)
    return lines.str.contains(r"\S" + r"\S*\s+\S" * (minimum - 1))


# What the line rules look for in a lowercased line.
_LOWERCASE_PHRASES = ("lorem ipsum", "javascript", *POLICY_SUBSTRINGS)


def _lowered(lines: pl.Series) -> pl.Series:
    """Each line lowercased where that could show one of ``_LOWERCASE_PHRASES``, else empty
    (it shows none): a case-insensitive search finds every such line (the only characters
    outside ASCII whose lowercase holds an ASCII letter are the Kelvin sign, matched as "k", and
    "İ", lowercased to "i" and a combining dot, which no phrase ends with), and a few more (it
    matches "ſ" as "s"), far cheaper than lowercasing every line."""
    candidates = lines.str.contains("(?i)" + _any_of(_LOWERCASE_PHRASES)).arg_true()
    lowered = pl.repeat("", len(lines), dtype=pl.String, eager=True)
    return lowered.scatter(candidates, lines.gather(candidates).str.to_lowercase())


def _joined(doc: np.ndarray, lines: pl.Series, n_docs: int) -> pl.Series:
    """Per document, its ``lines`` (in order; ``doc`` says whose) joined by newlines and
    stripped; "" for a document without one."""
    per_doc = (
        pl.DataFrame({"doc": doc, "line": lines})
        .group_by("doc", maintain_order=True)
        .agg(pl.col("line").str.join("\n").str.strip_chars())
    )
    texts = pl.repeat("", n_docs, dtype=pl.String, eager=True).alias("new_text")
    return texts.scatter(per_doc["doc"], per_doc["line"]) if per_doc.height else texts


def _line_numbers(doc: np.ndarray, chosen: np.ndarray, n_docs: int) -> pl.Series:
    """Per document, the numbers of its ``chosen`` lines, from every line's document ``doc``
    (in document order) and whether it is ``chosen``."""
    first = np.searchsorted(doc, np.arange(n_docs))
    numbers = (np.arange(len(doc)) - first[doc])[chosen].astype(np.uint32)
    offsets = np.zeros(n_docs + 1, dtype=np.int32)
    np.cumsum(np.bincount(doc[chosen], minlength=n_docs), out=offsets[1:])
    return pl.from_arrow(pa.ListArray.from_arrays(pa.array(offsets), pa.array(numbers)))


def _new_word_counts(docs: pl.DataFrame, lines: pl.DataFrame) -> pl.Series:
    """The new texts' word counts: the old texts' less the words of the lines removed and of
    the citations removed from kept lines. Words never span a line break (every break
    ``split_lines`` splits at is whitespace to ``WORD_PATTERN``, but for U+001C..U+001E: texts
    holding one are counted again, null) and stripping a line removes no word, so a text's words
    are its lines' words, and only the lines that changed need counting: a small share of the
    text, where counting the new texts costs as much as splitting them."""
    removed = lines.filter(~pl.col("kept"))
    cited = lines.filter(pl.col("kept") & (pl.col("line") != pl.col("original")))
    removed_words = count_words(removed["original"]).cast(pl.Int64).to_numpy()
    cut = (count_words(cited["original"]).cast(pl.Int64) - count_words(cited["line"])).to_numpy()
    lost = np.bincount(removed["doc"].to_numpy(), removed_words, minlength=docs.height)
    lost += np.bincount(cited["doc"].to_numpy(), cut, minlength=docs.height)
    counts = word_counts_of(docs).cast(pl.Int64) - pl.Series(lost.astype(np.int64))
    unsplit = docs["text"].fill_null("").str.contains(_NON_SPACE_BREAKS)
    return pl.select(pl.when(unsplit).then(None).otherwise(counts)).to_series().cast(pl.UInt32)


# Line breaks to str.splitlines() that are not whitespace to the word pattern's \s
_NON_SPACE_BREAKS = "[\x1c\x1d\x1e]"


class C4QualityFilter:
    """C4 rules as FineWeb ran them (``filter_no_terminal_punct=False``).

    Line by line (str.splitlines, stripped): a line with a word longer than ``max_word_length``,
    fewer than ``min_words_per_line`` words, mentioning javascript or a cookie/terms policy is
    removed; "lorem ipsum" or "{" in a surviving line drops the document, as do fewer than
    ``min_num_sentences`` sentences in the kept lines. Returns ``FilterResult`` whose text is the
    kept lines joined by newlines.
    """

    name = "c4_quality"
    settings = {
        "remove_citations": "Remove Wikipedia-style citation marks ([1], [citation needed])",
        "filter_no_terminal_punct": "Remove lines without terminal punctuation (FineWeb: no)",
        "min_num_sentences": "Fewer sentences in the kept lines drop a document",
        "min_words_per_line": "Lines with fewer words are removed",
        "max_word_length": "Lines with a longer word are removed",
        "filter_lorem_ipsum": "'lorem ipsum' drops a document",
        "filter_javascript": "Lines mentioning javascript are removed",
        "filter_curly_bracket": "A '{' in a kept line drops a document",
        "filter_policy": "Lines about cookie, privacy or terms-of-use policies are removed",
    }

    def __init__(
        self,
        remove_citations: bool = True,
        filter_no_terminal_punct: bool = False,
        min_num_sentences: int = 5,
        min_words_per_line: int = 3,
        max_word_length: int = 1000,
        filter_lorem_ipsum: bool = True,
        filter_javascript: bool = True,
        filter_curly_bracket: bool = True,
        filter_policy: bool = True,
    ):
        self.remove_citations = remove_citations
        self.filter_no_terminal_punct = filter_no_terminal_punct
        self.min_num_sentences = min_num_sentences
        self.min_words_per_line = min_words_per_line
        self.max_word_length = max_word_length
        self.filter_lorem_ipsum = filter_lorem_ipsum
        self.filter_javascript = filter_javascript
        self.filter_curly_bracket = filter_curly_bracket
        self.filter_policy = filter_policy

    signals = ("sentences", "fatal")
    rewrites = True  # its `measure` gives each document's new text, `new_text`
    # Stored beside the signals: the lines it removes, so that a recipe judged from the stored
    # signals rewrites its kept documents without evaluating the line rules again.
    rewrite_signal = "removed_lines"

    def __call__(self, docs: pl.DataFrame) -> FilterResult:
        stats = self.measure(docs)
        counts = stats.get_column(NEW_WORD_COUNTS, default=None)
        return FilterResult(judged(stats, self.judgement()).reasons, stats["new_text"], counts)

    def measure_key(self) -> tuple:
        return tuple(v for k, v in vars(self).items() if k != "min_num_sentences")

    def judgement(self) -> Judgement:
        return Judgement(self._rules(), fatal="fatal")

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        """Per document: ``sentences`` in the kept lines, ``fatal`` (a kept line's reason to
        drop the whole document, or null), ``new_text`` (the kept lines) and ``removed_lines``
        (the numbers, in ``split_lines``, of the lines it removes)."""
        return self._per_document(docs, judging=True)

    def rewrite(self, docs: pl.DataFrame) -> pl.Series:
        """The kept lines of each document (``measure``'s ``new_text``), when its signals are
        stored: from the stored ``removed_lines`` where ``docs`` carry them (measured on this
        same text), else by the line rules without counting sentences (most of the cost)."""
        stored = f"{self.name}.{self.rewrite_signal}"
        if stored in docs.columns and not docs[stored].null_count():
            return self._without_lines(docs["text"].fill_null(""), docs[stored])
        return self._per_document(docs, judging=False)["new_text"]

    def _without_lines(self, text: pl.Series, removed: pl.Series) -> pl.Series:
        lines = explode(split_lines(text))
        first = np.searchsorted(lines.doc, np.arange(len(text)))  # each document's first line
        lines_of = np.diff(first, append=len(lines.doc))
        cut = explode(removed)
        numbers = cut.values.to_numpy()
        if len(numbers) and (numbers >= lines_of[cut.doc]).any():
            raise ValueError(f"{self.name}: stored removed lines beyond a document's last line")
        keep = np.ones(len(lines.doc), dtype=bool)
        keep[first[cut.doc] + numbers] = False
        kept = lines.filter(keep)
        line = kept.values.str.strip_chars()
        if self.remove_citations:
            line = line.str.replace_all(CITATION_PATTERN, "")
        return _joined(kept.doc, line, len(text))

    def _per_document(self, docs: pl.DataFrame, judging: bool) -> pl.DataFrame:
        text = docs["text"].fill_null("")
        lines = explode(split_lines(text))
        lines = pl.DataFrame({"doc": lines.doc, "line": lines.values.str.strip_chars()})
        counting = judging and knows_words(docs)  # the texts' words are known: count the new
        if counting:
            lines = lines.with_columns(original=pl.col("line"))
        lines = lines.with_columns(
            valid=~self._has_long_word(lines["line"])
            & _has_words(pl.col("line"), self.min_words_per_line)
        )
        if self.remove_citations:
            lines = lines.with_columns(pl.col("line").str.replace_all(CITATION_PATTERN, ""))
        lines = lines.with_columns(lower=_lowered(lines["line"]))
        lines = lines.with_columns(self._line_flags())
        per_doc = lines.group_by("doc", maintain_order=True).agg(
            new_text=pl.col("line").filter("kept").str.join("\n").str.strip_chars(),
            fatal=pl.col("fatal").drop_nulls().first() if judging else pl.lit(None, pl.Utf8),
        )
        stats = pl.DataFrame([doc_index(len(text))]).join(per_doc, on="doc", how="left")
        stats = stats.sort("doc").select("fatal", pl.col("new_text").fill_null(""))
        if judging:
            kept = lines.filter("kept")
            sentences = count_per_doc(
                kept["doc"].to_numpy(), len(text), count_sentences(kept["line"])
            )
            stats = stats.with_columns(sentences=pl.Series(sentences))
            removed = _line_numbers(lines["doc"].to_numpy(), ~lines["kept"].to_numpy(), len(text))
            stats = stats.with_columns(removed.alias(self.rewrite_signal))
        if counting:
            stats = stats.with_columns(_new_word_counts(docs, lines).alias(NEW_WORD_COUNTS))
        return stats

    def _line_flags(self) -> list[pl.Expr]:
        """Per line: ``kept`` and ``fatal`` (the reason the line drops its whole document), from
        ``valid`` (long words, words per line), ``line`` (without citations) and ``lower``."""
        line, valid = pl.col("line"), pl.col("valid")
        if self.filter_no_terminal_punct:
            valid &= line.str.contains(r"[.?!\"']$") & ~line.str.ends_with("...")
        lower = pl.col("lower")
        lorem = valid & lower.str.contains("lorem ipsum", literal=True) & self.filter_lorem_ipsum
        javascript = lower.str.contains("javascript", literal=True) & self.filter_javascript
        curly = (
            valid & ~javascript & line.str.contains("{", literal=True) & self.filter_curly_bracket
        )
        policy = lower.str.contains(_any_of(POLICY_SUBSTRINGS)) & self.filter_policy
        fatal = pl.when(lorem).then(pl.lit("lorem_ipsum")).when(curly).then(pl.lit("curly_bracket"))
        kept = valid & ~lorem & ~javascript & ~curly & ~policy
        return [kept.alias("kept"), fatal.alias("fatal")]

    def _has_long_word(self, lines: pl.Series) -> pl.Series:
        """Lines with a word longer than ``max_word_length``; only lines longer than that are
        searched (a counted-repetition regex is slow)."""
        flags = pl.Series("has_long_word", np.zeros(len(lines), dtype=bool))
        if self.max_word_length == -1:
            return flags
        candidates = (lines.str.len_chars() > self.max_word_length).arg_true()
        if len(candidates):
            found = lines.gather(candidates).str.contains(rf"\S{{{self.max_word_length + 1}}}")
            flags = flags.scatter(candidates, found)
        return flags

    def _rules(self) -> list[Rule]:
        threshold = None if self.min_num_sentences == -1 else self.min_num_sentences
        return [Rule("sentences", pl.col("sentences"), "<", threshold)]
