"""A unit's files as parts (tokenmill/runtime/parts.py): the same bytes whatever the number of
worker processes, and a run killed midway resumes at file granularity, within the same attempt
only."""

from __future__ import annotations

import os
import time
from pathlib import Path

import polars as pl
import pytest

from tokenmill.crawl.units import register_new_files
from tokenmill.demo.crawl import generate_demo_crawl
from tokenmill.runtime.parts import RESUME_FIELD, fed_stamp, run_stage_work
from tokenmill.stages import stage_named
from tokenmill.stages.extracted import ExtractSettings
from tokenmill.storage.lake import HOST_ID, TEMP_MARKER, Lake
from tokenmill.storage.layout import EXTRACTED, LANDING, MARKER, RAW_CRAWL, Unit
from tokenmill.storage.outputs import StageReport

CRAWL = "CC-MAIN-PARTS-2026-01"
FILES = 3


@pytest.fixture(scope="module")
def warc_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("parts")
    generate_demo_crawl(
        root / "warc", root / "truth.json", crawl=CRAWL, files=FILES, pages_per_file=25, seed=5
    )
    return root / "warc"


def landed_unit(root: Path, warc_dir: Path) -> tuple[Lake, Unit]:
    """A lake with the crawl landed and registered as one unit of all its files."""
    lake = Lake.from_url(str(root))
    for path in sorted(warc_dir.iterdir()):
        lake.put_file(f"{LANDING}/{CRAWL}/{path.name}", path)
    (unit,) = register_new_files(lake, CRAWL, files_per_unit=FILES).units
    return lake, unit


def stage_files(lake: Lake, *zones: str) -> dict[str, bytes]:
    return {key: lake.read_bytes(key) for zone in zones for key in lake.list(zone)}


def without_resumed(summary: dict) -> dict:
    """A unit's summary less how many of its parts were resumed."""
    return summary | {
        "counts": {k: v for k, v in summary["counts"].items() if k != "resumed_parts"}
    }


def run(lake: Lake, unit: Unit, stage: str, workers: int = 1, resume: str | None = None):
    return run_stage_work(stage_named(stage), lake, unit=unit, workers=workers, resume=resume)


def test_two_workers_write_the_same_bytes_as_one(tmp_path, warc_dir):
    outputs = []
    for workers in (1, 2):
        lake, unit = landed_unit(tmp_path / f"lake{workers}", warc_dir)
        for stage in (RAW_CRAWL, EXTRACTED):
            report = run(lake, unit, stage, workers)
            assert report.counts["files"] == FILES and report.counts["resumed_parts"] == 0
        outputs.append(stage_files(lake, RAW_CRAWL, EXTRACTED))
    one, two = outputs
    assert sorted(one) == sorted(two)
    assert [k for k in one if k.endswith("docs.parquet")] == [
        f"{EXTRACTED}/{CRAWL}/00000/{part:05d}/docs.parquet" for part in range(FILES)
    ]
    for key in one:  # markers included: the same counters and file digests
        assert one[key] == two[key], key
    marker = Lake.from_url(str(tmp_path / "lake1")).read_json(f"{EXTRACTED}/{CRAWL}/00000/{MARKER}")
    assert sorted({name.split("/")[0] for name in marker["outputs"]}) == ["00000", "00001", "00002"]


def test_a_killed_unit_recomputes_only_its_missing_part(tmp_path, warc_dir):
    lake, unit = landed_unit(tmp_path / "lake", warc_dir)
    run(lake, unit, RAW_CRAWL)
    first = run(lake, unit, EXTRACTED, resume="attempt-1")
    done = stage_files(lake, EXTRACTED)
    part_marker = f"{unit.part_prefix(EXTRACTED, 1)}/{MARKER}"
    assert lake.read_json(part_marker)[RESUME_FIELD] == "attempt-1"
    kept_docs = lake.path(f"{unit.part_prefix(EXTRACTED, 0)}/docs.parquet")
    written_at = os.stat(kept_docs).st_mtime_ns

    # Killed after parts 0 and 2 committed: part 1 and the unit have no marker.
    lake.delete(part_marker)
    lake.delete(f"{unit.prefix(EXTRACTED)}/{MARKER}")
    resumed = run(lake, unit, EXTRACTED, resume="attempt-1")
    assert resumed.counts["resumed_parts"] == FILES - 1
    assert os.stat(kept_docs).st_mtime_ns == written_at  # not rewritten
    unit_marker = f"{unit.prefix(EXTRACTED)}/{MARKER}"
    assert {k: v for k, v in stage_files(lake, EXTRACTED).items() if k != unit_marker} == {
        k: v for k, v in done.items() if k != unit_marker
    }
    assert without_resumed(resumed.summary()) == without_resumed(first.summary())
    assert without_resumed(lake.read_json(unit_marker)) == without_resumed(first.summary())

    # Another attempt (a new run) trusts no part of an earlier one.
    again = run(lake, unit, EXTRACTED, resume="attempt-2")
    assert again.counts["resumed_parts"] == 0
    assert os.stat(kept_docs).st_mtime_ns != written_at
    assert lake.read_json(part_marker)[RESUME_FIELD] == "attempt-2"
    assert run(lake, unit, EXTRACTED).counts["resumed_parts"] == 0  # no token: nothing resumed


