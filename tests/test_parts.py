"""A unit's files as parts (tokenmill/runtime/parts.py): the same bytes whatever the number of
worker processes, and a run killed midway resumes at file granularity, within the same attempt
only."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tokenmill.crawl.units import register_new_files
from tokenmill.demo.crawl import generate_demo_crawl
from tokenmill.runtime.parts import RESUME_FIELD, run_stage_work
from tokenmill.stages import stage_named
from tokenmill.storage.lake import HOST_ID, TEMP_MARKER, Lake
from tokenmill.storage.layout import EXTRACTED, LANDING, MARKER, RAW_CRAWL, Unit

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
