"""The three dedup stages on a temporary lake: signatures per file of a unit, clusters per
crawl, the deduplicated unit; and, in Dagster, that a new unit makes its crawl's dedup outputs
stale."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasketch import MinHashLSH

from testkit.datasets import key, node, recipe_lake
from testkit.in_memory_clusters import jaccard
from tokenmill.crawl.units import registered_units, write_batch
from tokenmill.dedup.settings import CLUSTERS_FILE, DedupSettings
from tokenmill.demo import crawl as demo
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    CLEANED,
    DEDUP_CLUSTERS,
    DEDUP_SIGNATURES,
    DEDUPLICATED,
    DOC_SCHEMA,
    LANDING,
    MARKER,
    QUALITY_COLUMN,
    Unit,
    crawl_prefix,
    unit_name,
)
from tokenmill.storage.outputs import MissingInputError, PartitionWriter, StageReport, combine

CRAWL = "CC-MAIN-TEST-2026-01"
QUALITY_SCHEMA = DOC_SCHEMA.append(pa.field(QUALITY_COLUMN, pa.float64()))


def doc(doc_id: str, text: str, date: str = "2026-01-15T00:00:00Z", **extra) -> dict:
    return {"doc_id": doc_id, "text": text, "warc_date": date, "language": "en"} | extra


def write_unit(lake: Lake, unit: Unit, docs: list[dict], schema: pa.Schema = DOC_SCHEMA):
    """A registered unit of one file whose cleaned part holds ``docs``."""
    files = [f"{LANDING}/{unit.crawl}/{unit.name}.warc.gz"]
    assert write_batch(lake, unit.crawl, int(unit.name), [files]) == [unit]
    rows = [{"crawl": unit.crawl, "unit": unit.name, "part": 0} | d for d in docs]
    report = StageReport()
    with PartitionWriter(lake, unit.part_prefix(CLEANED, 0), report) as out:
        out.parquet("docs.parquet", schema).write_table(pa.Table.from_pylist(rows, schema))
    total = combine({"00000": report})
    total.counts["files"] = 1
    lake.write_json(f"{unit.prefix(CLEANED)}/{MARKER}", total.summary())


def write_crawl(lake: Lake, units: list[list[dict]], crawl: str = CRAWL, **kw) -> list[Unit]:
    result = [Unit(crawl, unit_name(i)) for i in range(len(units))]
    for unit, docs in zip(result, units, strict=True):
        write_unit(lake, unit, docs, **kw)
    return result


def sign(lake: Lake, unit: Unit, settings: DedupSettings | None = None):
    run_stage_work(stage_named(DEDUP_SIGNATURES), lake, settings, unit=unit, workers=1)


def cluster_crawl(lake: Lake, settings: DedupSettings | None = None, crawl: str = CRAWL):
    run_stage_work(stage_named(DEDUP_CLUSTERS), lake, settings, crawl=crawl)


def run_dedup(lake: Lake, settings: DedupSettings | None = None, crawl: str = CRAWL):
    settings = settings or DedupSettings()
    units = registered_units(lake, crawl)
    for unit in units:
        sign(lake, unit, settings)
    cluster_crawl(lake, settings, crawl)
    for unit in units:
        run_stage_work(stage_named(DEDUPLICATED), lake, unit=unit, workers=1)


def read(lake: Lake, key: str) -> list[dict]:
    with lake.open_input(key) as f:
        return pq.read_table(f).to_pylist()


def clusters(lake: Lake, crawl: str = CRAWL) -> dict[str, dict]:
    return {
        row["doc_id"]: row
        for row in read(lake, f"{crawl_prefix(DEDUP_CLUSTERS, crawl)}/{CLUSTERS_FILE}")
    }


def kept_ids(lake: Lake, unit: Unit) -> list[str]:
    return [
        row["doc_id"] for row in read(lake, f"{unit.part_prefix(DEDUPLICATED, 0)}/docs.parquet")
    ]


def near_copy(article: demo.Article, seed: int) -> str:
    rng = random.Random(seed)
    prose = demo.english_prose(rng, demo._seeded_faker("en_US", seed))
    copy, similarity = demo.near_duplicate(article, prose, rng)
    assert similarity >= demo.MIN_NEAR_DUP_JACCARD
    return copy.text


def test_exact_and_near_duplicates_are_removed_with_their_lineage(lake, articles):
    a, b, c, d = (article.text for article in articles[:4])
    units = write_crawl(
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
    assert removed["b3"]["unit"] == "00002" and removed["b3"]["survivor_unit"] == "00000"
    assert removed["b3"]["part"] == 0
    assert [kept_ids(lake, u) for u in units] == [["a", "b", "c"], [], ["d"]]

    lineage = read(lake, f"{units[2].part_prefix(DEDUPLICATED, 0)}/removed.parquet")
    assert [(r["doc_id"], r["cluster_id"], r["survivor_doc_id"]) for r in lineage] == [
        ("a3", "a", "a"),
        ("b3", "b", "b"),
    ]
    summary = lake.read_json(f"{crawl_prefix(DEDUP_CLUSTERS, CRAWL)}/_SUCCESS.json")
    assert summary["dropped"] == {"exact_duplicate": 2, "near_duplicate": 2}
    assert summary["records_in"] == 8 and summary["records_out"] == 4


def test_unrelated_documents_all_survive(lake, articles):
    units = write_crawl(lake, [[doc(f"x{i}", a.text) for i, a in enumerate(articles)]])
    run_dedup(lake)
    assert clusters(lake) == {}
    assert len(kept_ids(lake, units[0])) == len(articles)


def test_documents_without_words_are_not_duplicates_of_each_other(lake, articles):
    write_crawl(lake, [[doc("e1", ""), doc("e2", " ... "), doc("a", articles[0].text)]])
    run_dedup(lake)
    assert clusters(lake) == {}
    marker = lake.read_json(f"{Unit(CRAWL, '00000').prefix(DEDUP_SIGNATURES)}/_SUCCESS.json")
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
    marker = lake.read_json(f"{Unit(CRAWL, '00000').prefix(DEDUP_SIGNATURES)}/_SUCCESS.json")
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
    stages = (DEDUP_SIGNATURES, DEDUP_CLUSTERS, DEDUPLICATED)

    def outputs() -> dict[str, bytes]:
        keys = [k for stage in stages for k in lake.list(stage) if not k.endswith(".json")]
        return {key: lake.read_bytes(key) for key in keys}

    run_dedup(lake, DedupSettings(survivor="earliest_date"))
    first = outputs()
    assert len(first) == 2 + 1 + 4
    run_dedup(lake, DedupSettings(survivor="earliest_date"))
    assert outputs() == first


def test_adding_a_unit_changes_the_clusters(lake, articles):
    texts = [a.text for a in articles]
    write_crawl(lake, [[doc("a", texts[0]), doc("b", texts[1])], [doc("c", texts[2])]])
    run_dedup(lake)
    assert clusters(lake) == {}

    new_unit = Unit(CRAWL, unit_name(2))
    write_unit(lake, new_unit, [doc("c2", near_copy(articles[2], 6)), doc("b2", texts[1])])
    with pytest.raises(MissingInputError, match="00002"):
        cluster_crawl(lake)  # its signatures are not there yet
    run_dedup(lake)
    removed = clusters(lake)
    assert {k: v["survivor_doc_id"] for k, v in removed.items()} == {"c2": "c", "b2": "b"}
    assert kept_ids(lake, new_unit) == []


def test_threshold_chooses_datasketch_bands_and_rows(lake, articles):
    settings = DedupSettings(threshold=0.7)
    lsh = MinHashLSH(threshold=0.7, num_perm=112)
    assert settings.banding() == (lsh.b, lsh.r)
    (unit,) = write_crawl(lake, [[doc("a", articles[0].text)]])
    sign(lake, unit, settings)
    marker = lake.read_json(f"{unit.prefix(DEDUP_SIGNATURES)}/_SUCCESS.json")
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


def test_units_signed_with_different_parameters_are_refused(lake, articles):
    first, second = write_crawl(lake, [[doc("a", articles[0].text)], [doc("b", articles[1].text)]])
    sign(lake, first, DedupSettings())
    sign(lake, second, DedupSettings(bands=10, rows=10))
    with pytest.raises(ValueError, match="different parameters"):
        cluster_crawl(lake)


def test_unknown_survivor_rule_is_refused():
    with pytest.raises(ValueError, match="survivor"):
        DedupSettings(survivor="newest")


# --- quality on ground truth: documents edited to known word-5-gram Jaccard similarities -------


def substitute_words(text: str, every: int, rng: random.Random, vocabulary: list[str]) -> str:
    """Replace one word in each run of about ``every`` words."""
    words = text.split(" ")
    for start in range(0, len(words), every):
        words[rng.randrange(start, min(start + every, len(words)))] = rng.choice(vocabulary)
    return " ".join(words)


@pytest.mark.parametrize("scheme", ["affine64", "datatrove"])
def test_ground_truth_recall_and_false_merges(lake, scheme):
    """Pairs (original, edited copy) spread over J = 0..1, in separate units, through the stages:
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


