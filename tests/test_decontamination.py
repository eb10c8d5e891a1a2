"""Benchmark decontamination: normalized words and their n-grams (compiled), evaluation sets
read and indexed once per version, and a recipe's documents dropped or cut where they share an
n-gram with an item."""

import gzip
import json
import random

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmill.decontamination.index import SetIndex, declared_versions, set_table
from tokenmill.decontamination.removal import Decontamination, decontaminate
from tokenmill.decontamination.sets import EvalSet, EvalSetError, read_items, sha256_of
from tokenmill.recipes.catalog import Catalog
from tokenmill.recipes.recipe import Recipe
from tokenmill.runtime.stage import Work
from tokenmill.stages import eval_index
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import EVAL_INDEX
from tokenmill.storage.locations import PathNotAllowedError
from tokenmill.text.ngrams import (
    MARK,
    SINGLE,
    WORD,
    NgramTable,
    character_classes,
    fold_table,
    text_words,
    word_ngrams,
)

QUESTION = (
    "Which planet in the solar system has the longest day measured against its own year, "
    "and why does it rotate backwards?"
)
ANSWER = "Venus: a sidereal day there lasts longer than its orbit around the Sun."


def words(text: str) -> list[int]:
    return text_words([text]).hashes.tolist()


# -- normalized words -------------------------------------------------------------------------


def test_case_punctuation_width_and_line_wrapping_fold_away():
    plain = words("the quick brown fox jumps over the lazy dog")
    assert len(plain) == 9
    for variant in (
        "THE QUICK Brown fox, jumps -- over the lazy dog!",
        "the\nquick\tbrown   fox\r\njumps over\n\nthe lazy dog.",
        "“The” quick‐brown fox; jumps: over (the) lazy dog…",
        "ｔｈｅ ｑｕｉｃｋ brown fox jumps over the lazy dog",  # full width
    ):
        assert words(variant) == plain, variant
    assert words("the quick brown fax jumps over the lazy dog") != plain


