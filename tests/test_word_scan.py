"""The compiled word scanner against the regex it follows (`split_words`), word for word, and
the compiled sentence, line and paragraph counts against the regexes they follow."""

import random
import re

import numpy as np
import polars as pl
import pytest

from tokenmill.filters.c4 import _NON_SENTENCE_PERIODS, _SENTENCE_BOUNDARY, _SENTENCE_END
from tokenmill.text import (
    code_point_tables,
    language,
    make_tables,
    ngrams,
    normal_form,
    word_scan,
)
from tokenmill.text.segmentation import (
    LINE_BREAKS,
    NON_PUNCTUATION,
    TERMINAL_PUNCTUATION,
    count_per_doc,
    explode,
    find_duplicates,
    split_words,
)
from tokenmill.text.word_scan import (
    ALPHA,
    CONTENT,
    as_column,
    char_classes,
    count_sentences,
    count_words,
    element_duplicates,
    fineweb_line_counts,
    hash_of,
    scan_words,
    text_totals,
    words_in,
)

# Characters around which WORD_PATTERN's alternatives and the joins turn.
TRICKY = (
    list("'’.,:/-@&[({})]\"!?;<>#_ \n\t\r\x0b\x0c\u00a0\u2028\u3000")
    + list("sSdDmMtTlLrRvVeEaAzZhtpw")
    + ["http://", "https://", "www.", "http", "Mr", "Mrs", "Sept", "co", "e.g", "U.S", "ll", "re"]
    + list("0123456789٣")
    + list("éßÉİıĸǅ")
    + ["e\u0301", "\u0301", "\u200d"]
    + list("日本語中文한국어")
    + list("абвгдАБВ")
    + list("ابت")
    + ["😀", "\U0001f1eb", "𝔘"]
    + list("…—–“”«»•►")
    + ["\x00", "\x1c", "\U000e0041", "\U0010fffd"]
)
CASES = [
    "",
    "   ",
    "Hello, world! It's the U.S. of A. vs. J. R. R. Tolkien.",
    "see http://example.org/a_(b)?x=1. and https://x.y/z, www.foo.bar; https:// www. http",
    "c'est l'année d'O'Brien; he'll we're I've they'd don't rock'n'roll l'll r're",
    "COVID-19, x-1, Rollene[rediger, f(x), a{b}, 3.5 1,000 10:30 3/4 a.txt Options.Builder",
    "wait... -- // '' ---- ..... //// ‘quote’ ’s 'S 'LL 'RE 'VE 're",
    "Dr. Mr. Mrs. Ms. Sept. Sep. co. Co. Calif.Mass. e.g. i.e. a.b.c. x.",
    "mail@host.org R&D a@ &b 日本語のテキスト。中文，标点！ 한국어 문장. Ünïcödé façade naïve",
    "e\u0301cole \u0301x ǅemal İstanbul ıi 𝔘𝔫𝔦 😀😀 x\u200dy 1٣2",
]


def reference(texts: list[str]) -> tuple[np.ndarray, ...]:
    words = split_words(pl.Series(texts, dtype=pl.Utf8))
    flat = explode(words)
    flags = np.where(flat.values.str.contains(r"\p{L}").to_numpy(), ALPHA, 0) | np.where(
        flat.values.str.contains(NON_PUNCTUATION).to_numpy(), CONTENT, 0
    )
    return (
        words.list.len().to_numpy().astype(np.int64),
        flat.values.str.len_chars().to_numpy(),
        np.array([hash_of(w) for w in flat.values.to_list()], dtype=np.uint64),
        flags.astype(np.uint8),
    )


def assert_same_words(texts: list[str]) -> None:
    scanned = scan_words(pl.Series(texts, dtype=pl.Utf8))
    counts, chars, hashes, flags = reference(texts)
    assert count_words(pl.Series(texts, dtype=pl.Utf8)).to_list() == counts.tolist()
    for got, expected, what in zip(
        scanned, (counts, chars, hashes, flags), ("counts", "chars", "hashes", "flags"), strict=True
    ):
        if not np.array_equal(got, expected):
            doc = int(np.flatnonzero(scanned.counts != counts)[0]) if what == "counts" else None
            detail = split_words(pl.Series([texts[doc]]))[0].to_list() if doc is not None else ""
            raise AssertionError(f"{what} differ; text {doc}: {detail}")


