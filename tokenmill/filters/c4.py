"""C4 quality (datatrove C4QualityFilter, FineWeb configuration)."""

from __future__ import annotations

import numpy as np
import polars as pl

from tokenmill.filters.protocol import Filter, FilterResult
from tokenmill.filters.rules import Judgement, Rule, judged
from tokenmill.languages.defaults import language_defaults
from tokenmill.text.segmentation import (
    ABBREVIATIONS,
    NEW_SEGMENTED,
    NEW_WORD_COUNTS,
    knows_words,
    line_scale,
    rows_by_scale,
    scaled,
    segmented_languages,
    segmented_text,
)
from tokenmill.text.word_scan import C4Lines, c4_lines, word_counts_of

# What remove_citations removes (c4_lines follows it; tests/test_c4_lines.py holds them equal)
CITATION_PATTERN = r"\[\d*]|\[edit]|\[citation needed]"
POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)
# Unicode's sentence terminals (spaCy's sentencizer ends sentences at nearly the same list), in
# every script that has one: Khmer's khan, Ethiopic's full stop, Devanagari's danda... Left out:
# Myanmar's little section and the one dot leader (Armenian's mijaket), which mark clauses.
_SENTENCE_END = r"[\p{Sentence_Terminal}--[\x{104A}\x{2024}]]"
# Periods that spaCy's tokenizer keeps inside a token (abbreviation exceptions, single letters
# like "J." or "e.g.", ellipses) cannot end a sentence; they are removed before counting.
_NON_SENTENCE_PERIODS = rf"\.{{2,}}|(^|\W)(?:[A-Za-z]|{ABBREVIATIONS})\."
# spaCy's sentencizer starts a sentence at the first non-punctuation token after a sentence-ending
# punctuation token. Tokens are whitespace separated here (see the module docstring).
_SENTENCE_BOUNDARY = _SENTENCE_END + r"\p{P}*\s[\s\p{P}]*[^\s\p{P}]|\p{Ll}\.\p{Lu}"
# A line's sentences are counted by compiled code that follows these two regexes
# (word_scan.count_sentences, in c4_lines; tests/test_word_scan.py holds them equal).
# Thai, Lao and Tibetan mark no sentence end apart from their clauses' ends: in Thai and Lao a
# space between two of their letters (vowel and tone marks included; not their repetition
# marks, digits or punctuation), in Tibetan a shad before the next syllable. Such breaks in a
# kept line of the text itself (a segmented text has a space between every two words) over how
# many the language writes per English sentence (``LanguageDefaults.sentence_ratio``) are its
# sentences, where more than its lines and marked ends.
_SPACE_ENDED = (
    r"[\x{0E01}-\x{0E3A}\x{0E40}-\x{0E45}\x{0E47}-\x{0E4E}"
    r"\x{0E81}-\x{0EC5}\x{0EC7}-\x{0ECF}\x{0EDC}-\x{0EDF}]"
)
_SHAD_BEFORE_A_SYLLABLE = r"[\x{0F0D}-\x{0F12}][^\S\n]*[\x{0F00}\x{0F40}-\x{0F6C}]"
_CLAUSE_BREAK = (  # kept lines: "\n" between them
    _SPACE_ENDED + r"[^\S\n]+" + _SPACE_ENDED + "|" + _SHAD_BEFORE_A_SYLLABLE
)
# In a language that writes ordinals with a period ("5. artikla", "15. května"), a period after a
# number and before a lowercase word in the same line: counted above as a sentence end, it is
# none.
_ORDINAL_PERIOD = r"(?:^|\W)[0-9]+\.[^\S\n]+\p{Ll}"


# What the line rules look for in a lowercased line, in c4_lines' order.
_LOWERCASE_PHRASES = ("lorem ipsum", "javascript", *POLICY_SUBSTRINGS)
# A line's reason to drop its whole document, by c4_lines' number for it.
_FATAL = [None, "lorem_ipsum", "curly_bracket"]


