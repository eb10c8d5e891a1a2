"""What a stage is: one declaration from which the orchestration, the Kubernetes sizing, the
summary and the tests learn everything about it.

A stage module (`tokenmill/stages/<name>.py`) holds its `run` function and a `STAGE`
declaration; `tokenmill/stages/__init__.py` lists them in lineage order. The stage's name is
its asset key, its lake zone and its module. Stages never import each other: a stage reads its
upstream zones through `Work.input`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import Unit, crawl_prefix
from tokenmill.storage.outputs import PartitionWriter, StageReport


class Scope(StrEnum):
    UNIT = "unit"  # one partition per unit of a crawl; `run` handles one file of the unit
    CRAWL = "crawl"  # one partition per crawl
    LAKE = "lake"  # unpartitioned


DEFAULT_MAX_RUNTIME_S = 6 * 3600


@dataclass(frozen=True)
class Pod:
    """Kubernetes resources of the stage's run pod: requests and limits."""

    cpu: str
    memory: str
    cpu_limit: str
    memory_limit: str

    def resources(self) -> dict:
        return {
            "requests": {"cpu": self.cpu, "memory": self.memory},
            "limits": {"cpu": self.cpu_limit, "memory": self.memory_limit},
        }


@dataclass
class Verdict:
    passed: bool
    description: str
    metadata: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """An invariant of a committed partition, run after every materialization."""

    name: str
    verify: Callable[..., Verdict]  # (lake, unit | crawl) -> Verdict
    warn_only: bool = False


@dataclass(frozen=True)
class Work:
    """One piece of a stage's work: a file of a unit, a crawl, or the whole lake."""

    lake: Lake
    stage: str
    settings: Any = None
    unit: Unit | None = None
    part: int | None = None
    file: str | None = None
    crawl: str | None = None
    stamp: dict | None = None  # recorded in the output's marker (e.g. which run wrote it)
    skip: frozenset[int] = frozenset()  # offsets of records that ended a worker: dropped
    # The same file's piece of the stage this one feeds (`Stage.feeds`), made in the same pass
    then: Work | None = None

    @property
    def output(self) -> str:
        return self.input(self.stage)

    def input(self, zone: str) -> str:
        """The prefix of this piece in `zone`: the same file of the same unit, the same
        crawl, or the zone itself."""
        if self.unit is not None and self.part is not None:
            return self.unit.part_prefix(zone, self.part)
        if self.crawl is not None:
            return crawl_prefix(zone, self.crawl)
        return zone

    @property
    def piece(self) -> dict:
        """Which file of which unit of which stage this is: what a worker posts while on it."""
        return {"stage": self.stage, "unit": self.unit.key, "part": self.part}

    def writer(self, report: StageReport) -> PartitionWriter:
        return PartitionWriter(self.lake, self.output, report, stamp=self.stamp)


@dataclass
class RecordFeed:
    """A file's records as the stage reading it hands them on (`Stage.feeds`): ``records``
    yields them (bad ones included) as they are read, ``readable`` names the file as the records'
    provenance does, ``bytes_read()`` counts the file's bytes read so far, and ``watch`` says
    which part a worker that dies on a record was on."""

    records: Iterator
    readable: str
    bytes_read: Callable[[], int]
    watch: dict


@dataclass(frozen=True)
class FanOut:
    """A stage whose partition splits into pieces that run as parallel steps (pods on
    Kubernetes), each in its own worker processes, then one step that writes the stage's output.

    ``plan(work)`` checks the inputs (a bad one fails naming its file, before anything is
    committed) and lists the pieces: short strings, the same for the same inputs.
    ``run(work, pieces, workers)`` commits those pieces to the lake, in ``workers`` processes at
    most, skipping the ones already committed, and returns a small JSON-able summary.
    ``finish(work, summaries)`` writes the stage's output from the committed pieces: the output
    ``Stage.run`` writes in one step."""

    plan: Callable[[Work], list[str]]
    run: Callable[[Work, list[str], int], dict]
    finish: Callable[[Work, list[dict]], StageReport]


@dataclass(frozen=True)
class CrawlBoundary:
    """How a crawl-scope stage meets the per-unit stages around it. No partition mapping joins
    a unit to its crawl, so two per-partition assets named here carry lineage, automation and
    staleness across: `gathered` (per crawl) is observed once every unit of the crawl has the
    stage's per-unit inputs, with a version hashing their data versions, and the stage follows
    it; `reported` (per unit) is reported by each of the stage's runs for the units whose share
    of its output changed (its report's `counts["unit_versions"]`: unit name -> version), and
    the per-unit stages below it follow that instead of the stage itself."""

    gathered: str
    reported: str | None = None