def test_the_scanner_splits_the_hand_made_cases_as_the_regex_does():
    assert_same_words(CASES)


@pytest.mark.parametrize("seed", range(4))
def test_the_scanner_splits_random_texts_of_tricky_characters_as_the_regex_does(seed):
    rng = random.Random(seed)
    texts = ["".join(rng.choices(TRICKY, k=rng.randrange(0, 80))) for _ in range(3000)]
    assert_same_words(texts)


def test_the_scanner_splits_every_character_as_the_regex_does():
    """Every code point alone, and between letters and after an apostrophe, where the joins
    and the alternatives read its class."""
    every = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    step = 7  # every class boundary is in a chunk: each chunk is one text of 7 characters
    texts = ["".join(every[i : i + step]) for i in range(0, len(every), step)]
    texts += [f"a'{c}b a{c}1 x.{c} {c}'s" for c in every[::97]]
    assert_same_words(texts)


def test_null_and_sliced_texts_scan_like_the_rest():
    text = pl.Series(["one two", None, "three's", "four"])
    scanned = scan_words(text.slice(1, 3))
    assert scanned.counts.tolist() == [0, 2, 1]
    assert count_words(text.slice(1, 3)).to_list() == [0, 2, 1]
    assert scanned.chars.tolist() == [5, 2, 4]
    assert scan_words(pl.Series([], dtype=pl.Utf8)).counts.tolist() == []


def test_the_features_column_round_trips():
    scanned = scan_words(pl.Series(CASES))
    column = as_column(scanned)
    assert column.len() == len(CASES)
    for got, expected in zip(words_in(column), scanned, strict=True):
        assert np.array_equal(got, expected)
    tail = words_in(column[2:])  # a slice of the column: its offset is honoured
    assert tail.counts.tolist() == scanned.counts[2:].tolist()
    assert np.array_equal(tail.hashes, scanned.hashes[scanned.counts[:2].sum() :])
    filtered = words_in(column.filter(pl.Series([i % 2 == 1 for i in range(len(CASES))])))
    assert filtered.counts.tolist() == scanned.counts[1::2].tolist()
    assert filtered.chars.sum() == sum(
        scanned.chars[start : start + n].sum()
        for start, n in zip(
            (np.cumsum(scanned.counts) - scanned.counts)[1::2], scanned.counts[1::2], strict=True
        )
    )


def test_character_classes_are_the_regex_engines():
    table = char_classes()
    assert table[ord("a")] & 1 and table[ord("a")] & 2 and table[ord("a")] & 4
    assert table[ord("5")] & 8 and not table[ord("5")] & 2
    assert table[ord(" ")] & 16 and table[0x3000] & 16 and not table[ord("x")] & 16
    assert table[ord("!")] & 32 and not table[ord("a")] & 32
    assert table[ord("A")] & 128 and table[0x0130] & 128 and not table[ord("a")] & 128
    assert table[ord("-")] & 64 and table[0x3002] & 64 and not table[ord("+")] & 64


def test_stored_tables_are_those_polars_and_python_give(tmp_path, monkeypatch):
    """Each cached table equals the one made from polars' or Python's Unicode data, in the
    cache every process reads and in a new one."""
    tables = {
        "word-scan-classes": word_scan._char_classes,
        "ngram-classes": ngrams._character_classes,
        "ngram-folds": ngrams._fold_table,
        "non-starters": normal_form._non_starter_table,
    }
    for name, make in tables.items():
        fresh = make()
        assert np.array_equal(code_point_tables.cached_table(name, make), fresh), name
        monkeypatch.setenv(code_point_tables.CACHE_DIR_VARIABLE, str(tmp_path))
        assert np.array_equal(code_point_tables.cached_table(name, make), fresh), name
        monkeypatch.delenv(code_point_tables.CACHE_DIR_VARIABLE)
    assert len(list(tmp_path.glob("*.npy"))) == len(tables) and not list(tmp_path.glob("*.tmp"))
    assert np.array_equal(word_scan.char_classes(), tables["word-scan-classes"]())


