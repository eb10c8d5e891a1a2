"""One bad file never fails its unit: a unit of good WARC files plus one bad file of each kind,
run through every stage as a Dagster run does (worker processes under the memory cap), keeps
every good document; the bad file is one quarantine row naming it in each stage that would read
it, and the unit's `bad_record_rate` check fails naming it. Worker errors reach the run with
their type, message and file; a worker that dies is reported as such, naming its file."""

from __future__ import annotations

import gzip
import io
import pickle
import tarfile
import zipfile
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance
from tokenmill.data_assets.partitions import sync_partitions
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.workers import WorkersResource

from testkit.datasets import node
from tokenmill.crawl.units import discover, register_new_files, unit_files
from tokenmill.demo.crawl import generate_demo_crawl
from tokenmill.runtime.parts import run_stage_work
from tokenmill.runtime.stage import Scope
from tokenmill.runtime.worker_errors import WorkerDiedError, WorkerError, portable
from tokenmill.stages import STAGES, raw_crawl, stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, Unit

CRAWL = "CC-MAIN-BAD-FILES"
GOOD = ("a.warc.gz", "c.warc.gz")
MEMORY_CAP = 4 << 30  # as WorkersResource sets it for every Dagster run


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("page.html", "<html>zipped</html>")
    return buffer.getvalue()


def _tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("page.html")
        info.size = 5
        archive.addfile(info, io.BytesIO(b"hello"))
    return buffer.getvalue()


# kind -> (landed name, bytes, or how the file is made after registration)
BAD_FILES = {
    "zip named .warc.gz": ("b.warc.gz", _zip()),
    "tar named .warc": ("b.warc", _tar()),
    "HTML named .warc.gz": ("b.warc.gz", b"<html><body>a page, not a WARC</body></html>"),
    "gzipped plain text": ("b.warc.gz", gzip.compress(b"plain text\n" * 200)),
    "empty file": ("b.warc.gz", b""),
    "symlink to a file outside the lake": ("b.warc.gz", "link-file"),
    "symlinked folder": ("b/x.warc.gz", "link-folder"),
    "deleted after registration": ("b.warc.gz", "delete"),
}


@pytest.fixture(scope="module")
def good_files(tmp_path_factory) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("good")
    generate_demo_crawl(root / "w", root / "t.json", crawl=CRAWL, files=2, pages_per_file=25)
    return dict(zip(GOOD, [p.read_bytes() for p in sorted((root / "w").iterdir())], strict=True))


def run_every_stage(lake: Lake, unit: Unit) -> dict[str, object]:
    return {
        stage.name: run_stage_work(
            stage, lake, unit=unit, crawl=unit.crawl, workers=2, memory_limit=MEMORY_CAP
        )
        for stage in STAGES
    }


def land_unit(lake: Lake, files: dict[str, bytes]) -> Unit:
    for name, data in files.items():
        lake.write_bytes(f"landing/{CRAWL}/{name}", data)
    (unit,) = register_new_files(lake, CRAWL, files_per_unit=len(files)).units
    return unit


def table(lake: Lake, unit: Unit, stage: str, name: str) -> pl.DataFrame:
    frames = []
    for part in range(len(unit_files(lake, unit))):
        with lake.open_input(f"{unit.part_prefix(stage, part)}/{name}") as f:
            frames.append(pl.from_arrow(pq.read_table(f)))
    return pl.concat(frames)


def kept(lake: Lake, unit: Unit, stage: str) -> set[tuple[str, str]]:
    docs = table(lake, unit, stage, "docs.parquet")
    return set(zip(docs["doc_id"], docs["text"], strict=True))


@pytest.fixture(scope="module")
def reference(good_files, tmp_path_factory):
    """The good files alone, through every stage."""
    lake = Lake.from_url(str(tmp_path_factory.mktemp("reference") / "lake"))
    unit = land_unit(lake, good_files)
    reports = run_every_stage(lake, unit)
    return {
        "cleaned": kept(lake, unit, "cleaned"),
        "deduplicated": kept(lake, unit, "deduplicated"),
        "shard_docs": reports["tokenized_shards"].records_out,
    }


