"""Word segmenters for languages written without spaces between words.

The word scanner (`tokenmill.text.word_scan`) splits on whitespace and punctuation, so a run of
Chinese, Japanese or Thai characters is one "word" to it. `segmenter(language)` gives, for such a
language, a function from a batch of texts to the same texts with ONE ASCII space inserted at every
word boundary a segmenter finds, where neither side is whitespace already; every other character
is kept, in order, so removing the inserted spaces gives the text back. Boundaries are inserted
only where a character of the language's scripts stands on one side: Latin words, numbers and
URLs inside CJK or Thai text stay as the scanner's own rules split them.

- Chinese (zh, and yue, wuu and the other Chinese labels): jieba's dictionary and HMM, through
  rjieba (jieba-rs, the dictionary compiled in), as datatrove splits Chinese (spaCy with jieba).
- Japanese (ja): MeCab with IPADIC (fugashi, ipadic); datatrove uses Sudachi (spaCy), whose
  split mode A gives about as many words.
- Thai (th, and any label written in Thai script): newmm, through nlpo3 (Rust), with PyThaiNLP's
  word list (tokenmill/text/data/words_th.txt.gz), as datatrove splits Thai (PyThaiNLP newmm).
- A label without a dictionary segmenter whose script has no spaces falls back by script:
  Han, Hiragana and Katakana one word per character; Lao, Khmer and Myanmar one word per
  orthographic cluster (a consonant or independent vowel with its marks, stacked consonants
  and pre-posed vowels); Tibetan one word per syllable (split after each tsheg); Ethiopic
  (Amharic, Tigrinya), which may separate its words by the Ethiopic wordspace "፡" in place of
  spaces, a space after each such wordspace.
- Korean is written with spaces between eojeol, a stem and its particles or ending: the common
  particles and endings are split off a Hangul eojeol (`_korean_segmenter`), as a morpheme
  analyser (Kiwi, datatrove's for Korean) splits them, so that Korean's stop words, which are
  such morphemes, are counted; the stems stay whole; a number is a word apart from the Hangul
  written against it ("1993년": "1993 년").

Each segmenter is built once per process (the dictionaries load once) and is meant for one
thread at a time.
"""

from __future__ import annotations

import functools
import gzip
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

Segmenter = Callable[[list[str]], list[str]]
# Changed when a segmenter's words change: MinHash keys made from other words are not lent
# to another recipe (`tokenmill.dedup.signature_reuse`).
SEGMENTATION_VERSION = 2

# Unicode's White_Space property: what the scanner's \s matches.
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)
HAN_RANGES = (
    (0x2E80, 0x2FDF),  # CJK and Kangxi radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3038, 0x303B),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0x20000, 0x323AF),
)
_KANA = ((0x3041, 0x309F), (0x30A0, 0x30FF), (0x31F0, 0x31FF), (0x32D0, 0x32FE), (0xFF66, 0xFF9F))
_BOPOMOFO = ((0x3100, 0x312F), (0x31A0, 0x31BF))
_THAI = ((0x0E01, 0x0E7F),)
_LAO = ((0x0E80, 0x0EFF),)
_KHMER = ((0x1780, 0x17FF), (0x19E0, 0x19FF))
_MYANMAR = ((0x1000, 0x109F), (0xA9E0, 0xA9FF), (0xAA60, 0xAA7F))
_TIBETAN = ((0x0F00, 0x0FFF),)
_ETHIOPIC = ((0x1200, 0x139F), (0x2D80, 0x2DDF), (0xAB00, 0xAB2F), (0x1E7E0, 0x1E7FF))
_WORDSPACE = 0x1361  # ETHIOPIC WORDSPACE

