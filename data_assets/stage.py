"""What every stage asset shares: error translation, metadata, and asset check results."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    Backoff,
    DagsterInvariantViolationError,
    DataVersion,
    Failure,
    Jitter,
    MaterializeResult,
    MetadataValue,
    RetryPolicy,
    RetryRequested,
    TableColumn,
    TableRecord,
    TableSchema,
)

from data_assets.partitions import shard_from_key
from tokenmill.lake import Lake, LakeKeyError, LakeRefusedError, LakeUnreachableError
from tokenmill.outputs import MissingInputError, StageReport, combine, is_committed
from tokenmill.shards import Shard
from tokenmill.verify import Verdict
from tokenmill.warc import UnusableInputError

# Transient faults (object store, network, preempted node) get retried with backoff; bad input
# and missing upstream partitions fail at once, see `run_stage`.
STAGE_RETRY = RetryPolicy(
    max_retries=3, delay=5, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS
)
PERMANENT_ERRORS = (
    UnusableInputError,
    MissingInputError,
    LakeKeyError,
    LakeRefusedError,
    ValueError,
)
T = TypeVar("T")
# An unreachable object store (restart, outage, network partition) is waited out: attempts
# after 5, 10, 20 and 40 s ride out ~75 s of outage on top of the SDK's own request retries.
# Wrong credentials or a missing bucket are not: they stay PERMANENT_ERRORS.
OUTAGE_RETRIES = 4
OUTAGE_FIRST_WAIT_S = 5.0
PROGRESS_EVERY_S = 60.0
JOURNAL = "_journal"


def run_stage(work: Callable[[], T]) -> T:
    try:
        return work()
    except LakeUnreachableError as error:
        attempt = _attempt()
        if attempt < OUTAGE_RETRIES:
            # Raised directly (not left to STAGE_RETRY) so the final failure below carries
            # the explanation instead of Dagster's "Exceeded max_retries".
            wait = OUTAGE_FIRST_WAIT_S * 2**attempt
            raise RetryRequested(max_retries=OUTAGE_RETRIES, seconds_to_wait=wait) from error
        raise Failure(
            description=f"{error} (given up after {attempt + 1} attempts)", allow_retries=False
        ) from error
    except PERMANENT_ERRORS as error:
        raise Failure(description=str(error), allow_retries=False) from error


def _attempt() -> int:
    """How many times this step has already run (0 outside a Dagster step)."""
    try:
        return AssetExecutionContext.get().retry_number
    except DagsterInvariantViolationError:
        return 0


@dataclass(frozen=True)
class ShardCheck:
    name: str
    verify: Callable[[Lake, Shard], Verdict]
    warn_only: bool = False


def materialize_shards(
    context: AssetExecutionContext,
    lake: Lake,
    zone: str,
    work: Callable[[Lake, Shard], StageReport],
    checks: Sequence[ShardCheck] = (),
) -> MaterializeResult:
    """Run a per-shard stage over the run's partitions: one, or a range when a backfill
    groups several shards into one run (see BackfillPolicy in stages.py). A range's
    partitions share its metadata: counters summed over the range, and `partitions`."""
    # (Metadata per partition, `context.add_asset_metadata(partition_key=...)`, costs an instance
    # query per partition: ~40 ms on the local instance, more than a small shard's work.)
    # A path-like key (`../../etc|00000`) is bad input: it fails at once, not after retries.
    shards = run_stage(lambda: [shard_from_key(key) for key in context.partition_keys])
    progress = Progress(context, len(shards))
    journal = StepJournal(lake, context.run.run_id, zone) if len(shards) > 1 else None
    resumed = journal.reports(shards) if journal and _attempt() > 0 else {}
    reports = []
    for shard in shards:
        report = resumed.get(shard) or run_stage(partial(work, lake, shard))
        if journal and shard not in resumed:
            journal.record(shard, report)
        reports.append(report)
        progress.done(shard)
    names = [str(shard) for shard in shards]
    results = [
        check(c.name, Verdict.all([c.verify(lake, shard) for shard in shards], names), c.warn_only)
        for c in checks
    ]
    location = shards[0].prefix(zone) if len(shards) == 1 else zone
    if resumed:
        context.log.info(f"resumed: {len(resumed)} of {len(shards)} shards were already done")
    result = stage_result(combine(reports), lake, location, results)
    if journal:
        journal.clear()
    return result


class StepJournal:
    """The shards a run's range step has committed, so that a retry of the step (same run)
    resumes after them instead of recomputing them. It lives in the lake beside the data, not
    in the partitions, which stay byte-identical, and is deleted when the step succeeds (a run
    that dies leaves a few small files under ``_journal/<zone>/<run id>/``)."""

    def __init__(self, lake: Lake, run_id: str, zone: str):
        self.lake = lake
        self.zone = zone
        self.prefix = f"{JOURNAL}/{zone}/{run_id}"

    def _key(self, shard: Shard) -> str:
        return f"{self.prefix}/{shard.crawl}/{shard.shard}.json"

    def record(self, shard: Shard, report: StageReport) -> None:
        # Rows as (column, cell) pairs: JSON objects are written with sorted keys.
        preview = [
            [(column, _cell(value)) for column, value in row.items()] for row in report.preview
        ]
        self.lake.write_json(self._key(shard), {"summary": report.summary(), "preview": preview})

    def reports(self, shards: Sequence[Shard]) -> dict[Shard, StageReport]:
        """The recorded reports of ``shards`` whose journal entry and committed output exist."""
        recorded = set(self.lake.list(self.prefix))
        return {
            shard: self._report(self.lake.read_json(self._key(shard)))
            for shard in shards
            if self._key(shard) in recorded and is_committed(self.lake, shard.prefix(self.zone))
        }

    @staticmethod
    def _report(entry: dict) -> StageReport:
        report = StageReport.from_summary(entry["summary"])
        report.preview = [dict(row) for row in entry["preview"]]
        return report

    def clear(self) -> None:
        self.lake.delete_prefix(self.prefix)

    @staticmethod
    def clear_run(lake: Lake, run_id: str) -> None:
        """Delete what a run that failed for good journaled: a new run starts from scratch."""
        for zone in lake.list_dirs(JOURNAL):
            lake.delete_prefix(f"{JOURNAL}/{zone}/{run_id}")


class Progress:
    """A log line at most every PROGRESS_EVERY_S while a run works through its shards: each
    log event is a write to the event log, which costs more than a small shard's work."""

    def __init__(self, context: AssetExecutionContext, total: int):
        self.context = context
        self.total = total
        self.count = 0
        self.last = time.monotonic()

    def done(self, shard: Shard) -> None:
        self.count += 1
        if self.count < self.total and time.monotonic() - self.last >= PROGRESS_EVERY_S:
            self.last = time.monotonic()
            asset = self.context.asset_key.to_user_string()
            self.context.log.info(f"{asset}: {self.count} of {self.total} shards done ({shard})")