# --- Dagster: a new unit makes its crawl's clusters stale, and re-clustering the units it affects


def dagster_defs(lake: Lake):
    from tokenmill.resources.lake import LakeResource
    from tokenmill.resources.workers import WorkersResource

    from tokenmill.definitions import build_definitions

    return build_definitions(LakeResource(url=lake.url), workers=WorkersResource(processes=1))


# The earliest copy survives, so a new unit can take a cluster over from an existing one.
EARLIEST = {"ops": {node(DEDUP_CLUSTERS): {"config": {"survivor": "earliest_date"}}}}
EARLY = "2026-01-01T00:00:00Z"


class DagsterLake:
    """Runs of the stage jobs on a test instance, and the stale status of their partitions."""

    def __init__(self, lake: Lake, instance):
        self.lake, self.instance, self.defs = lake, instance, dagster_defs(lake)

    def run(self, stage: str, partition: str, config: dict | None = None) -> None:
        result = self.defs.resolve_job_def(f"run_{stage}").execute_in_process(
            instance=self.instance, partition_key=partition, run_config=config or {}
        )
        assert result.success

    def report(self, stage: str, unit: Unit) -> None:
        from dagster import AssetMaterialization

        done = AssetMaterialization(key(stage), partition=unit.key)
        self.instance.report_runless_asset_event(done)

    def reports(self, partition: str) -> int:
        """How many times `unit_duplicates` of a unit was reported."""
        from dagster import AssetRecordsFilter

        records = self.instance.fetch_observations(
            AssetRecordsFilter(asset_key=key("unit_duplicates"), asset_partitions=[partition]),
            limit=100,
        ).records
        return len(records)

    def resolver(self):
        from dagster._core.definitions.data_version import CachingStaleStatusResolver
        from dagster._core.loader import LoadingContextForTest

        # A fresh one each time: it caches what it has read from the instance.
        return CachingStaleStatusResolver(
            self.instance, self.defs.resolve_asset_graph(), LoadingContextForTest(self.instance)
        )

    def status(self, asset: str, partition: str):
        return self.resolver().get_status(key(asset), partition)


