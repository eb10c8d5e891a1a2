"""Tokenized shards: the Megatron format read back by the tests' own reader, exact round trips,
the provenance sidecar, `trace`, and tokenizer changes making shards stale in Dagster."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from dagster._core.definitions.data_version import StaleStatus
from tokenizers import Tokenizer, models, pre_tokenizers
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.workers import WorkersResource

from testkit.datasets import node, stale_status
from testkit.demo_pipeline import demo_pipeline
from testkit.formats import read_indexed_dataset, warc_headers_at
from tokenmill.cli.main import main as cli
from tokenmill.crawl.units import write_batch
from tokenmill.definitions import build_definitions
from tokenmill.runtime.parts import run_stage_work
from tokenmill.runtime.stage import Work
from tokenmill.stages import stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    DEDUPLICATED,
    DOC_SCHEMA,
    LANDING,
    MARKER,
    TOKENIZED_SHARDS,
    TOKENIZER,
    Unit,
)
from tokenmill.storage.locations import PathNotAllowedError
from tokenmill.storage.outputs import PartitionWriter, StageReport, combine, read_batches
from tokenmill.tokens.tokenization import (
    TOKENIZER_PATHS_ENV,
    TokenizerSettings,
    TokenizeSettings,
    read_uri,
    tokenize_part,
)

PROJECT_DIR = Path(__file__).resolve().parents[1]
UNIT = Unit("CC-MAIN-TEST", "00000")
SOURCE = f"{LANDING}/{UNIT.crawl}/f.warc.gz"
TEXTS = [
    "Plain English text, with punctuation; and numbers 1,234.5.",
    "Deutsch: Grüße aus Köln — Straße, Maß und Fuß.",
    "日本語のテキストと中文文本，混在しています。",
    "Emoji 🚀🔥 and symbols ∑∫√ and tabs\tand\nnewlines\n\n  indented",
    "",
    "Русский текст: съешь же ещё этих мягких французских булок.",
]


def deduplicated_unit(lake: Lake, texts: list[str]) -> None:
    """A registered unit of one file whose deduplicated part holds ``texts``."""
    assert write_batch(lake, UNIT.crawl, 0, [[SOURCE]]) == [UNIT]
    deduplicated_part(lake, [(f"doc{i:04d}", text) for i, text in enumerate(texts)])


def deduplicated_part(lake: Lake, docs: list[tuple[str, str]]) -> None:
    """The unit's deduplicated part, committed, holding these (doc id, text) documents."""
    rows = [
        {
            "doc_id": doc_id,
            "crawl": UNIT.crawl,
            "unit": UNIT.name,
            "part": 0,
            "source_file": SOURCE,
            "record_id": f"<urn:uuid:{index}>",
            "record_offset": 1000 * index,
            "record_length": 999,
            "url": f"https://example.com/{index}",
            "warc_date": "2026-01-01T00:00:00Z",
            "charset": "utf-8",
            "language": "en",
            "language_score": 0.99,
            "text": text,
        }
        for index, (doc_id, text) in enumerate(docs)
    ]
    report = StageReport()
    with PartitionWriter(lake, UNIT.part_prefix(DEDUPLICATED, 0), report) as out:
        out.parquet("docs.parquet", DOC_SCHEMA).write_table(pa.Table.from_pylist(rows, DOC_SCHEMA))
    total = combine({"00000": report})
    total.counts["files"] = 1
    lake.write_json(f"{UNIT.prefix(DEDUPLICATED)}/{MARKER}", total.summary())


def build_tokenizer(lake: Lake, settings: TokenizerSettings) -> StageReport:
    return run_stage_work(stage_named(TOKENIZER), lake, settings)


def tokenize_unit(lake: Lake, settings: TokenizeSettings | None = None) -> StageReport:
    return run_stage_work(stage_named(TOKENIZED_SHARDS), lake, settings, unit=UNIT, workers=1)