def check(name: str, verdict: Verdict, warn_only: bool = False) -> AssetCheckResult:
    return AssetCheckResult(
        check_name=name,
        passed=verdict.passed,
        severity=AssetCheckSeverity.WARN if warn_only else AssetCheckSeverity.ERROR,
        description=verdict.description,
        metadata=verdict.metadata,
    )


def stage_result(
    report: StageReport, lake: Lake, prefix: str, checks: list[AssetCheckResult] | None = None
) -> MaterializeResult:
    seconds = max(report.seconds, 1e-9)
    metadata = {
        "records_in": report.records_in,
        "records_out": report.records_out,
        "records_dropped": sum(report.dropped.values()),
        "bytes_in": report.bytes_in,
        "bytes_out": report.bytes_out,
        "duration_s": round(report.seconds, 3),
        "records_per_s": round(report.records_in / seconds, 1),
        "dagster/row_count": report.records_out,
        "location": MetadataValue.path(lake.uri(prefix)),
    }
    # One numeric entry per drop reason, so the UI plots each over partitions.
    for reason, count in sorted(report.dropped.items()):
        metadata[f"dropped {reason}"] = count
        metadata[f"drop_rate {reason}"] = round(count / max(report.records_in, 1), 4)
    for name, value in report.counts.items():
        metadata[name] = MetadataValue.json(value) if isinstance(value, dict | list) else value
    if report.preview:
        metadata["preview"] = _preview_table(report.preview)
    return MaterializeResult(
        metadata=metadata,
        check_results=checks or [],
        data_version=DataVersion(report.data_version()),
    )


def _preview_table(rows: list[dict]) -> MetadataValue:
    columns = list(rows[0])
    records = [TableRecord({c: _cell(row.get(c)) for c in columns}) for row in rows]
    schema = TableSchema(columns=[TableColumn(c, "string") for c in columns])
    return MetadataValue.table(records, schema)


def _cell(value) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= 200 else text[:197] + "..."