@pytest.mark.integration
def test_new_unit_makes_its_crawls_dedup_stale_in_dagster(tmp_path, articles):
    from dagster import instance_for_test
    from dagster._core.definitions.data_version import StaleStatus
    from tokenmill.data_assets.partitions import sync_partitions

    lake = recipe_lake(Lake.from_url(str(tmp_path / "lake")))  # as the recipe's stages see it
    other = "CC-MAIN-TEST-2026-02"
    texts = [a.text for a in articles]
    for crawl, offset in ((CRAWL, 0), (other, 4)):
        write_crawl(lake, [[doc("a", texts[offset])], [doc("b", texts[offset + 1])]], crawl=crawl)

    with instance_for_test() as instance:
        dagster = DagsterLake(lake, instance)

        def sign_unit(unit: Unit) -> None:
            # cleaned was written straight to the lake above: tell Dagster, as an import would.
            dagster.report(CLEANED, unit)
            dagster.run(DEDUP_SIGNATURES, unit.key)

        sync_partitions(instance, lake)
        for crawl in (CRAWL, other):
            for unit in registered_units(lake, crawl):
                sign_unit(unit)
            dagster.run(DEDUP_CLUSTERS, crawl, EARLIEST)
            for unit in registered_units(lake, crawl):
                dagster.run(DEDUPLICATED, unit.key)
        units = [u.key for c in (CRAWL, other) for u in registered_units(lake, c)]
        everything = [(DEDUP_CLUSTERS, c) for c in (CRAWL, other)] + [
            (DEDUPLICATED, u) for u in units
        ]
        assert {dagster.status(*item) for item in everything} == {StaleStatus.FRESH}

        # A third unit is registered in CRAWL, with an earlier copy of its doc "a".
        new = Unit(CRAWL, "00002")
        write_unit(lake, new, [doc("a0", texts[0], EARLY)])
        sync_partitions(instance, lake)
        assert dagster.status(DEDUP_CLUSTERS, CRAWL) == StaleStatus.STALE
        assert dagster.status(DEDUP_CLUSTERS, other) == StaleStatus.FRESH

        sign_unit(new)
        dagster.run(DEDUP_CLUSTERS, CRAWL, EARLIEST)
        assert clusters(lake)["a"]["survivor_doc_id"] == "a0"
        assert dagster.status(DEDUP_CLUSTERS, CRAWL) == StaleStatus.FRESH
        # Exactly the units whose removed documents changed: "a" now goes from unit 00000.
        assert dagster.status(DEDUPLICATED, f"{CRAWL}/00000") == StaleStatus.STALE
        assert dagster.status(DEDUPLICATED, f"{CRAWL}/00001") == StaleStatus.FRESH
        for unit in registered_units(lake, other):
            assert dagster.status(DEDUPLICATED, unit.key) == StaleStatus.FRESH
        assert dagster.status(DEDUPLICATED, new.key) == StaleStatus.MISSING
        # Each clustering reported only the units whose removed documents changed.
        assert [dagster.reports(f"{CRAWL}/{name}") for name in ("00000", "00001", "00002")] == [
            2,
            1,
            1,
        ]