def test_the_images_command_stores_every_table(tmp_path, monkeypatch):
    monkeypatch.setenv(code_point_tables.CACHE_DIR_VARIABLE, str(tmp_path))
    tables = (normal_form._non_starters, word_scan.char_classes, ngrams.character_classes)
    for cached in (*tables, ngrams.fold_table, language._script_ids):
        cached.cache_clear()  # this process has them already: read or made anew now
    make_tables.main()
    stored = sorted(path.name.rsplit("-", 1)[0] for path in tmp_path.glob("*.npy"))
    assert stored == [
        "letter-scripts",
        "ngram-classes",
        "ngram-folds",
        "non-starters",
        "word-scan-classes",
    ]


def test_a_table_is_made_once_and_made_again_when_unreadable(tmp_path, monkeypatch):
    monkeypatch.setenv(code_point_tables.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    calls = []

    def make():
        calls.append(1)
        return np.arange(code_point_tables.CODE_POINTS, dtype=np.int32) % 7

    first = code_point_tables.cached_table("sevens", make)
    again = code_point_tables.cached_table("sevens", make)
    assert len(calls) == 1 and np.array_equal(first, again)
    (stored,) = (tmp_path / "cache").glob("sevens-*.npy")
    assert stored.stat().st_mode & 0o777 == 0o644  # readable by another user (the image's)
    stored.write_bytes(stored.read_bytes()[:1000])  # cut short
    assert np.array_equal(code_point_tables.cached_table("sevens", make), first)
    assert len(calls) == 2
    assert np.array_equal(np.load(stored), first)  # stored whole again
    # a cache that cannot be written: the table still comes, made each time
    blocked = tmp_path / "a file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(code_point_tables.CACHE_DIR_VARIABLE, str(blocked / "cache"))
    assert np.array_equal(code_point_tables.cached_table("sevens", make), first)
    assert len(calls) == 3


# Where C4's sentence regexes turn: sentence ends, punctuation after them, abbreviations and
# single letters before a period, lower and upper case around one.
def sentence_terminals() -> list[str]:
    code_points, chars = word_scan.every_character()
    return [chr(c) for c in code_points[chars.str.contains(_SENTENCE_END).to_numpy()]]


SENTENCE_TRICKY = (
    sentence_terminals()
    + list("\"')]»”-…,;: \t\u00a0\u3000\u2028\u1361")
    + ["..", "...", "Mr", "Mrs", "Sep", "Sept", "Co", "Corp", "co", "vs", "Wash", "e", "J"]
    + list("aAzZxXéÉßİıǅ")
    + ["word", "Word", "日本", "Да", "١٢", "😀", "_", "9"]
)
SENTENCE_CASES = [
    "",
    "One. Two! Three? Four",
    'Mr. Smith went to Washington... He said: "Yes." Then left.',
    "e.g. this, i.e. that. J. R. R. Tolkien wrote. U.S.A. is big.",
    "end.Start and.Next x.Y",
    "日本語の文。次の文！最後？ Да. Нет! Что?",
    "ሰው፡ልጅ፡ነው።፡የተፈጥሮ፡ይገባዋል። ሁሉ፡ሰው።፡",
    "ሰው፡ልጅ፡ነው።፡የተፈጥሮ፡ይገባዋል።",
    "Wow!!! Really?! (Yes.) [No.] ...and so. . . on",
    "Sept. 5th. Co. Ltd. vs. Jan. Feb.",
    ". ! ? .",
]


def reference_sentences(lines: list[str]) -> list[int]:
    series = pl.Series(lines, dtype=pl.Utf8)
    without = series.str.replace_all(_NON_SENTENCE_PERIODS, "$1")
    return (without.str.count_matches(_SENTENCE_BOUNDARY) + 1).to_list()


def test_sentences_are_counted_as_the_regexes_count_them():
    assert count_sentences(pl.Series(SENTENCE_CASES)).tolist() == reference_sentences(
        SENTENCE_CASES
    )
    rng = random.Random(7)
    lines = ["".join(rng.choices(SENTENCE_TRICKY, k=rng.randrange(0, 40))) for _ in range(20000)]
    counted = count_sentences(pl.Series(lines)).tolist()
    expected = reference_sentences(lines)
    pairs = zip(lines, counted, expected, strict=True)
    differing = [(line, c, e) for line, c, e in pairs if c != e]
    assert not differing, differing[:5]


def test_sentences_of_every_character_are_counted_as_the_regexes_count_them():
    """Every code point after a sentence end and a space, between a lower- and an upper-case
    letter around a period, and before a period."""
    every = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF][::3]
    lines = [f"a. {c} x.{c} {c}.B {c}J. Mr. z{c} y" for c in every]
    assert count_sentences(pl.Series(lines)).tolist() == reference_sentences(lines)