def test_a_unit_marker_a_killed_run_was_writing_is_cleared(tmp_path, warc_dir):
    lake, unit = landed_unit(tmp_path, warc_dir)
    prefix = Path(lake.path(unit.prefix(RAW_CRAWL)))
    prefix.mkdir(parents=True)
    dead = 2**22 + 12345  # beyond any pid this host hands out
    stray = prefix / f"{TEMP_MARKER}{HOST_ID}-{dead}-0123456789abcdef-{MARKER}"
    stray.write_text("{half a marker")
    run_stage_work(stage_named(RAW_CRAWL), lake, unit=unit, workers=1)
    assert not stray.exists()
    assert lake.exists(f"{unit.prefix(RAW_CRAWL)}/{MARKER}")


def test_a_units_cpu_seconds_count_its_worker_processes(tmp_path, warc_dir):
    lake, unit = landed_unit(tmp_path / "lake", warc_dir)
    run(lake, unit, RAW_CRAWL)
    in_process = run(lake, unit, EXTRACTED)  # one worker, no cap: the parts run in this process
    started = time.process_time()
    report = run_stage_work(
        stage_named(EXTRACTED), lake, unit=unit, workers=2, memory_limit=4 << 30
    )
    own = time.process_time() - started
    assert report.cpu_s > own  # the workers' CPU seconds are in it, not only this process's
    assert report.cpu_s > 0.3 * in_process.cpu_s  # the same work, wherever it ran
    assert in_process.start_cpu_s == 0  # no worker started: its imports are in cpu_s


def test_a_workers_start_up_is_reported_apart_from_its_parts_cpu(tmp_path, warc_dir):
    """Each worker imports the stage's libraries and loads its models once (the language-ID
    model, trafilatura): the parts it begins with report that as start_cpu_s, not in cpu_s; a
    run on the same workers starts at once."""
    lake, unit = landed_unit(tmp_path / "lake", warc_dir)
    run(lake, unit, RAW_CRAWL)
    cap = (4 << 30) + 4096  # a pool of its own: its workers start in this test

    def extracted() -> StageReport:
        return run_stage_work(stage_named(EXTRACTED), lake, unit=unit, workers=2, memory_limit=cap)

    first, again = extracted(), extracted()
    assert first.start_cpu_s > 0.3  # polars, pyarrow, fastText and its model, trafilatura
    assert again.start_cpu_s < 0.1 * first.start_cpu_s
    assert first.summary() == again.summary()


def test_workers_label_with_a_language_model_in_the_lake_and_a_bad_one_fails_the_part(
    tmp_path, warc_dir
):
    """Workers load the lake's model as they start (`Stage.prepare`); a file that is no fastText
    model fails the part, with the model's name and the file."""
    import fasttext

    lake, unit = landed_unit(tmp_path / "lake", warc_dir)
    run(lake, unit, RAW_CRAWL)
    lines = [
        f"__label__{label} {word} " * 5
        for label, word in (("eng_Latn", "the"), ("deu_Latn", "der"))
    ]
    (tmp_path / "train.txt").write_text("\n".join(lines * 20) + "\n")
    model = fasttext.train_supervised(str(tmp_path / "train.txt"), epoch=5, dim=4, verbose=0)
    model.save_model(str(tmp_path / "lid.bin"))
    lake.put_file("models/lid.bin", tmp_path / "lid.bin")
    (tmp_path / "bad.bin").write_bytes(b"not a model at all")
    lake.put_file("models/bad.bin", tmp_path / "bad.bin")
    cap = (4 << 30) + 8192  # a pool of its own: its workers start in this test

    def extracted(model: str) -> StageReport:
        settings = ExtractSettings(language_model=model)
        return run_stage_work(
            stage_named(EXTRACTED), lake, settings, unit=unit, workers=2, memory_limit=cap
        )

    report = extracted("models/lid.bin")
    assert report.records_out > 0 and report.start_cpu_s > 0
    docs = pl.read_parquet(lake.path(f"{unit.part_prefix(EXTRACTED, 0)}/docs.parquet"))
    assert set(docs["language"]) <= {"eng_Latn", "deu_Latn", "und"}
    with pytest.raises(Exception, match="models/bad.bin.*not a fastText model") as failed:
        extracted("models/bad.bin")
    assert "while extracted worked on" in "\n".join(getattr(failed.value, "__notes__", []))


