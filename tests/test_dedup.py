"""The three dedup stages on a temporary lake: signatures per shard, clusters per crawl, the
deduplicated shard; and, in Dagster, that a new shard makes its crawl's dedup outputs stale."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasketch import MinHashLSH

from demo import crawl as demo
from tokenmill.clean import CLEANED, DOC_SCHEMA
from tokenmill.dedup import (
    CLUSTERS,
    DEDUPLICATED,
    QUALITY_COLUMN,
    SIGNATURES,
    DedupSettings,
    compute_clusters,
    compute_signatures,
    filter_shard,
)
from tokenmill.lake import Lake
from tokenmill.minhash import shingles
from tokenmill.outputs import MissingInputError, PartitionWriter, StageReport
from tokenmill.shards import Shard, crawl_prefix, registered_shards, shard_name

CRAWL = "CC-MAIN-TEST-2026-01"
QUALITY_SCHEMA = DOC_SCHEMA.append(pa.field(QUALITY_COLUMN, pa.float64()))


def doc(doc_id: str, text: str, date: str = "2026-01-15T00:00:00Z", **extra) -> dict:
    return {"doc_id": doc_id, "text": text, "warc_date": date, "language": "en"} | extra


def write_shard(lake: Lake, shard: Shard, docs: list[dict], schema: pa.Schema = DOC_SCHEMA):
    """A registered shard whose cleaned partition holds ``docs``."""
    lake.write_json(shard.manifest_key, {"crawl": shard.crawl, "shard": shard.shard, "files": []})
    rows = [{"crawl": shard.crawl, "shard": shard.shard} | d for d in docs]
    with PartitionWriter(lake, shard.prefix(CLEANED), StageReport()) as out:
        out.parquet("docs.parquet", schema).write_table(pa.Table.from_pylist(rows, schema))


def write_crawl(lake: Lake, shards: list[list[dict]], crawl: str = CRAWL, **kw) -> list[Shard]:
    result = [Shard(crawl, shard_name(i)) for i in range(len(shards))]
    for shard, docs in zip(result, shards, strict=True):
        write_shard(lake, shard, docs, **kw)
    return result


def run_dedup(lake: Lake, settings: DedupSettings | None = None, crawl: str = CRAWL):
    settings = settings or DedupSettings()
    shards = registered_shards(lake, crawl)
    for shard in shards:
        compute_signatures(lake, shard, settings)
    compute_clusters(lake, crawl, settings)
    for shard in shards:
        filter_shard(lake, shard)


def read(lake: Lake, key: str) -> list[dict]:
    with lake.open_input(key) as f:
        return pq.read_table(f).to_pylist()


def clusters(lake: Lake, crawl: str = CRAWL) -> dict[str, dict]:
    return {
        row["doc_id"]: row
        for row in read(lake, f"{crawl_prefix(CLUSTERS, crawl)}/clusters.parquet")
    }


def kept_ids(lake: Lake, shard: Shard) -> list[str]:
    return [row["doc_id"] for row in read(lake, f"{shard.prefix(DEDUPLICATED)}/docs.parquet")]


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake.from_url(str(tmp_path / "lake"))


@pytest.fixture(scope="module")
def articles() -> list[demo.Article]:
    rng = random.Random(7)
    prose = demo.english_prose(rng, demo._seeded_faker("en_US", 7))
    return [demo.english_article(prose, rng) for _ in range(12)]


def near_copy(article: demo.Article, seed: int) -> str:
    rng = random.Random(seed)
    prose = demo.english_prose(rng, demo._seeded_faker("en_US", seed))
    copy, similarity = demo.near_duplicate(article, prose, rng)
    assert similarity >= demo.MIN_NEAR_DUP_JACCARD
    return copy.text


def test_exact_and_near_duplicates_are_removed_with_their_lineage(lake, articles):
    a, b, c, d = (article.text for article in articles[:4])
    shards = write_crawl(
        lake,
        [
            [doc("a", a), doc("b", b), doc("c", c)],
            # "a2" differs from "a" only in case, spacing and punctuation: the same normalized text.
            [
                doc("a2", "  " + a.upper().replace(". ", " ... ")),
                doc("b2", near_copy(articles[1], 1)),
            ],
            [doc("d", d), doc("a3", a), doc("b3", near_copy(articles[1], 2))],
        ],
    )
    run_dedup(lake)

    removed = clusters(lake)
    assert sorted(removed) == ["a2", "a3", "b2", "b3"]
    assert {
        k: (v["reason"], v["cluster_id"], v["survivor_doc_id"]) for k, v in removed.items()
    } == {
        "a2": ("exact_duplicate", "a", "a"),
        "a3": ("exact_duplicate", "a", "a"),
        "b2": ("near_duplicate", "b", "b"),
        "b3": ("near_duplicate", "b", "b"),
    }
    assert removed["b3"]["shard"] == "00002" and removed["b3"]["survivor_shard"] == "00000"
    assert [kept_ids(lake, s) for s in shards] == [["a", "b", "c"], [], ["d"]]

    lineage = read(lake, f"{shards[2].prefix(DEDUPLICATED)}/removed.parquet")
    assert [(r["doc_id"], r["cluster_id"], r["survivor_doc_id"]) for r in lineage] == [
        ("a3", "a", "a"),
        ("b3", "b", "b"),
    ]
    summary = lake.read_json(f"{crawl_prefix(CLUSTERS, CRAWL)}/_SUCCESS.json")
    assert summary["dropped"] == {"exact_duplicate": 2, "near_duplicate": 2}
    assert summary["records_in"] == 8 and summary["records_out"] == 4


def test_unrelated_documents_all_survive(lake, articles):
    shards = write_crawl(lake, [[doc(f"x{i}", a.text) for i, a in enumerate(articles)]])
    run_dedup(lake)
    assert clusters(lake) == {}
    assert len(kept_ids(lake, shards[0])) == len(articles)


def test_documents_without_words_are_not_duplicates_of_each_other(lake, articles):
    write_crawl(lake, [[doc("e1", ""), doc("e2", " ... "), doc("a", articles[0].text)]])
    run_dedup(lake)
    assert clusters(lake) == {}
    marker = lake.read_json(f"{Shard(CRAWL, '00000').prefix(SIGNATURES)}/_SUCCESS.json")
    assert marker["counts"]["docs_without_words"] == 2


@pytest.mark.parametrize(("rule", "removed"), [("exact", {"s2", "s3"}), ("keep", set())])
def test_documents_shorter_than_the_ngram(lake, articles, rule, removed):
    """Fewer than 5 words: no MinHash; removed as exact duplicates only, or never ("keep",
    datatrove's behaviour)."""
    short = [doc("s1", "Page not found"), doc("s2", "Page not found!"), doc("s3", "PAGE NOT FOUND")]
    others = [doc("s4", "Page not found here"), doc("a", articles[0].text)]
    write_crawl(lake, [short + others])
    run_dedup(lake, DedupSettings(short_docs=rule))
    found = clusters(lake)
    assert set(found) == removed
    assert all(row["reason"] == "exact_duplicate" for row in found.values())
    marker = lake.read_json(f"{Shard(CRAWL, '00000').prefix(SIGNATURES)}/_SUCCESS.json")
    assert marker["counts"]["docs_shorter_than_ngram"] == 4
    with pytest.raises(ValueError, match="short_docs"):
        DedupSettings(short_docs="drop")


@pytest.mark.parametrize(("norm_numbers", "removed"), [(True, {"n2"}), (False, set())])
def test_documents_differing_only_in_numbers(lake, articles, norm_numbers, removed):
    """A number after every tenth word: all different between the two, all "0" once normalized."""
    words = articles[0].text.split(" ")

    def numbered(number) -> str:
        return " ".join(f"{w} {number(i)}" if i % 10 == 0 else w for i, w in enumerate(words))

    dated = [doc("n1", numbered(str)), doc("n2", numbered(lambda i: f"{7 * i + 3:,}.5"))]
    write_crawl(lake, [dated])
    run_dedup(lake, DedupSettings(norm_numbers=norm_numbers))
    assert set(clusters(lake)) == removed


def survivor_crawl(lake: Lake, articles, schema: pa.Schema = DOC_SCHEMA):
    """One near-duplicate cluster of four copies that each rule ranks differently."""
    text = articles[0].text
    longer = text + " " + articles[1].text.split("\n")[0]  # the most words
    write_crawl(
        lake,
        [
            [doc("m", near_copy(articles[0], 3), "2026-01-20T00:00:00Z", quality_score=0.2)],
            [doc("z", text, "2026-01-05T00:00:00Z", quality_score=0.1)],
            [doc("k", longer, "2026-01-25T00:00:00Z", quality_score=None)],
            [doc("q", near_copy(articles[0], 4), "2026-01-09T00:00:00Z", quality_score=0.9)],
        ],
        schema=schema,
    )


@pytest.mark.parametrize(
    ("rule", "schema", "survivor"),
    [
        ("first_seen", DOC_SCHEMA, "m"),
        ("earliest_date", DOC_SCHEMA, "z"),
        ("lowest_doc_id", DOC_SCHEMA, "k"),
        ("highest_quality", DOC_SCHEMA, "k"),  # no score column: the most words wins
        ("highest_quality", QUALITY_SCHEMA, "q"),  # the cleaned docs' score; null -> word count
    ],
)
def test_survivor_rules(lake, articles, rule, schema, survivor):
    survivor_crawl(lake, articles, schema)
    run_dedup(lake, DedupSettings(survivor=rule))
    removed = clusters(lake)
    assert sorted(removed) == sorted({"m", "z", "k", "q"} - {survivor})
    assert {row["survivor_doc_id"] for row in removed.values()} == {survivor}
    # The cluster id is the first-seen member whatever the rule.
    assert {row["cluster_id"] for row in removed.values()} == {"m"}


def test_rerun_is_byte_identical(lake, articles):
    texts = [a.text for a in articles]
    write_crawl(
        lake,
        [
            [doc("a", texts[0]), doc("b", texts[1]), doc("c", texts[2])],
            [doc("a2", texts[0]), doc("b2", near_copy(articles[1], 5)), doc("e", texts[4])],
        ],
    )
    stages = (SIGNATURES, CLUSTERS, DEDUPLICATED)

    def outputs() -> dict[str, bytes]:
        keys = [k for stage in stages for k in lake.list(stage) if not k.endswith(".json")]
        return {key: lake.read_bytes(key) for key in keys}

    run_dedup(lake, DedupSettings(survivor="earliest_date"))
    first = outputs()
    assert len(first) == 2 + 1 + 4
    run_dedup(lake, DedupSettings(survivor="earliest_date"))
    assert outputs() == first


def test_adding_a_shard_changes_the_clusters(lake, articles):
    texts = [a.text for a in articles]
    write_crawl(lake, [[doc("a", texts[0]), doc("b", texts[1])], [doc("c", texts[2])]])
    run_dedup(lake)
    assert clusters(lake) == {}

    new_shard = Shard(CRAWL, shard_name(2))
    write_shard(lake, new_shard, [doc("c2", near_copy(articles[2], 6)), doc("b2", texts[1])])
    with pytest.raises(MissingInputError, match="00002"):
        compute_clusters(lake, CRAWL, DedupSettings())  # its signatures are not there yet
    run_dedup(lake)
    removed = clusters(lake)
    assert {k: v["survivor_doc_id"] for k, v in removed.items()} == {"c2": "c", "b2": "b"}
    assert kept_ids(lake, new_shard) == []


def test_threshold_chooses_datasketch_bands_and_rows(lake, articles):
    settings = DedupSettings(threshold=0.7)
    lsh = MinHashLSH(threshold=0.7, num_perm=112)
    assert settings.banding() == (lsh.b, lsh.r)
    (shard,) = write_crawl(lake, [[doc("a", articles[0].text)]])
    compute_signatures(lake, shard, settings)
    marker = lake.read_json(f"{shard.prefix(SIGNATURES)}/_SUCCESS.json")
    assert marker["counts"]["params"] == {
        "ngram": 5,
        "bands": lsh.b,
        "rows": lsh.r,
        "seed": 1,
        "scheme": "affine64",
        "norm_numbers": True,
        "norm_diacritics": True,
        "short_docs": "exact",
    }
    with pytest.raises(ValueError, match="threshold"):
        DedupSettings(threshold=1.5)


def test_shards_signed_with_different_parameters_are_refused(lake, articles):
    first, second = write_crawl(lake, [[doc("a", articles[0].text)], [doc("b", articles[1].text)]])
    compute_signatures(lake, first, DedupSettings())
    compute_signatures(lake, second, DedupSettings(bands=10, rows=10))
    with pytest.raises(ValueError, match="different parameters"):
        compute_clusters(lake, CRAWL, DedupSettings())


def test_unknown_survivor_rule_is_refused():
    with pytest.raises(ValueError, match="survivor"):
        DedupSettings(survivor="newest")


# --- quality on ground truth: documents edited to known word-5-gram Jaccard similarities -------


def jaccard(left: str, right: str) -> float:
    a, b = set(shingles(left)), set(shingles(right))
    return len(a & b) / len(a | b)


def substitute_words(text: str, every: int, rng: random.Random, vocabulary: list[str]) -> str:
    """Replace one word in each run of about ``every`` words."""
    words = text.split(" ")
    for start in range(0, len(words), every):
        words[rng.randrange(start, min(start + every, len(words)))] = rng.choice(vocabulary)
    return " ".join(words)


@pytest.mark.parametrize("scheme", ["affine64", "datatrove"])
def test_ground_truth_recall_and_false_merges(lake, scheme):
    """Pairs (original, edited copy) spread over J = 0..1, in separate shards, through the stages:
    recall >= 0.95 for J >= 0.85, at most 1 % of the pairs with J <= 0.5 merged."""
    rng = random.Random(11)
    originals = demo.sample_articles("en", 700, seed=11)
    vocabulary = sorted({w for text in originals[:50] for w in text.split() if w.isalpha()})
    gaps = [200, 120, 80, 60] * 40 + [30, 20, 15, 12, 10, 8, 6, 5, 4, 3] * 54
    copies = [
        substitute_words(o, g, rng, vocabulary) for o, g in zip(originals, gaps, strict=False)
    ]
    truth = np.array([jaccard(o, c) for o, c in zip(originals, copies, strict=False)])
    write_crawl(
        lake,
        [
            [doc(f"o{i}", text) for i, text in enumerate(originals)],
            [doc(f"c{i}", text) for i, text in enumerate(copies)],
        ],
    )
    run_dedup(lake, DedupSettings(scheme=scheme))
    merged_copies = {k for k, v in clusters(lake).items() if v["survivor_doc_id"] == "o" + k[1:]}
    merged = np.array([f"c{i}" in merged_copies for i in range(len(copies))])

    similar, dissimilar = truth >= 0.85, truth <= 0.5
    assert similar.sum() >= 100 and dissimilar.sum() >= 300, (similar.sum(), dissimilar.sum())
    assert merged[similar].mean() >= 0.95
    assert merged[dissimilar].mean() <= 0.01
    # Originals are distinct articles: none of them is removed.
    assert not any(k.startswith("o") for k in clusters(lake))


# --- Dagster: a new shard makes its crawl's clusters and deduplicated shards stale -------------


def test_new_shard_makes_its_crawls_dedup_stale_in_dagster(tmp_path, articles):
    from dagster import (
        AssetKey,
        AssetMaterialization,
        MultiPartitionKey,
        instance_for_test,
        materialize,
    )
    from dagster._core.definitions.data_version import StaleStatus
    from dagster._utils.test.data_versions import get_stale_status_resolver

    from data_assets import stages
    from resources.lake import LakeResource

    lake = Lake.from_url(str(tmp_path / "lake"))
    other = "CC-MAIN-TEST-2026-02"
    texts = [a.text for a in articles]
    for crawl, offset in ((CRAWL, 0), (other, 4)):
        write_crawl(lake, [[doc("a", texts[offset])], [doc("b", texts[offset + 1])]], crawl=crawl)
    assets = [stages.cleaned, stages.dedup_signatures, stages.dedup_clusters, stages.deduplicated]
    resources = {"lake": LakeResource(url=str(tmp_path / "lake"))}

    def shard_key(crawl: str, shard: str) -> str:
        return str(MultiPartitionKey({"crawl": crawl, "shard": shard}))

    with instance_for_test() as instance:

        def run(asset, partition: str) -> None:
            result = materialize(
                assets,
                selection=[asset],
                partition_key=partition,
                instance=instance,
                resources=resources,
            )
            assert result.success

        def sign(crawl: str, shard: str) -> None:
            # cleaned was written straight to the lake above: tell Dagster, as an import would.
            instance.report_runless_asset_event(
                AssetMaterialization("cleaned", partition=shard_key(crawl, shard))
            )
            run(stages.dedup_signatures, shard_key(crawl, shard))

        def status(asset: str, partition: str) -> StaleStatus:
            # A fresh resolver each time: it caches what it has read from the instance.
            return get_stale_status_resolver(instance, assets).get_status(
                AssetKey(asset), partition
            )

        instance.add_dynamic_partitions("crawls", [CRAWL, other])
        instance.add_dynamic_partitions("shards", ["00000", "00001"])
        for crawl in (CRAWL, other):
            for shard in ("00000", "00001"):
                sign(crawl, shard)
            run(stages.dedup_clusters, crawl)
            for shard in ("00000", "00001"):
                run(stages.deduplicated, shard_key(crawl, shard))
        everything = [("dedup_clusters", c) for c in (CRAWL, other)] + [
            ("deduplicated", shard_key(c, s)) for c in (CRAWL, other) for s in ("00000", "00001")
        ]
        assert {status(*item) for item in everything} == {StaleStatus.FRESH}

        # A third shard arrives in CRAWL (a copy of its doc "a") and is signed.
        write_shard(lake, Shard(CRAWL, "00002"), [doc("a2", texts[0])])
        instance.add_dynamic_partitions("shards", ["00002"])
        sign(CRAWL, "00002")
        assert status("dedup_clusters", CRAWL) == StaleStatus.STALE
        assert status("dedup_clusters", other) == StaleStatus.FRESH

        run(stages.dedup_clusters, CRAWL)
        assert clusters(lake)["a2"]["survivor_doc_id"] == "a"
        assert status("dedup_clusters", CRAWL) == StaleStatus.FRESH
        for shard in ("00000", "00001"):
            assert status("deduplicated", shard_key(CRAWL, shard)) == StaleStatus.STALE
            assert status("deduplicated", shard_key(other, shard)) == StaleStatus.FRESH
        assert status("deduplicated", shard_key(CRAWL, "00002")) == StaleStatus.MISSING


def test_a_new_shard_makes_a_crawl_of_over_100_shards_stale_in_dagster(tmp_path):
    """Dagster's stale-status resolver ignores dedup_signatures for a crawl of 100+ shards; the
    crawl's observed shard list (`crawl_shards`) still makes its clusters stale."""
    from dagster import AssetKey, AssetMaterialization, instance_for_test
    from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
    from dagster._core.loader import LoadingContextForTest

    from data_assets.definitions import build_definitions
    from data_assets.partitions import crawl_shards, shard_key, shard_list_changes, sync_partitions
    from resources.lake import LakeResource

    def words(i: int) -> str:
        return " ".join(f"w{i}x{j}" for j in range(12))

    lake = Lake.from_url(str(tmp_path / "lake"))
    other = "CC-MAIN-TEST-2026-02"
    shards = write_crawl(lake, [[doc(f"d{i}", words(i))] for i in range(101)])
    shards += write_crawl(lake, [[doc("o", words(999))]], crawl=other)
    defs = build_definitions(LakeResource(url=lake.url))

    with instance_for_test() as instance:

        def run(job: str, partition: str) -> None:
            result = defs.resolve_job_def(job).execute_in_process(
                instance=instance, partition_key=partition
            )
            assert result.success

        def sign(shard: Shard) -> None:
            # Cleaned and signed in the lake by the core, then reported: materializing 101
            # shards one run each would take minutes. The clusters are materialized for real.
            compute_signatures(lake, shard, DedupSettings())
            for asset in ("cleaned", "dedup_signatures"):
                instance.report_runless_asset_event(
                    AssetMaterialization(asset, partition=str(shard_key(shard)))
                )

        def resolver() -> CachingStaleStatusResolver:
            # A fresh one each time: it caches what it has read from the instance.
            return CachingStaleStatusResolver(
                instance, defs.resolve_asset_graph(), LoadingContextForTest(instance)
            )

        def status(asset: str, partition: str) -> StaleStatus:
            return resolver().get_status(AssetKey(asset), partition)

        def observations() -> int:
            return len(instance.fetch_observations(crawl_shards.key, limit=1000).records)

        sync_partitions(instance, lake)
        assert observations() == 2  # one per crawl
        for shard in shards:
            sign(shard)
        first, other_first = str(shard_key(shards[0])), str(shard_key(shards[-1]))
        for crawl in (CRAWL, other):
            run("dedup_crawl", crawl)
        for partition in (first, other_first):
            run("dedup_shard", partition)
        everything = [("dedup_clusters", CRAWL), ("dedup_clusters", other)] + [
            ("deduplicated", p) for p in (first, other_first)
        ]
        assert {status(*item) for item in everything} == {StaleStatus.FRESH}

        # Registering again without a new shard observes nothing; the same shard list observed
        # again (a sensor tick repeated after a crash) leaves everything fresh.
        sync_partitions(instance, lake)
        assert observations() == 2
        assert shard_list_changes(instance, lake, [CRAWL, other]) == []
        for record in instance.fetch_observations(crawl_shards.key, limit=2).records:
            instance.report_runless_asset_event(record.asset_observation)
        assert {status(*item) for item in everything} == {StaleStatus.FRESH}

        # Shard 101 is registered (a copy of d0): the crawl's clusters are stale at once.
        new = Shard(CRAWL, shard_name(101))
        write_shard(lake, new, [doc("d0-copy", words(0))])
        sync_partitions(instance, lake)
        assert observations() == 5  # 2 first, the 2 repeated, the new list of CRAWL
        assert status("dedup_clusters", CRAWL) == StaleStatus.STALE
        assert status("dedup_clusters", other) == StaleStatus.FRESH

        # Once it is signed the shard list is still the only cause the resolver sees: it skips
        # the 102 signatures partitions. The recomputed clusters make deduplicated stale.
        sign(new)
        causes = resolver().get_stale_causes(AssetKey("dedup_clusters"), CRAWL)
        assert [c.dependency.asset_key for c in causes] == [crawl_shards.key]
        run("dedup_crawl", CRAWL)
        assert clusters(lake)["d0-copy"]["survivor_doc_id"] == "d0"
        assert status("dedup_clusters", CRAWL) == StaleStatus.FRESH
        assert status("deduplicated", first) == StaleStatus.STALE
        assert status("deduplicated", other_first) == StaleStatus.FRESH
        assert status("dedup_clusters", other) == StaleStatus.FRESH