# ISO 15924 codes of the scripts written without spaces between words (Ethiopic: may be).
_SCRIPT_RANGES = {
    "Hani": HAN_RANGES + _BOPOMOFO,
    "Hans": HAN_RANGES + _BOPOMOFO,
    "Hant": HAN_RANGES + _BOPOMOFO,
    "Jpan": HAN_RANGES + _KANA,
    "Hira": _KANA,
    "Kana": _KANA,
    "Hrkt": _KANA,
    "Thai": _THAI,
    "Laoo": _LAO,
    "Khmr": _KHMER,
    "Mymr": _MYANMAR,
    "Tibt": _TIBETAN,
    "Ethi": _ETHIOPIC,
}
# Labels (fastText lid.176's, and ISO 639-3 codes) of languages with a dictionary segmenter.
_DICTIONARY = {
    "zh": "zh",
    "zho": "zh",
    "cmn": "zh",
    "yue": "zh",
    "wuu": "zh",
    "gan": "zh",
    "hak": "zh",
    "ja": "ja",
    "jpn": "ja",
    "th": "th",
    "tha": "th",
}
# Labels whose usual script has no spaces, without a dictionary segmenter of their own.
_DEFAULT_SCRIPT = {
    "lzh": "Hani",
    "lo": "Laoo",
    "lao": "Laoo",
    "km": "Khmr",
    "khm": "Khmr",
    "my": "Mymr",
    "mya": "Mymr",
    "bo": "Tibt",
    "bod": "Tibt",
    "dz": "Tibt",
    "dzo": "Tibt",
    "am": "Ethi",
    "amh": "Ethi",
    "ti": "Ethi",
    "tir": "Ethi",
}
_DICTIONARY_SCRIPT = {"zh": "Hani", "ja": "Jpan", "th": "Thai"}
# A text longer than this goes to the segmenter in pieces (cut at whitespace where there is some):
# MeCab's lattice grows with its input.
_PIECE = 50_000


def segmenter(language: str, script: str | None = None) -> Segmenter | None:
    """The segmenter of a language label ("zh", "ja", "th", ..., or "cmn_Hani"-like with its
    script); None where the language is written with spaces between words (Korean included:
    its eojeol are space-delimited). `script` (ISO 15924) overrides the label's usual script:
    a spaced script gives None, and a label without a dictionary segmenter falls back on the
    script's rule. An unknown label without a script gives None."""
    kind, name = _segmenter_of(language, script)
    if kind == "korean":
        return _korean_segmenter()
    if kind == "dictionary":
        return _dictionary_segmenter(name)
    return _script_segmenter(name) if kind == "script" else None


def splits_below_words(language: str, script: str | None = None) -> bool:
    """Whether the language's segmenter cuts its text finer than its words: the fallback by
    script (characters of Han and Kana, clusters of Lao, Khmer and Myanmar, syllables of
    Tibetan; not Ethiopic's wordspaces)."""
    kind, name = _segmenter_of(language, script)
    return kind == "script" and name != "Ethi"


def _segmenter_of(language: str, script: str | None) -> tuple[str | None, str | None]:
    """Which segmenter ``segmenter`` gives: ("korean", None), ("dictionary", its kind),
    ("script", the script of the fallback) or (None, None)."""
    label, _, suffix = language.replace("-", "_").partition("_")
    label = label.lower()
    script = script or suffix.capitalize() or None
    if label in ("ko", "kor") and script in (None, "Hang", "Kore"):
        return "korean", None
    if script is not None and script not in _SCRIPT_RANGES:
        return None, None
    kind = _DICTIONARY.get(label)
    if kind is None and script == "Thai":
        kind = "th"
    if kind is not None and (script is None or script in _SCRIPTS_OF[kind]):
        return "dictionary", kind
    script = script or _DEFAULT_SCRIPT.get(label)
    return (None, None) if script is None else ("script", _FALLBACK_SCRIPT.get(script, script))


# Particles and endings a Hangul eojeol ends with, longest first: a space goes before one
# that follows a Hangul syllable and ends the eojeol.
_KOREAN_SUFFIXES = (
    "에서는|에게서|으로는|으로서|으로써|에서|에게|으로|부터|까지|처럼|보다|이다|했다|한다|된다|있다"
    "|의|는|은|을|를|이|가|에|로|와|과|도|만|고|다"
)
_KOREAN_SUFFIX = re.compile(
    rf"(?<=[\uac00-\ud7a3]{{2}})({_KOREAN_SUFFIXES})(?=[\s.,!?;:)\]\"'」』]|$)"
)


# A number and the Hangul written against it (a counter, unit or particle after it: "1993년",
# "2.0판", "8월에"; a prefix before it: "제1장"): a morpheme analyser's number (Kiwi's SN) and
# the morphemes beside it are separate words, as English's "1993" and "in" are; one word, every
# number in a Korean text would count as a word with letters.
_KOREAN_NUMBER_EDGE = re.compile(r"(?<=\d)(?=[\uac00-\ud7a3])|(?<=[\uac00-\ud7a3])(?=\d)")


@functools.cache
def _korean_segmenter() -> Segmenter:
    def segment(texts: list[str]) -> list[str]:
        return [_KOREAN_NUMBER_EDGE.sub(" ", _KOREAN_SUFFIX.sub(r" \1", text)) for text in texts]

    return segment


