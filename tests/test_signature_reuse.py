"""A second recipe's MinHash keys come from the first recipe's signature files where the
document (id, text, language) and the parameters are the same, and its files are byte for byte
what hashing every document gives."""

from __future__ import annotations

import pyarrow.parquet as pq
from tokenmill.data_assets.datasets import recipe_zones

from tests.test_dedup import doc, near_copy, sign, write_crawl
from tokenmill.dedup import signature_reuse
from tokenmill.dedup.settings import DedupSettings
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import DEDUP_SIGNATURES, MARKER
from tokenmill.text import segmenters

SHORT = "Too short to shingle."


def recipe_docs(articles) -> dict[str, list[dict]]:
    """Recipe "a" keeps docs a-e; "b" drops b, cuts a passage out of c, keeps f (which "a"
    dropped), labels d German, and keeps the short document."""
    texts = [article.text for article in articles[:6]]
    a = [doc(name, text) for name, text in zip("abcde", texts, strict=False)]
    a.append(doc("s", SHORT))
    b = [
        a[0],
        doc("c", texts[2][: len(texts[2]) // 2]),
        doc("d", texts[3], language="de"),
        a[4],
        doc("f", near_copy(articles[0], 3)),
        a[5],
    ]
    return {"a": a, "b": b}


def signatures(lake: Lake, unit) -> bytes:
    return lake.read_bytes(f"{unit.part_prefix(DEDUP_SIGNATURES, 0)}/signatures.parquet")


def reused(lake: Lake, unit) -> int:
    return lake.read_json(f"{unit.part_prefix(DEDUP_SIGNATURES, 0)}/{MARKER}")["counts"][
        "signatures_reused"
    ]


def test_a_recipe_takes_the_keys_of_unchanged_documents_and_writes_the_same_bytes(
    tmp_path, articles
):
    docs = recipe_docs(articles)
    root = Lake.from_url(str(tmp_path / "lake"))
    views = {name: root.with_zones(recipe_zones(name)) for name in docs}
    units = {name: write_crawl(views[name], [docs[name]])[0] for name in docs}
    for name in docs:
        sign(views[name], units[name])
    assert reused(views["a"], units["a"]) == 0
    assert reused(views["b"], units["b"]) == 3  # a, e and the short one
    alone = Lake.from_url(str(tmp_path / "alone"))
    (unit,) = write_crawl(alone, [docs["b"]])
    sign(alone, unit)
    assert reused(alone, unit) == 0
    assert signatures(views["b"], units["b"]) == signatures(alone, unit)
    table = pq.read_table(alone.path(f"{unit.part_prefix(DEDUP_SIGNATURES, 0)}/signatures.parquet"))
    assert table.column("words").to_pylist()[-1] == len(SHORT.split())


def test_other_parameters_lend_nothing(tmp_path, articles):
    docs = recipe_docs(articles)
    root = Lake.from_url(str(tmp_path / "lake"))
    views = {name: root.with_zones(recipe_zones(name)) for name in docs}
    units = {name: write_crawl(views[name], [docs[name]])[0] for name in docs}
    sign(views["a"], units["a"])
    sign(views["b"], units["b"], DedupSettings(ngram=4))
    assert reused(views["b"], units["b"]) == 0


def test_keys_made_from_other_words_lend_nothing(tmp_path, articles, monkeypatch):
    """A signature file made before a segmenter changed (Korean numbers split from their
    counters) holds keys of other words: another recipe hashes its documents again."""
    docs = recipe_docs(articles)
    root = Lake.from_url(str(tmp_path / "lake"))
    views = {name: root.with_zones(recipe_zones(name)) for name in docs}
    units = {name: write_crawl(views[name], [docs[name]])[0] for name in docs}
    with monkeypatch.context() as patched:
        patched.setattr(segmenters, "SEGMENTATION_VERSION", segmenters.SEGMENTATION_VERSION - 1)
        sign(views["a"], units["a"])
    sign(views["b"], units["b"])
    assert reused(views["b"], units["b"]) == 0
    sign(views["a"], units["a"])  # made again with today's words: it lends
    sign(views["b"], units["b"])
    assert reused(views["b"], units["b"]) == 3


def test_a_donor_rewritten_while_it_is_read_lends_nothing(tmp_path, articles, monkeypatch):
    docs = recipe_docs(articles)
    root = Lake.from_url(str(tmp_path / "lake"))
    views = {name: root.with_zones(recipe_zones(name)) for name in docs}
    units = {name: write_crawl(views[name], [docs[name]])[0] for name in docs}
    sign(views["a"], units["a"])
    real = signature_reuse.SignatureDonor.check_unchanged

    def rewritten_meanwhile(donor):
        marker = f"{donor.prefix}/{MARKER}"
        donor.lake.write_json(marker, donor.lake.read_json(marker) | {"records_in": -1})
        real(donor)

    monkeypatch.setattr(signature_reuse.SignatureDonor, "check_unchanged", rewritten_meanwhile)
    sign(views["b"], units["b"])
    assert reused(views["b"], units["b"]) == 0