def test_a_hashed_output_files_digest_is_its_contents_whatever_the_write_sizes():
    """Writes of 1 MB and more are hashed in a thread beside the write: the digest is still
    that of the bytes in order, and a failing write fails the caller."""
    import hashlib
    import io

    from tokenmill.storage.outputs import HASH_BESIDE_BYTES, HashingFile

    pieces = [os.urandom(n) for n in (10, HASH_BESIDE_BYTES, 3, 3 * HASH_BESIDE_BYTES + 1, 0)]
    sink = io.BytesIO()
    hashed = HashingFile(sink)
    for piece in pieces:
        hashed.write(memoryview(piece))
    assert sink.getvalue() == b"".join(pieces)
    assert hashed.size == len(sink.getvalue())
    assert hashed.sha256.hexdigest() == hashlib.sha256(b"".join(pieces)).hexdigest()

    class Full(io.BytesIO):
        def write(self, data):
            raise OSError("no space left on device")

    with pytest.raises(OSError, match="no space"):
        HashingFile(Full()).write(bytes(2 * HASH_BESIDE_BYTES))


def data_files(lake: Lake, *zones: str) -> dict[str, bytes]:
    return {key: value for key, value in stage_files(lake, *zones).items() if MARKER not in key}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stage_fed_in_the_same_pass_writes_what_it_writes_alone(tmp_path, warc_dir, workers):
    """raw_crawl hands each file's records (the demo's broken ones included) to extracted as it
    indexes them: one pass, the same bytes and markers (but for the run's stamp), and
    raw_crawl's CPU says how much of the pass was extraction."""
    cap = 4 << 30 if workers > 1 else None
    alone, lake_alone = {}, landed_unit(tmp_path / "alone", warc_dir)[0]
    unit = landed_unit(tmp_path / "fed", warc_dir)[1]
    for stage in (RAW_CRAWL, EXTRACTED):
        alone[stage] = run_stage_work(
            stage_named(stage), lake_alone, unit=unit, workers=workers, memory_limit=cap
        )
    lake = Lake.from_url(str(tmp_path / "fed"))
    raw = run_stage_work(
        stage_named(RAW_CRAWL),
        lake,
        unit=unit,
        workers=workers,
        memory_limit=cap,
        resume="run-1",
        fed_settings=ExtractSettings(),
    )
    assert lake.exists(f"{unit.part_prefix(EXTRACTED, 0)}/{MARKER}")
    assert not lake.exists(f"{unit.prefix(EXTRACTED)}/{MARKER}")  # its own run commits the unit
    fed = run_stage_work(
        stage_named(EXTRACTED), lake, unit=unit, workers=workers, memory_limit=cap, resume="run-1"
    )
    assert fed.fed_parts == FILES and fed.counts["resumed_parts"] == 0
    assert data_files(lake, RAW_CRAWL, EXTRACTED) == data_files(lake_alone, RAW_CRAWL, EXTRACTED)
    assert fed.summary() == alone[EXTRACTED].summary()
    assert raw.summary() == alone[RAW_CRAWL].summary()
    part = lake.read_json(f"{unit.part_prefix(EXTRACTED, 1)}/{MARKER}")
    assert part.pop(RESUME_FIELD) == fed_stamp("run-1", ExtractSettings())
    assert part == lake_alone.read_json(f"{unit.part_prefix(EXTRACTED, 1)}/{MARKER}")
    # extraction is most of the pass
    assert 0.5 * raw.cpu_s < raw.fed_cpu_s < raw.cpu_s and fed.cpu_s < raw.fed_cpu_s


def test_a_fed_part_is_kept_only_by_its_run_with_its_settings(tmp_path, warc_dir):
    lake, unit = landed_unit(tmp_path, warc_dir)
    for fed_settings, fed_in, extracted_in in (
        (ExtractSettings(), "run-1", "run-2"),  # another run: extracted anew
        (ExtractSettings(record_cpu_s=19.0), "run-3", "run-3"),  # other settings: the same
    ):
        run_stage_work(
            stage_named(RAW_CRAWL), lake, unit=unit, resume=fed_in, fed_settings=fed_settings
        )
        again = run_stage_work(
            stage_named(EXTRACTED), lake, ExtractSettings(), unit=unit, resume=extracted_in
        )
        assert again.fed_parts == 0 and again.counts["resumed_parts"] == 0
        marker = lake.read_json(f"{unit.part_prefix(EXTRACTED, 0)}/{MARKER}")
        assert marker[RESUME_FIELD] == extracted_in


def test_an_unusable_file_fed_on_is_rejected_as_when_extracted_alone(tmp_path, warc_dir):
    outputs = []
    for name, fed_settings in (("alone", None), ("fed", ExtractSettings())):
        lake = Lake.from_url(str(tmp_path / name))
        for path in sorted(warc_dir.iterdir()):
            lake.put_file(f"{LANDING}/{CRAWL}/{path.name}", path)
        lake.write_bytes(f"{LANDING}/{CRAWL}/{CRAWL}-page.warc.gz", b"<html>a page</html>")
        (unit,) = register_new_files(lake, CRAWL, files_per_unit=FILES + 1).units
        run_stage_work(
            stage_named(RAW_CRAWL), lake, unit=unit, resume="run-1", fed_settings=fed_settings
        )
        report = run(lake, unit, EXTRACTED, resume="run-1")
        assert len(report.counts["unusable_files"]) == 1, report.counts
        assert report.fed_parts == (FILES + 1 if fed_settings else 0)
        outputs.append(data_files(lake, RAW_CRAWL, EXTRACTED))
    assert outputs[0] == outputs[1]