_SCRIPTS_OF = {
    "zh": {"Hani", "Hans", "Hant"},
    "ja": {"Jpan", "Hani", "Hira", "Kana", "Hrkt"},
    "th": {"Thai"},
}
_FALLBACK_SCRIPT = {"Hans": "Hani", "Hant": "Hani", "Hira": "Jpan", "Kana": "Jpan", "Hrkt": "Jpan"}


@functools.cache
def _table(ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    table = np.zeros(0x110000, dtype=bool)
    for first, last in ranges:
        table[first : last + 1] = True
    return table


@functools.cache
def _white_space() -> np.ndarray:
    table = np.zeros(0x110000, dtype=bool)
    table[[ord(c) for c in _WHITE_SPACE]] = True
    return table


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _text(code_points: np.ndarray) -> str:
    return code_points.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")


def _pieces(text: str, limit: int = _PIECE) -> Iterator[str]:
    """`text` in pieces of at most `limit` characters, cut after whitespace where there is some."""
    while len(text) > limit:
        cut = max(text.rfind(c, limit // 2, limit) for c in "\n \t\u3000")
        cut = limit if cut < 0 else cut + 1
        yield text[:cut]
        text = text[cut:]
    if text:
        yield text


def _distinct(ascending: np.ndarray) -> np.ndarray:
    """A non-decreasing array without its repeats."""
    if len(ascending) < 2:
        return ascending
    return ascending[np.concatenate([[True], ascending[1:] != ascending[:-1]])]


class _Batch:
    """A batch of texts as one array of code points, the texts separated by a newline (never a
    boundary), and the insertion of spaces at boundaries."""

    def __init__(self, texts: list[str], in_script: np.ndarray):
        self.texts = texts
        self.joined = _code_points("\n".join(texts))
        self.space = _white_space()[self.joined]
        self.in_script = in_script[self.joined]
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        self.ends = np.cumsum(lengths + 1) - 1  # each text's separator (or the end)

    def boundaries_of_tokens(self, tokens: list[str]) -> np.ndarray | None:
        """Where the tokens (the batch's texts in order, whitespace dropped or kept anywhere) end,
        as positions in the batch; None if their other characters are not the batch's."""
        token_points = _code_points("".join(tokens))
        token_space = _white_space()[token_points]
        kept = np.flatnonzero(~self.space)
        if not np.array_equal(token_points[~token_space], self.joined[kept]):
            return None
        ends = np.cumsum(np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens)))
        ends = ends[ends > 0]
        # non-whitespace characters up to each token's end
        through = np.cumsum(~token_space)[ends - 1]
        through = through[(through > 0) & (through < len(kept))]
        return kept[_distinct(through) - 1] + 1

    def insert(self, positions: np.ndarray) -> list[str]:
        """The texts with a space before each of `positions` that has no whitespace on either
        side and a character of the script on one side at least."""
        joined, space, script = self.joined, self.space, self.in_script
        positions = positions[(positions > 0) & (positions < len(joined))]
        keep = ~space[positions] & ~space[positions - 1]
        keep &= script[positions] | script[positions - 1]
        positions = _distinct(positions[keep])
        if not len(positions):
            return list(self.texts)
        out = _text(np.insert(joined, positions, 32))
        shifted_ends = self.ends + np.searchsorted(positions, self.ends)
        starts = np.concatenate([[0], shifted_ends[:-1] + 1])
        return [out[a:b] for a, b in zip(starts.tolist(), shifted_ends.tolist(), strict=True)]


def _tokens_segmenter(
    tokenize: Callable[[str], Iterable[str]], in_script: np.ndarray, fallback: Segmenter
) -> Segmenter:
    def segment(texts: list[str]) -> list[str]:
        if not texts:
            return []
        batch = _Batch(texts, in_script)
        tokens: list[str] = []
        for text in texts:
            for piece in _pieces(text):
                tokens.extend(tokenize(piece))
            tokens.append("\n")
        positions = batch.boundaries_of_tokens(tokens)
        if positions is None:  # the segmenter changed a character: one text at a time
            if len(texts) == 1:
                return fallback(texts)
            return [out for text in texts for out in segment([text])]
        return batch.insert(positions)

    return segment


@functools.cache
def _dictionary_segmenter(kind: str) -> Segmenter:
    script = _DICTIONARY_SCRIPT[kind]
    in_script = _table(_SCRIPT_RANGES[script])
    fallback = _script_segmenter(script)
    if kind == "zh":
        import rjieba

        return _tokens_segmenter(rjieba.cut, in_script, fallback)
    if kind == "ja":
        import fugashi
        import ipadic

        tagger = fugashi.GenericTagger(ipadic.MECAB_ARGS + " -Owakati")

        def japanese(text: str) -> list[str]:
            return tagger.parse(text).split()

        return _tokens_segmenter(japanese, in_script, fallback)
    if kind == "th":
        import nlpo3

        name = _thai_dictionary()

        def thai(text: str) -> list[str]:
            return nlpo3.segment(text, name)

        return _tokens_segmenter(thai, in_script, fallback)
    raise ValueError(kind)


_THAI_WORDS = Path(__file__).parent / "data" / "words_th.txt.gz"


@functools.cache
def _thai_dictionary() -> str:
    """Loads PyThaiNLP's word list into nlpo3 (which reads a plain file) and returns its name."""
    import nlpo3

    name = "tokenmill-th"
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "words_th.txt")
        with gzip.open(_THAI_WORDS, "rb") as packed, open(path, "wb") as plain:
            plain.write(packed.read())
        message, ok = nlpo3.load_dict(path, name)
    if not ok and "already" not in message.lower():
        raise RuntimeError(f"nlpo3 could not load the Thai word list: {message}")
    return name