def test_every_sentence_terminal_ends_a_sentence_as_the_regexes_find():
    _, chars = word_scan.every_character()
    lines = ("Word" + chars + " word").to_list()
    counted = count_sentences(pl.Series(lines))
    assert counted.tolist() == reference_sentences(lines)
    ends = {line[4] for line, count in zip(lines, counted.tolist(), strict=True) if count == 2}
    assert {"\u0964", "\u1362", "\u17d4", "\u3002", "\u104b"} <= ends  # danda, Ethiopic, khan, ...
    assert not {"\u104a", "\u2024"} & ends  # Myanmar's little section, Armenian's mijaket
    assert count_sentences(pl.Series(lines)).tolist() == reference_sentences(lines)


def test_null_and_sliced_lines_count_one_sentence_or_theirs():
    lines = pl.Series(["A. B. C", None, "One. Two. Three", "x"])
    assert count_sentences(lines).tolist() == [1, 1, 3, 1]
    assert count_sentences(lines.slice(2, 2)).tolist() == [3, 1]
    assert count_sentences(pl.Series([], dtype=pl.Utf8)).tolist() == []


# Where the line and paragraph counts turn: every line break of str.splitlines(), runs of
# them, whitespace around bullets and ellipses, NUL (a paragraph break), repeated pieces.
LINE_TRICKY = (
    list("\n\n\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00")
    + ["\r\n", " ", "\t", "\u00a0", "\u3000", "\u200b", "#", "##", ".", "..", "...", "…", "•", "-"]
    + ["a", "b", "ab", "same line", "Same line", "日本", "é", "😀", "x" * 9, "y" * 17]
)
LINE_CASES = [
    "",
    " ",
    "\n",
    "a\nb\n\na\n\n\nb\n",
    "  - one\n\t• two\n-three...\nfour…  \nfive.. \n...",
    "p\n\np\n\n\np\x00p\x00\x00q\n \np",
    "\r\n\r\n#x ## ...... …… \u2028- y\u2029",
]


def reference_text_totals(texts: list[str]) -> dict[str, list[int]]:
    text = pl.Series(texts, dtype=pl.Utf8)
    lines = text.str.replace_all(LINE_BREAKS, "\n")
    return {
        "n_hash": text.str.count_matches("#", literal=True).to_list(),
        "n_ellipsis": (
            text.str.count_matches("...", literal=True) + text.str.count_matches("…", literal=True)
        ).to_list(),
        "n_lines": (
            (lines.str.count_matches("\n", literal=True) + 1 - lines.str.ends_with("\n"))
            * (lines != "")
        ).to_list(),
        "n_bullet_lines": lines.str.count_matches(r"(?m)^[^\S\n]*[•-]").to_list(),
        "n_ellipsis_lines": lines.str.count_matches(r"(?m)(?:\.\.\.|…)[^\S\n]*$").to_list(),
    }


def reference_element_duplicates(texts: list[str]) -> dict[str, list[int]]:
    text = pl.Series(texts, dtype=pl.Utf8)
    paragraphs = text.str.strip_chars().str.replace_all(r"\n{2,}", "\x00").str.split("\x00")
    lines = text.str.replace_all(r"\n+", "\n").str.split("\n")
    found = {}
    for prefix, parts in (("para", paragraphs), ("line", lines)):
        for stat, values in find_duplicates(explode(parts), len(texts)).items():
            found[f"{prefix}_{stat}"] = values.tolist()
    return found


def assert_same_line_counts(texts: list[str]) -> None:
    for compiled, reference in (
        (text_totals, reference_text_totals),
        (element_duplicates, reference_element_duplicates),
    ):
        got = {k: v.tolist() for k, v in compiled(pl.Series(texts, dtype=pl.Utf8)).items()}
        expected = reference(texts)
        assert got.keys() == expected.keys()
        for name in got:
            differing = [
                i for i, (g, e) in enumerate(zip(got[name], expected[name], strict=True)) if g != e
            ]
            assert not differing, (name, [texts[i] for i in differing[:3]])