class C4QualityFilter(Filter):
    """C4 rules as FineWeb ran them (``filter_no_terminal_punct=False``).

    Line by line (str.splitlines, stripped): a line with a word longer than ``max_word_length``,
    fewer than ``min_words_per_line`` words, mentioning javascript or a cookie/terms policy is
    removed; "lorem ipsum" or "{" in a surviving line drops the document, as do fewer than
    ``min_num_sentences`` sentences in the kept lines. Returns ``FilterResult`` whose text is the
    kept lines joined by newlines.
    """

    name = "c4_quality"
    description = "C4 filter (line removal)"
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
    text_signals = ("fatal",)  # a kept line's reason to drop the whole document
    rewrites = True  # its `measure` gives each document's new text, `new_text`
    # Stored beside the signals: the lines it removes, so that a recipe judged from the stored
    # signals rewrites its kept documents without evaluating the line rules again.
    rewrite_signal = "removed_lines"

    def __call__(self, docs: pl.DataFrame) -> FilterResult:
        stats = self.measure(docs)
        counts = stats.get_column(NEW_WORD_COUNTS, default=None)
        segmented = stats.get_column(NEW_SEGMENTED, default=None)
        reasons = judged(stats, self.judgement()).reasons
        return FilterResult(reasons, stats["new_text"], counts, segmented)

    def measure_key(self) -> tuple:
        return tuple(v for k, v in vars(self).items() if k != "min_num_sentences")

    def judgement(self) -> Judgement:
        return Judgement(self.rules(), fatal="fatal")

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        """Per document: ``sentences`` in the kept lines, ``fatal`` (a kept line's reason to
        drop the whole document, or null), ``new_text`` (the kept lines) and ``removed_lines``
        (the numbers, in ``split_lines``, of the lines it removes); where some documents are in
        a language written without spaces, ``new_segmented``: the kept lines of the text as the
        word scanners read it (``segmented_text``), which the next filters read."""
        return self._per_document(docs, judging=True)

    def rewrite(self, docs: pl.DataFrame) -> pl.Series:
        """The kept lines of each document (``measure``'s ``new_text``), when its signals are
        stored: from the stored ``removed_lines`` where ``docs`` carry them (measured on this
        same text), else by the line rules."""
        stored = f"{self.name}.{self.rewrite_signal}"
        if stored in docs.columns and not docs[stored].null_count():
            return self._without_lines(docs["text"].fill_null(""), docs[stored])
        return self._per_document(docs, judging=False)["new_text"]

    def _without_lines(self, text: pl.Series, removed: pl.Series) -> pl.Series:
        found = c4_lines(text, self._settings(False), list(_LOWERCASE_PHRASES), removed)
        if (found.fatal < 0).any():
            raise ValueError(f"{self.name}: stored removed lines beyond a document's last line")
        return found.new_text

    def _per_document(self, docs: pl.DataFrame, judging: bool) -> pl.DataFrame:
        """``measure``'s columns (not ``judging``: ``rewrite`` wants the new texts only), found
        line by line by compiled code (``word_scan.c4_lines``), which follows the regexes and
        group-bys of ``tests/test_c4_lines.py`` (the tests hold them equal)."""
        counting = judging and knows_words(docs)  # the texts' words are known: count the new
        segmented = bool(segmented_languages(docs))
        text = segmented_text(docs) if segmented else docs["text"]
        found = self._lines_found(text, docs, counting)
        new_text = found.new_text
        kept_segmented = {NEW_SEGMENTED: new_text} if segmented and judging else {}
        if segmented:  # the lines were judged by their segmented words: cut the text itself
            original = docs["text"].fill_null("")
            rows = (text != original).arg_true()
            if len(rows):
                removed = found.removed_lines.gather(rows)
                cut = self._without_lines(original.gather(rows), removed)
                new_text = new_text.scatter(rows, cut)
        stats = pl.DataFrame(
            {
                "sentences": _by_language(found.sentences, new_text, docs)
                if judging
                else found.sentences,
                "fatal": pl.Series(_FATAL, dtype=pl.String).gather(found.fatal),
                "new_text": new_text,
                **kept_segmented,
            }
        )
        if judging:
            stats = stats.with_columns(found.removed_lines.alias(self.rewrite_signal))
        if counting:
            counts = word_counts_of(docs).cast(pl.Int64) - pl.Series(found.lost_words)
            known = pl.Series(found.lost_words >= 0)
            counts = pl.select(pl.when(known).then(counts)).to_series()
            stats = stats.with_columns(counts.cast(pl.UInt32).alias(NEW_WORD_COUNTS))
        return stats

    def _lines_found(self, text: pl.Series, docs: pl.DataFrame, counting: bool) -> C4Lines:
        """``c4_lines`` over ``text``; a line's minimum of words, in a language that takes more
        words than English to say the same (``line_scale``: Japanese, Vietnamese, those whose
        segmenter cuts syllables), that many English words' worth of them."""
        phrases = list(_LOWERCASE_PHRASES)
        groups = rows_by_scale(docs, line_scale)
        if len(groups) == 1:
            return c4_lines(text, self._settings(counting, groups[0][0]), phrases)
        parts = [
            (rows, c4_lines(text.gather(rows), self._settings(counting, scale), phrases))
            for scale, rows in groups
        ]
        order = np.argsort(np.concatenate([rows for rows, _ in parts]))
        columns = zip(*(found for _, found in parts), strict=True)  # a field's parts at a time
        return C4Lines(
            *(
                pl.concat(field).gather(order)
                if isinstance(field[0], pl.Series)
                else np.concatenate(field)[order]
                for field in columns
            )
        )

    def _settings(self, counting: bool, scale: float = 1.0) -> list[int]:
        """``c4_lines``' settings (word_scan.c's C4_MAX_WORD_LENGTH ... C4_COUNTING), a line's
        minimum of words for a language of ``scale`` pieces per word."""
        return [
            self.max_word_length,
            scaled(self.min_words_per_line, scale),
            self.remove_citations,
            self.filter_no_terminal_punct,
            self.filter_lorem_ipsum,
            self.filter_javascript,
            self.filter_curly_bracket,
            self.filter_policy,
            counting,
        ]

    def rules(self) -> list[Rule]:
        threshold = None if self.min_num_sentences == -1 else self.min_num_sentences
        return [Rule("sentences", pl.col("sentences"), "<", threshold)]


