"""Language identification backends on generated text in the demo crawl's languages."""

from __future__ import annotations

import pytest

from tokenmill.demo import FOREIGN_LOCALES, sample_articles
from tokenmill.language import BACKENDS, DEFAULT_BACKEND, identifier, identify

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