def make_bad_file(root: Path, lake: Lake, good_files: dict[str, bytes], kind: str) -> tuple:
    """A unit of the good files and the bad one, registered; the bad file's landing key."""
    name, data = BAD_FILES[kind]
    key = f"landing/{CRAWL}/{name}"
    outside = root / "outside"
    outside.mkdir()
    # Registration leaves symbolic links out (see the registration test below): the unit is
    # registered with a regular file there, which is then swapped for a link (or deleted).
    files = {**good_files, name: data if isinstance(data, bytes) else good_files[GOOD[0]]}
    unit = land_unit(lake, dict(sorted(files.items())))
    landed = Path(lake.root) / key
    if data == "link-file":
        (outside / "elsewhere.warc.gz").write_bytes(good_files[GOOD[0]])
        landed.unlink()
        landed.symlink_to(outside / "elsewhere.warc.gz")
    elif data == "link-folder":
        (outside / "x.warc.gz").write_bytes(good_files[GOOD[0]])
        landed.unlink()
        landed.parent.rmdir()
        landed.parent.symlink_to(outside)
    elif data == "delete":
        landed.unlink()
    return unit, key


@pytest.mark.integration
@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_a_bad_file_beside_good_ones_is_quarantined_and_loses_no_good_record(
    kind, good_files, reference, tmp_path
):
    lake = Lake.from_url(str(tmp_path / "lake"))
    unit, key = make_bad_file(tmp_path, lake, good_files, kind)
    reports = run_every_stage(lake, unit)  # no stage fails

    quarantine = table(lake, unit, "raw_crawl", "quarantine.parquet")
    unusable = quarantine.filter(pl.col("reason") == "unusable_file")
    assert unusable["file"].to_list() == [key], quarantine
    assert reports["raw_crawl"].counts["unusable_files"].keys() == {key}
    verdict = raw_crawl.bad_record_rate(lake, unit)
    assert not verdict.passed and key in verdict.description
    assert verdict.metadata["unusable"] == reports["raw_crawl"].counts["unusable_files"]

    rejected = table(lake, unit, "extracted", "rejected.parquet")
    unusable = rejected.filter(pl.col("filter") == "unusable_file")
    assert unusable["source_file"].to_list() == [key]
    assert reports["cleaned"].counts["unusable_files"].keys() == {key}
    assert kept(lake, unit, "cleaned") == reference["cleaned"]
    assert kept(lake, unit, "deduplicated") == reference["deduplicated"]
    assert reports["tokenized_shards"].records_out == reference["shard_docs"]
    for stage in STAGES:
        if stage.scope is Scope.UNIT:
            assert lake.exists(f"{unit.prefix(stage.name)}/{MARKER}"), stage.name