@pytest.mark.parametrize(
    "name, eod", [("gpt-neox-style-50k", "<|endoftext|>"), ("llama-style-32k", "</s>")]
)
def test_real_tokenizers_round_trip_every_document(lake, shared, name, eod, monkeypatch):
    path = shared / "tokenizers" / f"{name}.tokenizer.json"
    monkeypatch.setenv(TOKENIZER_PATHS_ENV, f"/nonexistent,{path.parent}")
    deduplicated_unit(lake, TEXTS)
    build_tokenizer(lake, TokenizerSettings(path=str(path)))
    work = Work(lake, TOKENIZED_SHARDS, unit=UNIT, part=0, file=SOURCE)
    report = tokenize_part(work, batch_docs=2)
    tokenizer = Tokenizer.from_file(str(path))
    docs, sidecar = read_shard(lake)
    assert lake.read_bytes(f"{UNIT.part_prefix(TOKENIZED_SHARDS, 0)}/tokens.idx")[17] == 8  # uint16
    assert len(docs) == len(sidecar) == len(TEXTS) == report.records_out
    position = 0
    for tokens, row, text in zip(docs, sidecar, TEXTS, strict=True):
        assert tokens[-1] == tokenizer.token_to_id(eod)
        assert (row["token_start"], row["token_end"]) == (position, position + len(tokens) - 1)
        assert tokenizer.decode(tokens[:-1], skip_special_tokens=False) == text
        position += len(tokens)
    assert report.counts["tokens"] == position
    assert [r["doc_index"] for r in sidecar] == list(range(len(TEXTS)))
    assert sidecar[3]["url"] == "https://example.com/3" and sidecar[3]["record_offset"] == 3000


def in_the_lake(lake: Lake, tokenizer: Tokenizer, name: str) -> str:
    """A tokenizer file in the lake (no allow-list needed), by its absolute path."""
    lake.write_bytes(f"models/{name}", tokenizer.to_str().encode())
    return lake.path(f"models/{name}")


def test_large_vocabularies_are_written_as_int32(lake):
    vocab = {f"w{i}": i for i in range(70_000)} | {"[UNK]": 70_000, "<|endoftext|>": 70_001}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    deduplicated_unit(lake, ["w1 w69999 w65536", "w0"])
    build_tokenizer(lake, TokenizerSettings(path=in_the_lake(lake, tokenizer, "big.json")))
    tokenize_unit(lake)
    docs, _ = read_shard(lake)
    assert lake.read_bytes(f"{UNIT.part_prefix(TOKENIZED_SHARDS, 0)}/tokens.idx")[17] == 4
    assert docs == [[1, 69_999, 65_536, 70_001], [0, 70_001]]


def test_trained_tokenizer_round_trips_and_eod_is_optional(lake):
    texts = TEXTS * 20
    deduplicated_unit(lake, texts)
    build_tokenizer(lake, TokenizerSettings(vocab_size=400, sample_mb=1))
    tokenize_unit(lake, TokenizeSettings(append_eod=False))
    tokenizer = Tokenizer.from_str(lake.read_bytes("tokenizer/tokenizer.json").decode())
    docs, sidecar = read_shard(lake)
    assert [tokenizer.decode(d) for d in docs] == texts
    assert all(
        r["token_end"] - r["token_start"] == len(d) for r, d in zip(sidecar, docs, strict=True)
    )


def test_a_tokenizer_without_an_end_of_document_token_is_refused(lake):
    tokenizer = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    deduplicated_unit(lake, ["a"])
    build_tokenizer(lake, TokenizerSettings(path=in_the_lake(lake, tokenizer, "no_eod.json")))
    with pytest.raises(ValueError, match="end-of-document"):
        tokenize_unit(lake)


