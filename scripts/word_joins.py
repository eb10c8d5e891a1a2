"""Writes tokenmill/languages/word_joins.json: the languages whose word tokenizer in FineWeb-2
(datatrove's spaCy tokenizer for the language) keeps a word whole across a hyphen or a middle dot
between letters ("Debian-Installer", "col·lecció"), where tokenmill's scanner, like spaCy's
English tokenizer, splits it. FineWeb-2's thresholds were measured with those words.

A developer runs it (spaCy is a dev dependency), not the build or the pipeline:

    uv run python scripts/word_joins.py
"""

from __future__ import annotations

import json
from pathlib import Path

import spacy

LANGUAGES = Path(__file__).resolve().parents[1] / "tokenmill" / "languages"
# joining character -> (a text, the token spaCy keeps whole when it joins there)
PROBES = {
    "-": ("Debian-Installer und E-Mail", "Debian-Installer"),
    "·": ("col·lecció", "col·lecció"),
}


def joins_of(code: str) -> list[str]:
    try:
        nlp = spacy.blank(code)
    except Exception:  # a language spaCy does not have here: no joins known
        return []
    return [char for char, (text, whole) in PROBES.items() if whole in [t.text for t in nlp(text)]]


def main() -> None:
    entries = json.loads((LANGUAGES / "fineweb2.json").read_text(encoding="utf-8"))["languages"]
    by_code: dict[str, list[str]] = {}
    joins: dict[str, list[str]] = {}
    for label, entry in sorted(entries.items()):
        kind, _, code = (entry.get("word_tokenizer") or "").partition(":")
        if kind != "SpaCyTokenizer" or not code:
            continue
        if code not in by_code:
            by_code[code] = joins_of(code)
        if by_code[code]:
            joins[label] = by_code[code]
    out = {
        "source": f"spaCy {spacy.__version__} blank tokenizers, as FineWeb-2 assigned them",
        "joins": joins,
    }
    path = LANGUAGES / "word_joins.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=0, sort_keys=True) + "\n", "utf-8")
    codes = sorted(code for code, found in by_code.items() if found)
    print(f"{len(joins)} languages join words; spaCy codes: {codes}")


if __name__ == "__main__":
    main()
