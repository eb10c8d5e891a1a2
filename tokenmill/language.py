"""Offline language identification (py3langid, normalized probabilities)."""

from __future__ import annotations

from functools import cache

from py3langid.langid import MODEL_FILE, LanguageIdentifier

SAMPLE_CHARS = 4000


@cache
def _identifier() -> LanguageIdentifier:
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def identify(text: str) -> tuple[str, float]:
    """ISO 639-1 code and probability of the text's language, judged on its first characters."""
    language, score = _identifier().classify(text[:SAMPLE_CHARS].replace("\n", " "))
    return language, float(score)