def test_tokenizer_paths_outside_the_lake_and_the_allow_list_are_refused(
    lake, tmp_path, monkeypatch
):
    allowed = tmp_path / "models"
    allowed.mkdir()
    tokenizer = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    tokenizer.save(str(allowed / "ok.json"))
    tokenizer.save(str(tmp_path / "elsewhere.json"))
    (allowed / "escape.json").symlink_to(tmp_path / "elsewhere.json")
    monkeypatch.setenv(TOKENIZER_PATHS_ENV, str(allowed))
    refused = [
        "/etc/passwd",
        str(tmp_path / "elsewhere.json"),
        str(allowed / "escape.json"),  # a symlink out of the allowed directory
        str(allowed / ".." / "elsewhere.json"),
        f"file://{tmp_path}/elsewhere.json",
        str(allowed) + "-sibling/ok.json",
        "s3://some-bucket/model.json",
        "s3://some-bucket/lake/../model.json",
    ]
    for path in refused:
        with pytest.raises(PathNotAllowedError) as error:
            read_uri(lake, path)
        assert repr(path) in str(error.value)
        assert str(allowed) in str(error.value) and lake.real_root in str(error.value)
    assert read_uri(lake, str(allowed / "ok.json")) == (allowed / "ok.json").read_bytes()
    assert read_uri(lake, f"file://{allowed}/ok.json") == (allowed / "ok.json").read_bytes()


@pytest.fixture(scope="module")
def small_pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenize")
    with demo_pipeline(root, "CC-MAIN-DEMO-2026-03", files=2, pages_per_file=30, seed=3) as run:
        yield run


@pytest.mark.integration
def test_trace_command_prints_the_source_of_random_tokens(small_pipeline, capsys):
    pipeline = small_pipeline
    unit = pipeline.units[0]
    part = 1
    _, sidecar = read_shard(pipeline.lake, unit, part)
    tokens = sidecar[-1]["token_end"] + 1
    for position in random.Random(1).sample(range(tokens), 10):
        cli(["trace", unit.key, str(part), str(position)])
        out = capsys.readouterr().out
        fields = dict(
            line.strip().split(None, 1) for line in out.splitlines()[1:] if line.startswith("  ")
        )
        row = next(r for r in sidecar if r["token_start"] <= position <= r["token_end"])
        assert fields["url"] == row["url"] and fields["record_id"] == row["record_id"]
        warc = pipeline.lake.read_bytes(row["source_file"])
        assert warc_headers_at(warc, row["record_offset"])["WARC-Target-URI"] == row["url"]
        token_text = out.split("[[", 1)[1].split("]]", 1)[0]
        text = next(
            t
            for b in read_batches(
                pipeline.lake, f"{unit.part_prefix(DEDUPLICATED, part)}/docs.parquet"
            )
            for d, t in zip(
                b.column("doc_id").to_pylist(), b.column("text").to_pylist(), strict=True
            )
            if d == row["doc_id"]
        )
        assert "[end of document]" in out or token_text in text


@pytest.mark.integration
@pytest.mark.parametrize(
    ("unit", "part", "position", "status", "said"),
    [
        # a position, file or unit that names nothing: a usage error
        ("{unit}", "1", "99999999", 2, "token 99999999 is past the end of "),
        ("{unit}", "1", "-1", 2, "token position must be 0 or more, not -1"),
        ("{unit}", "2", "0", 2, "unit {unit} has no file 2: it has 2 files, numbered from 0"),
        ("{crawl}", "0", "0", 2, "invalid unit key '{crawl}': expected <crawl>/<unit>"),
        # nothing to read there yet
        (
            "{crawl}/99999",
            "0",
            "0",
            1,
            "tokenized_shards of unit {crawl}/99999 is not materialized",
        ),
    ],
)
def test_trace_command_says_what_is_wrong_in_one_line(
    small_pipeline, capsys, unit, part, position, status, said
):
    first = small_pipeline.units[0]
    names = {"unit": first.key, "crawl": first.crawl}
    with pytest.raises(SystemExit) as exit_:
        cli(["trace", unit.format(**names), part, position])
    assert exit_.value.code == status
    err = capsys.readouterr().err
    assert err.startswith("tokenmill trace: ") and err.count("\n") == 1
    assert said.format(**names) in err