@dataclass(frozen=True)
class Stage:
    name: str
    scope: Scope
    run: Callable[[Work], StageReport]
    description: str
    group: str
    pod: Pod
    upstream: tuple[str, ...] = ()
    # Inputs only some settings read: (settings) -> more stage names (a recipe's classifier
    # rules read the scores; a recipe without them does not wait for them).
    reads: Callable[[Any], tuple[str, ...]] | None = None
    settings: type | None = None
    checks: tuple[Check, ...] = ()
    kinds: tuple[str, ...] = ()
    schema: Any = None  # the columns of its main Parquet output (a pyarrow schema)
    # Longest a run of this stage may last before run monitoring fails it (a hang never
    # holds a partition for ever; the instance's max_runtime_seconds bounds every run).
    max_runtime_s: int = DEFAULT_MAX_RUNTIME_S
    fan_out: FanOut | None = None  # its work split over parallel steps (see FanOut)
    # The per-unit stage that reads this one's records: when a run makes both (`Work.then`),
    # `run(work, consume)` hands each file's records to that stage's `fed` as it reads them,
    # one pass over the file for both.
    feeds: str | None = None
    # (work, RecordFeed) -> its part made from the records another stage hands on
    fed: Callable[[Work, RecordFeed], StageReport] | None = None
    # (settings, lake) -> None: what a worker process loads once, before its first part, for
    # parts with these settings (models, from the lake too; libraries a part would import on
    # first need): the worker's start-up, reported apart from the parts' CPU
    # (`StageReport.start_cpu_s`)
    prepare: Callable[[Any, Lake], None] | None = None
    # The output files the stages below read: their content is the data version, so a re-run
    # that changes only the others (what was dropped and why) makes nothing downstream stale.
    # Empty: every output file.
    data_files: tuple[str, ...] = ()
    boundary: CrawlBoundary | None = None  # a crawl stage between per-unit ones (see there)
    # A crawl stage: the unit stage whose rule histograms (`tokenmill.filters.histograms`, kept in
    # its units' markers) its materialization sums and draws, the crawl's distributions.
    distributions_of: str | None = None
    # Counts of those units' reports summed into its own (what decontamination removed, per
    # crawl)
    crawl_sums: tuple[str, ...] = ()
    # Prefixes besides its zone where it keeps work in progress (a recipe's, like its zone).
    work_zones: tuple[str, ...] = ()
    # False: the automation never launches it (a release is made on purpose).
    automatic: bool = True
    # A lake stage made again when its settings change, as the partitioned stages are; the
    # others are made only when missing (changing the tokenizer re-tokenizes everything: that
    # is a deliberate launch).
    follows_settings: bool = False
    # (settings) -> whether those settings leave it nothing to make (no evaluation set
    # declared): then it is never launched, by the automation or `tokenmill run`, nor listed
    # as missing
    idle: Callable[[Any], bool] | None = None

    def idle_with(self, settings: Any) -> bool:
        return self.idle is not None and settings is not None and self.idle(settings)

    # A lake stage made from every unit of its inputs: the external asset (one per recipe,
    # unpartitioned) it follows instead of them, whose version is what the stage would make now.
    # Dagster does not compare the data of an input of 100 partitions or more, so the stage
    # would never show stale at corpus scale (see data_assets/release_inputs.py).
    follows: str | None = None
    # Built once for every recipe (reading and extraction); the others are built per recipe,
    # each recipe's in its own zones (`Lake.with_zones`).
    shared: bool = False
    # Changed when a change of its code changes what it writes (empty: never yet): part of its
    # code version, so the automation builds its partitions again, and below them only those
    # whose inputs' data changed.
    version: str = ""
    # (lake, settings, unit | None) -> a digest of what it reads from outside the lake's
    # lineage (the files it lands, models, plug-in code): a committed partition is kept as
    # current only while that is the same (None: it cannot tell, never kept).
    outside: Callable[[Lake, Any, Unit | None], str | None] | None = None


def digest(value: Any) -> str:
    """A short digest of a JSON-able value (what a stage reads from outside the lineage)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:32]


def settings_fields(settings: type) -> list[tuple[str, Any, Any, str]]:
    """(name, type, default, description) of a settings dataclass's fields: what a launchpad
    form or a recipe file offers."""
    fields = []
    for f in dataclasses.fields(settings):
        if not f.init or f.metadata.get("internal"):
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        fields.append((f.name, f.type, default, f.metadata.get("description", "")))
    return fields


def setting(default: Any, description: str) -> Any:
    """A settings field with its description (shown in the launchpad)."""
    if isinstance(default, list | dict | tuple):
        return field(
            default_factory=lambda: type(default)(default), metadata={"description": description}
        )
    return field(default=default, metadata={"description": description})


def declared_mapping(value: Any, keys: tuple[str, ...], where: str, expected: str) -> dict:
    """A declared item of a settings list as a mapping (from a recipe file or a run's config),
    with none but ``keys``; else an error naming ``where`` and what was ``expected``."""
    if hasattr(value, "model_dump"):  # a run's config
        value = {k: v for k, v in value.model_dump().items() if v not in (None, [], {})}
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a mapping {expected}, not {value!r}")
    unknown = sorted(set(value) - set(keys))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; keys: {list(keys)}")
    return value


def check_unique_names(names: list[str], where: str) -> None:
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{where}: names declared twice: {repeated}")


def parsed_items(values: Any, parse: Callable[[Any, str], Any], where: str) -> list:
    """Each item of a list setting parsed (``parse(item, "<where>[i]")``, which raises naming
    it); none while the value is not a list yet (a type error the annotations report)."""
    if not isinstance(values, list):
        return []
    return [parse(value, f"{where}[{index}]") for index, value in enumerate(values)]