def _by_language(sentences: np.ndarray, kept: pl.Series, docs: pl.DataFrame) -> np.ndarray:
    """Each document's ``sentences`` (its kept lines and the sentence ends in them), less, in a
    language that writes ordinals with a period (``LanguageDefaults.ordinal_periods``), the
    ``_ORDINAL_PERIOD``s of its ``kept`` lines; or where more, in a language that marks only its
    clauses' ends (one with a ``sentence_ratio``), the ``_CLAUSE_BREAK``s in its ``kept`` lines
    over that ratio, rounded. Only those languages' documents are searched."""
    if "language" not in docs.columns:
        return sentences
    labels = [language_defaults(label) for label in docs["language"].unique().drop_nulls()]
    ordinals = [found.label for found in labels if found.ordinal_periods]
    ratios = {found.label: found.sentence_ratio for found in labels if found.sentence_ratio}
    if not ordinals and not ratios:
        return sentences
    sentences = sentences.copy()
    if rows := _rows_in(docs, ordinals):
        found = kept.gather(rows).str.count_matches(_ORDINAL_PERIOD).fill_null(0)
        sentences[rows] -= found.to_numpy()
    if rows := _rows_in(docs, list(ratios)):
        breaks = kept.gather(rows).str.count_matches(_CLAUSE_BREAK).fill_null(0)
        per_ratio = docs["language"].gather(rows).replace_strict(ratios, return_dtype=pl.Float64)
        estimated = (breaks / per_ratio + 0.5).floor().cast(pl.Int64).to_numpy()
        sentences[rows] = np.maximum(sentences[rows], estimated)
    return sentences


def _rows_in(docs: pl.DataFrame, labels: list[str]) -> list[int]:
    """The rows of ``docs`` whose language is one of ``labels``."""
    return docs["language"].is_in(labels).fill_null(False).arg_true().to_list() if labels else []