@pytest.mark.integration
def test_trace_command_without_a_lake_file_fails_without_a_traceback(small_pipeline):
    unit = small_pipeline.units[0]
    index = Path(small_pipeline.lake.uri(f"{unit.part_prefix(TOKENIZED_SHARDS, 1)}/tokens.idx"))
    index.rename(index.with_suffix(".moved"))
    try:
        command = [sys.executable, "-m", "tokenmill.cli.main", "trace", unit.key, "1", "0"]
        done = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)
    finally:
        index.with_suffix(".moved").rename(index)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("tokenmill trace: ") and str(index) in line


def read_shard(lake: Lake, unit: Unit = UNIT, part: int = 0):
    prefix = unit.part_prefix(TOKENIZED_SHARDS, part)
    docs = read_indexed_dataset(
        lake.read_bytes(f"{prefix}/tokens.idx"), lake.read_bytes(f"{prefix}/tokens.bin")
    )
    rows = [r for b in read_batches(lake, f"{prefix}/provenance.parquet") for r in b.to_pylist()]
    return docs, rows


@pytest.mark.integration
def test_changing_the_tokenizer_makes_tokenized_shards_stale(small_pipeline, shared, monkeypatch):
    pipeline = small_pipeline
    defs = build_definitions(
        LakeResource(url=pipeline.lake.url), workers=WorkersResource(processes=1)
    )
    partition = pipeline.units[0].key
    build = defs.resolve_job_def("run_tokenizer")
    assert stale_status(defs, pipeline.instance, "tokenized_shards", partition) == StaleStatus.FRESH

    # Re-training on the same text gives the same tokenizer: same data version, nothing stale.
    assert build.execute_in_process(instance=pipeline.instance).success
    assert stale_status(defs, pipeline.instance, "tokenized_shards", partition) == StaleStatus.FRESH

    # A launchpad run config cannot read a file outside the lake and the allow-list.
    config = {"ops": {node("tokenizer"): {"config": {"path": "/etc/passwd"}}}}
    result = build.execute_in_process(
        run_config=config, instance=pipeline.instance, raise_on_error=False
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert "'/etc/passwd'" in message and TOKENIZER_PATHS_ENV in message
    assert stale_status(defs, pipeline.instance, "tokenized_shards", partition) == StaleStatus.FRESH

    neox = shared / "tokenizers" / "gpt-neox-style-50k.tokenizer.json"
    monkeypatch.setenv(TOKENIZER_PATHS_ENV, str(neox.parent))
    config = {"ops": {node("tokenizer"): {"config": {"path": str(neox)}}}}
    assert build.execute_in_process(run_config=config, instance=pipeline.instance).success
    assert stale_status(defs, pipeline.instance, "tokenized_shards", partition) == StaleStatus.STALE


def test_a_trained_vocabulary_short_of_its_target_is_reported(lake):
    from tokenmill.tokens.tokenization import train_byte_level_bpe, vocabulary_reaches_target

    deduplicated_unit(lake, TEXTS * 20)
    report = build_tokenizer(lake, TokenizerSettings(vocab_size=5000, sample_mb=1))
    assert report.counts["vocab_target"] == 5000 > report.counts["vocab_size"]
    verdict = vocabulary_reaches_target(lake)
    assert not verdict.passed
    assert f"trained {report.counts['vocab_size']:,} tokens of the 5,000" in verdict.description
    build_tokenizer(lake, TokenizerSettings(vocab_size=270, sample_mb=1))
    assert vocabulary_reaches_target(lake).passed
    given = in_the_lake(lake, train_byte_level_bpe(iter(TEXTS * 20), 5000), "given.json")
    build_tokenizer(lake, TokenizerSettings(path=given))
    verdict = vocabulary_reaches_target(lake)
    assert verdict.passed and "given" in verdict.description