@pytest.mark.integration
def test_parallel_steps_cluster_as_one_step_in_dagster(tmp_path, articles):
    """parallel_steps=2: the plan step yields two shares of the parts, two mapped steps compute
    them, the finish step writes the clusters one step writes, to the byte."""
    from dagster import DagsterEventType, instance_for_test
    from tokenmill.data_assets.partitions import sync_partitions
    from tokenmill.resources.step_io import STEP_IO, STEPS

    lake = recipe_lake(Lake.from_url(str(tmp_path / "lake")))  # as the recipe's stages see it
    a, b, c = (article.text for article in articles[:3])
    write_crawl(lake, [[doc("a", a), doc("b", b)], [doc("a2", a), doc("c", c), doc("b2", b)]])
    key = f"{crawl_prefix(DEDUP_CLUSTERS, CRAWL)}/{CLUSTERS_FILE}"
    with instance_for_test() as instance:
        dagster = DagsterLake(lake, instance)
        sync_partitions(instance, lake)
        for unit in registered_units(lake, CRAWL):
            dagster.report(CLEANED, unit)
            dagster.run(DEDUP_SIGNATURES, unit.key)
        dagster.run(DEDUP_CLUSTERS, CRAWL)
        one_step = lake.read_bytes(key)
        result = dagster.defs.resolve_job_def(f"run_{DEDUP_CLUSTERS}").execute_in_process(
            instance=instance,
            partition_key=CRAWL,
            run_config={"ops": {node(DEDUP_CLUSTERS): {"config": {"parallel_steps": 2}}}},
        )
        assert result.success
        steps = {
            e.step_key for e in result.all_events if e.event_type == DagsterEventType.STEP_SUCCESS
        }
        clusters_node = node(DEDUP_CLUSTERS)
        assert sorted(s for s in steps if "_part[" in s) == [
            f"{clusters_node}.{clusters_node}_part[0]",
            f"{clusters_node}.{clusters_node}_part[1]",
        ]
        assert lake.read_bytes(key) == one_step
        [materialization] = result.asset_materializations_for_node(clusters_node)
        metadata = materialization.metadata
        assert metadata["parallel_steps"].value == 2 and metadata["tasks_computed"].value > 15
        assert metadata["records_dropped"].value == 2
        assert "recipe_overrides" not in metadata  # parallel_steps is no setting of the recipe
        # what the steps handed each other went through the lake (two shares, two summaries),
        # deleted by the finish step once spent
        handled = [
            e
            for e in result.all_events
            if e.event_type == DagsterEventType.HANDLED_OUTPUT
            and e.event_specific_data.manager_key == STEP_IO
        ]
        assert len(handled) == 4
        assert lake.list(f"{STEPS}/{result.run_id}") == []