def test_unspaced_scripts_are_one_word_per_character_with_its_marks():
    found = text_words(["東京タワー is 333m", "ภาษาไทย", "ก่อน"], offsets=True)
    assert found.counts.tolist() == [7, 7, 3]
    first = found.counts[0]
    assert list(zip(found.starts[:first], found.ends[:first], strict=True)) == [
        (0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (6, 8), (9, 13),
    ]  # fmt: skip
    # "ก่อน": ก with its tone mark, then อ, then น
    last = found.counts[:2].sum()
    assert found.starts[last:].tolist() == [0, 2, 3]


def reference_words(text: str) -> tuple[list[int], list[int], list[int]]:
    """The rule of ngrams.c, read character by character in Python."""
    classes, fold = character_classes(), fold_table()
    hashes, starts, ends = [], [], []
    current, single = None, False
    for position, char in enumerate(text):
        kind = classes[ord(char)]
        begins = bool(kind & WORD) and (
            bool(kind & SINGLE) or current is None or (single and not kind & MARK)
        )
        if current is not None and (not kind & WORD or begins):
            hashes.append(current)
            ends.append(position)
            current = None
        if not kind & WORD:
            continue
        if begins:
            current, single = 14695981039346656037, bool(kind & SINGLE)
            starts.append(position)
        for byte in int(fold[ord(char)]).to_bytes(4, "little"):
            current = ((current ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    if current is not None:
        hashes.append(current)
        ends.append(len(text))
    return hashes, starts, ends


def test_compiled_words_follow_the_rule_on_random_text():
    palette = list("abcXYZ019 ,.;'-_\n\tÄäßİ") + list("東京タワーカナ") + list("กขัุ่") + ["é", "é"]
    palette += ["ﬁ", "①", "Ｗ", "\u0301", "😀", "日本語"]
    rng = random.Random(7)
    texts = ["".join(rng.choice(palette) for _ in range(rng.randint(0, 60))) for _ in range(400)]
    found = text_words(texts, offsets=True)
    first = 0
    for text, count in zip(texts, found.counts, strict=True):
        hashes, starts, ends = reference_words(text)
        assert found.hashes[first : first + count].tolist() == hashes, text
        assert found.starts[first : first + count].tolist() == starts, text
        assert found.ends[first : first + count].tolist() == ends, text
        first += count


@pytest.mark.parametrize("size", [10, 300_000])
def test_the_table_finds_exactly_the_ngrams_it_holds(size):
    """Against a Python set of word tuples: small tables and ones whose bitmap outgrows the
    caches find the same."""
    rng = random.Random(size)
    vocabulary = [f"w{i}" for i in range(50)]
    items = [" ".join(rng.choice(vocabulary) for _ in range(20)) for _ in range(max(size // 8, 2))]
    n = 4
    item_words = text_words(items)
    grams, _ = word_ngrams(item_words.hashes, item_words.counts, n)
    table = NgramTable(grams, n)
    held = set()
    for item in items:
        tokens = item.split()
        held |= {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}
    docs = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 30))) for _ in range(300)]
    matches = table.find(docs)
    found = set(zip(matches.doc.tolist(), matches.word.tolist(), strict=True))
    expected = {
        (d, i)
        for d, doc in enumerate(docs)
        for i in range(len(doc.split()) - n + 1)
        if tuple(doc.split()[i : i + n]) in held
    }
    assert found == expected
    assert np.all(table.sorted[matches.entry] == grams[table.order[matches.entry]])


# -- evaluation sets ----------------------------------------------------------------------------


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake.from_url(str(tmp_path / "lake"))


def qa_items(count: int = 20) -> list[dict]:
    return [
        {"id": f"q{i}", "question": f"{QUESTION} Case {i}.", "choices": ["Venus", "Mars"]}
        for i in range(count)
    ]


def test_sets_are_read_from_jsonl_gzip_parquet_and_text(lake, tmp_path):
    rows = qa_items(3)
    lake.write_bytes("eval/a.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
    lake.write_bytes("eval/a.jsonl.gz", gzip.compress(lake.read_bytes("eval/a.jsonl")))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    lake.write_bytes("eval/a.parquet", sink.getvalue().to_pybytes())
    lake.write_bytes("eval/a.txt", "\n".join(r["question"] for r in rows).encode())
    fields = {"fields": ["question", "choices"], "id_field": "id"}
    for path in ("eval/a.jsonl", "eval/a.jsonl.gz", "eval/a.parquet"):
        evalset = EvalSet.parse({"name": "qa", "path": path, **fields}, "test")
        ids, texts = next(read_items(lake, evalset))
        assert ids == ["q0", "q1", "q2"]
        assert texts[1] == f"{QUESTION} Case 1.\nVenus\nMars"
    ids, texts = next(read_items(lake, EvalSet.parse({"name": "t", "path": "eval/a.txt"}, "t")))
    assert ids == ["0", "1", "2"] and texts[2] == f"{QUESTION} Case 2."


def test_a_bad_set_fails_naming_its_file_and_why(lake, tmp_path, monkeypatch):
    lake.write_bytes("eval/bad.jsonl", b'{"text": "fine"}\n{not json\n')
    bad = EvalSet.parse({"name": "bad", "path": "eval/bad.jsonl"}, "t")
    with pytest.raises(EvalSetError, match=r"eval/bad.jsonl' line 2 is not JSON"):
        list(read_items(lake, bad))
    lake.write_bytes("eval/other.jsonl", b'{"prompt": "a question"}\n')
    other = EvalSet.parse({"name": "other", "path": "eval/other.jsonl"}, "t")
    with pytest.raises(EvalSetError, match=r"no item of 'eval/other.jsonl' has the fields"):
        list(read_items(lake, other))
    missing = EvalSet.parse({"name": "gone", "path": "eval/gone.jsonl"}, "t")
    with pytest.raises(EvalSetError, match="gone.jsonl' cannot be read"):
        sha256_of(lake, missing)
    pinned = EvalSet.parse({"name": "p", "path": "eval/other.jsonl", "sha256": "0" * 64}, "t")
    with pytest.raises(EvalSetError, match="not the pinned"):
        sha256_of(lake, pinned)
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"text": "x"}\n')
    monkeypatch.delenv("TOKENMILL_EVAL_PATHS", raising=False)
    elsewhere = EvalSet.parse({"name": "o", "path": str(outside)}, "t")
    with pytest.raises(PathNotAllowedError, match="TOKENMILL_EVAL_PATHS"):
        sha256_of(lake, elsewhere)
    monkeypatch.setenv("TOKENMILL_EVAL_PATHS", str(tmp_path))
    assert len(sha256_of(lake, elsewhere)) == 64
    with pytest.raises(ValueError, match=r"suffix of 'eval/x.csv' is none of"):
        EvalSet.parse({"name": "c", "path": "eval/x.csv"}, "evaluation.sets[0]")


def index_sets(lake: Lake, *sets: dict) -> dict:
    settings = eval_index.EvaluationSettings(sets=list(sets))
    return eval_index.run(Work(lake=lake, stage=EVAL_INDEX, settings=settings)).counts["sets"]


def test_each_version_of_a_set_is_indexed_once(lake):
    lake.write_bytes("eval/qa.jsonl", "".join(json.dumps(r) + "\n" for r in qa_items()).encode())
    declared = {"name": "qa", "path": "eval/qa.jsonl", "fields": ["question"], "id_field": "id"}
    first = index_sets(lake, declared)["qa"]
    assert first["items"] == 20 and first["words"] > 20 * 20
    made = lake.list(f"eval_sets/{first['sha256']}")
    stamps = {key: lake.read_bytes(key) for key in made}
    assert index_sets(lake, declared)["qa"] == first  # the same file: nothing built again
    assert {key: lake.read_bytes(key) for key in made} == stamps
    lake.write_bytes("eval/qa.jsonl", "".join(json.dumps(r) + "\n" for r in qa_items(5)).encode())
    second = index_sets(lake, declared)["qa"]
    assert second["sha256"] != first["sha256"] and second["items"] == 5
    assert declared_versions(lake)["qa"]["sha256"] == second["sha256"]
    index = SetIndex.read(lake, "qa", second["sha256"])
    assert index.ids == [f"q{i}" for i in range(5)]
    assert index.item_words(3).tolist() == words(f"{QUESTION} Case 3.")


# -- removal ------------------------------------------------------------------------------------


FILLER = " ".join(
    f"Paragraph {i} is ordinary web text about gardens and trains." for i in range(30)
)


PASSAGE = f"{QUESTION} Case 4."
PLANTED = {
    "exact": PASSAGE,
    "recased": PASSAGE.upper(),
    "repunctuated": PASSAGE.replace(",", ";").replace(" ", " - "),
    "rewrapped": PASSAGE.replace(" ", "\n", 6),
}


def planted_docs() -> pl.DataFrame:
    texts = {name: f"{FILLER}\n{passage}\n{FILLER}" for name, passage in PLANTED.items()}
    texts["short"] = PASSAGE
    texts["clean"] = FILLER + " Which planet in the solar system has the longest day? Mars."
    return pl.DataFrame(
        {
            "doc_id": list(texts),
            "url": [f"https://x/{k}" for k in texts],
            "text": list(texts.values()),
        }
    )


@pytest.fixture
def table(lake):
    lake.write_bytes("eval/qa.jsonl", "".join(json.dumps(r) + "\n" for r in qa_items()).encode())
    sets = index_sets(
        lake, {"name": "qa", "path": "eval/qa.jsonl", "fields": ["question"], "id_field": "id"}
    )
    return set_table(lake, {"qa": sets["qa"]["sha256"]}, 13)


def test_drop_removes_every_planted_passage_and_nothing_else(table):
    docs = planted_docs()
    outcome = decontaminate(docs, table, Decontamination(sets=("qa",), action="drop"))
    assert outcome.kept["doc_id"].to_list() == ["clean"]
    assert sorted(outcome.dropped["doc_id"]) == sorted(set(docs["doc_id"]) - {"clean"})
    assert all(
        reason.startswith("shares 13-grams with qa item") for reason in outcome.dropped["reason"]
    )
    assert outcome.dropped["filter"].unique().to_list() == ["decontaminate"]
    assert {p["doc_id"] for p in outcome.passages} == set(outcome.dropped["doc_id"])
    # every case planted case 4, whose first 13 words every item shares: one passage per doc,
    # attributed to the first item holding them
    counts = outcome.counts["qa"]
    assert counts["documents"] == counts["removed_documents"] == 5
    assert counts["chars"] == sum(len(t) for t in docs.filter(pl.col("doc_id") != "clean")["text"])


def test_cut_removes_the_passage_and_its_window_and_keeps_the_rest(table):
    docs = planted_docs()
    settings = Decontamination(sets=("qa",), action="cut", window=20, min_chars=200)
    outcome = decontaminate(docs, table, settings)
    kept = dict(zip(outcome.kept["doc_id"], outcome.kept["text"], strict=True))
    assert outcome.dropped["doc_id"].to_list() == ["short"]
    assert "after cutting" in outcome.dropped["reason"][0]
    assert kept["clean"] == docs["text"][-1]
    for name, passage in PLANTED.items():
        assert "solar" not in kept[name].lower()
        assert kept[name].startswith("Paragraph 0 is ordinary")
        assert kept[name].endswith("gardens and trains.")
        original = docs.filter(pl.col("doc_id") == name)["text"][0]
        # the passage up to its last shared word ("Case", before " 4."), the window each side
        assert len(passage) - 3 + 2 * 20 <= len(original) - len(kept[name]) + 1
        assert len(original) - len(kept[name]) <= len(passage) + 2 * 20 + 2
    exact = next(p for p in outcome.passages if p["doc_id"] == "exact")
    assert docs["text"][0][exact["start"] : exact["end"]].startswith("Which planet")
    assert (
        exact["ngram"]
        == "Which planet in the solar system has the longest day measured against its"
    )


def test_a_hash_that_is_not_a_shared_ngram_removes_nothing(table):
    """A candidate is confirmed word by word against its item: an entry whose hash a document
    matches but whose words differ (as a 64-bit collision would) is not a match."""
    docs = planted_docs().filter(pl.col("doc_id") == "exact")
    matches = table.table.find(docs["text"])
    assert len(matches.doc)
    for index in table.sets:
        index.words[:] = index.words + np.uint64(1)  # the items' words no longer the document's
    outcome = decontaminate(docs, table, Decontamination(sets=("qa",)))
    assert outcome.kept.height == 1 and not outcome.passages


def test_settings_and_recipes_are_checked():
    with pytest.raises(ValueError, match=r"clean.decontaminate.action: one of"):
        Decontamination.parse({"sets": ["qa"], "action": "delete"})
    with pytest.raises(ValueError, match=r"clean.decontaminate.ngram: an integer >= 1"):
        Decontamination.parse({"sets": ["qa"], "ngram": 0})
    with pytest.raises(ValueError, match=r"unknown keys \['n'\]"):
        Decontamination.parse({"sets": ["qa"], "n": 8})
    shared = Recipe(
        {"evaluation": {"sets": [{"name": "qa", "path": "eval/qa.jsonl"}]}}, "shared.yaml"
    )
    good = Recipe({"clean": {"decontaminate": {"sets": ["qa"]}}}, "good.yaml", "good")
    bad = Recipe({"clean": {"decontaminate": {"sets": ["mmlu"]}}}, "bad.yaml", "bad")
    catalog = Catalog.of([good, bad], shared)
    assert catalog.names == ["good"]
    assert (
        "['mmlu'] are not declared in the shared settings' evaluation section"
        in catalog.problems[0]
    )