# Fallback clusters. Lao, Khmer, Myanmar: a cluster starts at a consonant or independent vowel
# (digits and signs too) unless a stacking sign (Khmer coeng, Myanmar virama) or a pre-posed
# vowel (Lao) stands just before it, or (Myanmar) an asat or stacking sign just after it, or (Lao,
# Khmer) it follows a vowel sign or mark and none follows it (a final consonant); a pre-posed vowel
# starts one itself: roughly syllables. Tibetan: a syllable starts after a tsheg.
_CLUSTER_BASES = {
    "Laoo": ((0x0E81, 0x0EAE), (0x0EBD, 0x0EBD), (0x0EC0, 0x0EC4), (0x0ED0, 0x0EDF)),
    "Khmr": ((0x1780, 0x17B3), (0x17D4, 0x17DA), (0x17DC, 0x17DC), (0x17E0, 0x17F9)),
    "Mymr": ((0x1000, 0x102A), (0x103F, 0x1049), (0x104C, 0x1055), (0x105A, 0x105D)),
}
_CLUSTER_JOINS_NEXT = {  # a character after which no cluster starts
    "Laoo": ((0x0EC0, 0x0EC4),),
    "Khmr": ((0x17D2, 0x17D2),),
    "Mymr": ((0x1039, 0x1039),),
}
_CLUSTER_JOINS_PREVIOUS = {"Mymr": ((0x1039, 0x103A),)}  # a character before which none starts
_TSHEG = (0x0F0B, 0x0F0C)


@functools.cache
def _script_segmenter(script: str) -> Segmenter:
    in_script = _table(_SCRIPT_RANGES[script])

    def starts(batch: _Batch) -> np.ndarray:
        points = batch.joined
        previous = np.concatenate([[10], points[:-1]])
        if script == "Ethi":  # its words are spaced, or separated by the wordspace alone
            return np.flatnonzero(previous == _WORDSPACE)
        following = np.concatenate([points[1:], [10]])
        # a change between the script and another character
        start = batch.in_script != np.concatenate([[False], batch.in_script[:-1]])
        if script in ("Hani", "Jpan"):
            start |= batch.in_script
        elif script == "Tibt":
            start |= batch.in_script & np.isin(previous, _TSHEG)
        elif script in _CLUSTER_BASES:
            cluster = _table(_CLUSTER_BASES[script])[points]
            cluster &= ~_table(_CLUSTER_JOINS_NEXT[script])[previous]
            if script in _CLUSTER_JOINS_PREVIOUS:
                cluster &= ~_table(_CLUSTER_JOINS_PREVIOUS[script])[following]
            else:  # Lao, Khmer: a bare consonant after a vowel sign or mark closes that syllable
                mark = batch.in_script & ~_table(_CLUSTER_BASES[script])[points]
                previous_mark = np.concatenate([[False], mark[:-1]])
                following_mark = np.concatenate([mark[1:], [False]])
                cluster &= ~(previous_mark & ~following_mark)
            start |= cluster
        return np.flatnonzero(start)

    def segment(texts: list[str]) -> list[str]:
        if not texts:
            return []
        batch = _Batch(texts, in_script)
        return batch.insert(starts(batch))

    return segment