def test_line_and_paragraph_counts_are_the_regexes():
    assert_same_line_counts(LINE_CASES)
    rng = random.Random(11)
    texts = ["".join(rng.choices(LINE_TRICKY, k=rng.randrange(0, 60))) for _ in range(5000)]
    assert_same_line_counts(texts)


def test_line_counts_of_every_whitespace_and_break_character_are_the_regexes():
    every = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    odd = [c for c in every if c.isspace() or c in "\x00\x1c\x1d\x1e" or not c.isprintable()]
    texts = [f"{c}- a{c}\n{c}b...{c}\n\n{c}a{c}\n{c}•{c}…{c}" for c in odd[:5000]]
    texts += [f"{c}{c}x{c}" for c in every[::101]]
    assert_same_line_counts(texts)


def test_null_and_sliced_texts_count_as_empty_and_theirs():
    text = pl.Series(["x\nx", None, "a\n\na\n- b...", ""])
    totals = text_totals(text.slice(1, 3))
    assert totals["n_lines"].tolist() == [0, 4, 0]
    assert totals["n_bullet_lines"].tolist() == [0, 1, 0]
    duplicates = element_duplicates(text.slice(1, 3))
    assert duplicates["line_dup"].tolist() == [0, 1, 0]
    assert duplicates["para_n"].tolist() == [1, 2, 1]


def reference_fineweb_line_counts(texts: list[str], stops, short: int) -> dict[str, list[int]]:
    """FineWebQualityFilter's line counts by regexes over the exploded lines."""
    text = pl.Series(texts, dtype=pl.Utf8).fill_null("")
    lines = explode(text.str.split("\n"))
    lines = lines.filter((lines.values.str.strip_chars() != "").to_numpy())
    ends = "(?:" + "|".join(re.escape(c) for c in stops) + ")$"
    punct = lines.values.str.contains(ends).to_numpy()
    short_lines = (lines.values.str.len_chars() <= short).to_numpy()
    return {
        "n_lines": count_per_doc(lines.doc, len(texts)).tolist(),
        "n_punct": count_per_doc(lines.doc, len(texts), punct).tolist(),
        "n_short": count_per_doc(lines.doc, len(texts), short_lines).tolist(),
        "dup_chars": find_duplicates(lines, len(texts))["dup_chars"].tolist(),
    }


def assert_fineweb_line_counts(texts: list[str], stops=TERMINAL_PUNCTUATION, short: int = 3):
    got = fineweb_line_counts(pl.Series(texts, dtype=pl.Utf8), stops, short)
    expected = reference_fineweb_line_counts(texts, stops, short)
    for name, values in expected.items():
        differing = [i for i, (g, e) in enumerate(zip(got[name], values, strict=True)) if g != e]
        assert not differing, (name, [texts[i] for i in differing[:3]])


@pytest.mark.parametrize(
    "stops",
    [TERMINAL_PUNCTUATION, ["...", "…", ".", "日本", "\r", "x" * 9], ["", "a"], []],
    ids=["fineweb", "strings", "empty string", "none"],
)
def test_fineweb_line_counts_are_the_regexes(stops):
    assert_fineweb_line_counts(LINE_CASES, stops)
    rng = random.Random(13)
    texts = ["".join(rng.choices(LINE_TRICKY, k=rng.randrange(0, 60))) for _ in range(5000)]
    assert_fineweb_line_counts(texts, stops)


def test_fineweb_line_counts_of_every_whitespace_and_terminal_character_are_the_regexes():
    every = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    odd = [c for c in every if c.isspace() or c in TERMINAL_PUNCTUATION or not c.isprintable()]
    texts = [f"{c}\n{c}a{c}\n{c}\na{c}\n{c}{c}\n{c}" for c in odd[:5000]]
    assert_fineweb_line_counts(texts)
    assert_fineweb_line_counts(texts, short=1)


def test_null_and_sliced_texts_count_no_fineweb_lines_and_theirs():
    text = pl.Series(["x\nx", None, "a.\n\na.\n b", ""])
    counts = fineweb_line_counts(text.slice(1, 3), TERMINAL_PUNCTUATION, 2)
    assert {k: v.tolist() for k, v in counts.items()} == {
        "n_lines": [0, 3, 0],
        "n_punct": [0, 2, 0],
        "n_short": [0, 3, 0],
        "dup_chars": [0, 2, 0],
    }