def test_registration_and_discovery_leave_symlinks_out_by_name(good_files, tmp_path):
    lake = Lake.from_url(str(tmp_path / "lake"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.warc.gz").write_bytes(good_files[GOOD[0]])
    landing = Path(lake.root) / "landing" / CRAWL
    lake.write_bytes(f"landing/{CRAWL}/a.warc.gz", good_files[GOOD[0]])
    lake.write_bytes(f"landing/{CRAWL}/inside.warc.gz", good_files[GOOD[1]])
    (landing / "b.warc.gz").symlink_to(outside / "x.warc.gz")
    (landing / "c.warc.gz").symlink_to("inside.warc.gz")  # even to a file of the lake
    (landing / "d").symlink_to(outside)
    expected = {"a.warc.gz", "inside.warc.gz"}

    units, _, problems = discover(lake, {}, files_per_unit=1, max_keys=100)
    assert {unit_files(lake, u)[0].rsplit("/", 1)[1] for u in units} == expected
    for name in ("b.warc.gz", "c.warc.gz", "d/x.warc.gz"):
        assert any(f"landing/{CRAWL}/{name}" in p and "symbolic link" in p for p in problems)

    other = Lake.from_url(str(tmp_path / "other"))
    other_landing = Path(other.root) / "landing"
    other_landing.mkdir()
    landing.rename(other_landing / CRAWL)
    registration = register_new_files(other, CRAWL, files_per_unit=10)
    (unit,) = registration.units
    assert {f.rsplit("/", 1)[1] for f in unit_files(other, unit)} == expected
    (refused,) = registration.refused.values()
    assert sorted(r.split(" ", 1)[0] for r in refused) == [
        f"landing/{CRAWL}/{name}" for name in ("b.warc.gz", "c.warc.gz", "d/x.warc.gz")
    ]


def test_a_declared_folder_registers_no_symlink_below_it(good_files, tmp_path):
    from tokenmill.crawl.sources import CrawlSource

    real = tmp_path / "real"
    real.mkdir()
    (real / "a.warc.gz").write_bytes(good_files[GOOD[0]])
    (tmp_path / "elsewhere.warc.gz").write_bytes(good_files[GOOD[1]])
    (real / "b.warc.gz").symlink_to(tmp_path / "elsewhere.warc.gz")
    declared = tmp_path / "declared"
    declared.symlink_to(real)  # the declared folder itself may be a link: the operator named it
    lake = Lake.from_url(str(tmp_path / "lake"))
    CrawlSource(CRAWL, prefix=str(declared)).save(lake)
    registration = register_new_files(lake, CRAWL, files_per_unit=10)
    (unit,) = registration.units
    assert unit_files(lake, unit) == [f"{declared}/a.warc.gz"]
    assert list(registration.refused) == ["symbolic links and other non-regular files"]
    report = run_stage_work(STAGES[0], lake, unit=unit, workers=1, memory_limit=MEMORY_CAP)
    assert report.records_out > 0 and "unusable_files" not in report.counts


PLUGIN = """
import os
import signal
from pathlib import Path

import polars as pl


class TwoArgumentError(ValueError):
    def __init__(self, file, why):
        super().__init__(f"{file}: {why}")


def _keep_all(docs):
    return pl.Series([None] * docs.height, dtype=pl.String)


def explodes_on_b(docs):
    if docs["source_file"].str.contains("/b.warc.gz").any():
        raise TwoArgumentError("b.warc.gz", "this filter cannot stand it")
    return _keep_all(docs)


def kills_its_worker_on_b(docs):
    if docs["source_file"].str.contains("/b.warc.gz").any():
        flag = Path(os.environ["LAB_FLAG"])
        if os.environ.get("LAB_KILL_ALWAYS") or not flag.exists():
            flag.write_text("killed once")
            os.kill(os.getpid(), signal.SIGKILL)
    return _keep_all(docs)
"""


@pytest.fixture
def lab_plugins(tmp_path, monkeypatch):
    (tmp_path / "lab_errors.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TOKENMILL_FILTER_MODULES", "lab_errors")
    monkeypatch.setenv("LAB_FLAG", str(tmp_path / "flag"))
    return monkeypatch


def three_good_files(lake: Lake, good_files: dict[str, bytes]) -> Unit:
    files = {"a.warc.gz": good_files[GOOD[0]], "b.warc.gz": good_files[GOOD[1]]}
    unit = land_unit(lake, {**files, "c.warc.gz": good_files[GOOD[0]]})
    for stage in STAGES[:2]:  # raw_crawl, extracted
        run_stage_work(stage, lake, unit=unit, workers=2, memory_limit=MEMORY_CAP)
    return unit


def clean_with(lake: Lake, unit: Unit, plugin: str):
    from tokenmill.stages.cleaned import CleanSettings

    settings = CleanSettings(plugin_filters=[{"path": f"lab_errors.{plugin}"}])
    cleaned = stage_named("cleaned")
    return run_stage_work(cleaned, lake, settings, unit=unit, workers=2, memory_limit=MEMORY_CAP)


def committed_parts(lake: Lake, unit: Unit) -> list[int]:
    return [p for p in range(3) if lake.exists(f"{unit.part_prefix('cleaned', p)}/{MARKER}")]


@pytest.mark.integration
def test_a_worker_error_that_does_not_pickle_reaches_the_run_naming_its_file(
    lab_plugins, good_files, tmp_path
):
    lake = Lake.from_url(str(tmp_path / "lake"))
    unit = three_good_files(lake, good_files)
    with pytest.raises(ValueError, match="TwoArgumentError: b.warc.gz: this filter") as error:
        clean_with(lake, unit, "explodes_on_b")
    assert f"landing/{CRAWL}/b.warc.gz (file 1 of unit {unit})" in "".join(error.value.__notes__)
    assert committed_parts(lake, unit) == [0, 2]  # the other files went on and are committed
    assert not lake.exists(f"{unit.prefix('cleaned')}/{MARKER}")


@pytest.mark.integration
def test_a_worker_killed_once_is_retried_and_the_unit_completes(lab_plugins, good_files, tmp_path):
    lake = Lake.from_url(str(tmp_path / "lake"))
    unit = three_good_files(lake, good_files)
    report = clean_with(lake, unit, "kills_its_worker_on_b")
    assert (tmp_path / "flag").exists()  # it did kill a worker
    assert report.counts["files"] == 3 and committed_parts(lake, unit) == [0, 1, 2]


@pytest.mark.integration
def test_a_file_that_kills_its_worker_twice_fails_the_unit_naming_it_and_the_signal(
    lab_plugins, good_files, tmp_path
):
    lab_plugins.setenv("LAB_KILL_ALWAYS", "1")
    lake = Lake.from_url(str(tmp_path / "lake"))
    unit = three_good_files(lake, good_files)
    with pytest.raises(WorkerDiedError) as error:
        clean_with(lake, unit, "kills_its_worker_on_b")
    message = str(error.value)
    assert f"landing/{CRAWL}/b.warc.gz (file 1 of unit {unit})" in message
    assert message.count("died of SIGKILL") == 2 and "4096 MiB" in message
    assert committed_parts(lake, unit) == [0, 2]


@pytest.mark.integration
def test_the_run_fails_with_the_workers_error_and_file_in_its_message(
    lab_plugins, good_files, tmp_path
):
    from tokenmill.definitions import build_definitions

    lake = Lake.from_url(str(tmp_path / "lake"))
    unit = three_good_files(lake, good_files)
    instance = DagsterInstance.ephemeral()
    sync_partitions(instance, lake)
    defs = build_definitions(LakeResource(url=lake.url), workers=WorkersResource(processes=2))
    config = {
        "ops": {
            node("cleaned"): {"config": {"plugin_filters": [{"path": "lab_errors.explodes_on_b"}]}}
        }
    }
    result = defs.resolve_job_def("run_cleaned").execute_in_process(
        instance=instance, partition_key=unit.key, raise_on_error=False, run_config=config
    )
    assert not result.success
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    message = failure.step_failure_data.error.message
    assert "TwoArgumentError: b.warc.gz: this filter cannot stand it" in message
    assert f"landing/{CRAWL}/b.warc.gz" in message
    assert sum(event.is_step_up_for_retry for event in result.all_events) == 0  # a ValueError


def all_exception_classes() -> list[type[BaseException]]:
    import importlib
    import pkgutil

    import tokenmill

    classes = []
    for module in pkgutil.walk_packages(tokenmill.__path__, "tokenmill."):
        if module.name.startswith("tokenmill.cli"):  # the command line runs no worker
            continue
        loaded = importlib.import_module(module.name)
        for value in vars(loaded).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.name
            ):
                classes.append(value)
    return classes


def test_every_exception_of_the_core_crosses_a_process_boundary_as_itself():
    import inspect

    classes = all_exception_classes()
    assert len(classes) >= 10
    for cls in classes:
        try:
            parameters = inspect.signature(cls).parameters.values()
        except ValueError:  # the built-in constructor: a message
            parameters = []
        required = [
            p
            for p in parameters
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        error = cls(*[f"argument {i}" for i in range(max(1, len(required)))])
        error.add_note("while a worker worked on a file")
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is cls and str(copy) == str(error), cls
        assert copy.__notes__ == error.__notes__, cls
        assert portable(error) is error


def test_an_exception_that_does_not_pickle_is_converted_keeping_its_kind():
    class Stubborn(KeyError):
        def __init__(self, a, b):
            super().__init__(f"{a}/{b}")

    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a}/{b}")

    converted = portable(Stubborn("x", "y"))
    assert type(converted) is KeyError and "Stubborn" in str(converted) and "x/y" in str(converted)
    odd = portable(Odd(1, 2))
    assert type(odd) is WorkerError and "Odd: 1/2" in str(odd)