@pytest.mark.integration
def test_a_new_unit_makes_a_crawl_of_over_100_units_stale_in_dagster(tmp_path):
    """Dagster's stale-status resolver ignores dedup_signatures for a crawl of 100+ units; the
    crawl's observed unit list (`crawl_units`) still makes its clusters stale."""
    from dagster import instance_for_test
    from dagster._core.definitions.data_version import StaleStatus
    from tokenmill.data_assets.partitions import crawl_units, sync_partitions, unit_list_changes

    def words(i: int) -> str:
        # Letters for digits: digit runs are normalized away before hashing.
        def spelled(n: int) -> str:
            return "".join(chr(ord("a") + int(d)) for d in str(n))

        return " ".join(f"w{spelled(i)}x{spelled(j)}" for j in range(12))

    lake = recipe_lake(Lake.from_url(str(tmp_path / "lake")))  # as the recipe's stages see it
    other = "CC-MAIN-TEST-2026-02"
    units = write_crawl(lake, [[doc(f"d{i}", words(i))] for i in range(101)])
    units += write_crawl(lake, [[doc("o", words(999))]], crawl=other)

    with instance_for_test() as instance:
        dagster = DagsterLake(lake, instance)

        def sign_unit(unit: Unit) -> None:
            # Cleaned and signed in the lake by the core, then reported: materializing 101
            # units one run each would take minutes. The clusters are materialized for real.
            sign(lake, unit)
            for asset in (CLEANED, DEDUP_SIGNATURES):
                dagster.report(asset, unit)

        def observations() -> int:
            return len(instance.fetch_observations(crawl_units.key, limit=1000).records)

        sync_partitions(instance, lake)
        assert observations() == 2  # one per crawl
        for unit in units:
            sign_unit(unit)
        first, second, other_first = units[0].key, units[1].key, units[-1].key
        for crawl in (CRAWL, other):
            dagster.run(DEDUP_CLUSTERS, crawl, EARLIEST)
        for partition in (first, second, other_first):
            dagster.run(DEDUPLICATED, partition)
        everything = [(DEDUP_CLUSTERS, CRAWL), (DEDUP_CLUSTERS, other)] + [
            (DEDUPLICATED, p) for p in (first, second, other_first)
        ]
        assert {dagster.status(*item) for item in everything} == {StaleStatus.FRESH}
        assert clusters(lake) == {}  # distinct documents

        # Registering again without a new unit observes nothing; the same unit list observed
        # again (a sensor tick repeated after a crash) leaves everything fresh.
        sync_partitions(instance, lake)
        assert observations() == 2
        by_crawl = {c: registered_units(lake, c) for c in (CRAWL, other)}
        assert unit_list_changes(instance, by_crawl) == []
        for record in instance.fetch_observations(crawl_units.key, limit=2).records:
            instance.report_runless_asset_event(record.asset_observation)
        assert {dagster.status(*item) for item in everything} == {StaleStatus.FRESH}

        # Unit 101 is registered (an earlier copy of d0): the crawl's clusters are stale at once.
        new = Unit(CRAWL, unit_name(101))
        write_unit(lake, new, [doc("d0-copy", words(0), EARLY)])
        sync_partitions(instance, lake)
        assert observations() == 5  # 2 first, the 2 repeated, the new list of CRAWL
        assert dagster.status(DEDUP_CLUSTERS, CRAWL) == StaleStatus.STALE
        assert dagster.status(DEDUP_CLUSTERS, other) == StaleStatus.FRESH

        # Once it is signed the unit list is still the only cause the resolver sees: it skips
        # the 102 signatures partitions. The recomputed clusters make the deduplicated unit
        # whose document is now removed stale, and only that one.
        sign_unit(new)
        causes = dagster.resolver().get_stale_causes(key(DEDUP_CLUSTERS), CRAWL)
        assert [c.dependency.asset_key for c in causes] == [crawl_units.key]
        dagster.run(DEDUP_CLUSTERS, CRAWL, EARLIEST)
        assert clusters(lake)["d0"]["survivor_doc_id"] == "d0-copy"
        assert dagster.status(DEDUP_CLUSTERS, CRAWL) == StaleStatus.FRESH
        assert dagster.status(DEDUPLICATED, first) == StaleStatus.STALE
        assert dagster.status(DEDUPLICATED, second) == StaleStatus.FRESH
        assert dagster.status(DEDUPLICATED, other_first) == StaleStatus.FRESH
        assert dagster.status(DEDUP_CLUSTERS, other) == StaleStatus.FRESH
