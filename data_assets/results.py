"""What every stage asset shares: error translation and materialization metadata."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    Backoff,
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
from pydantic import ValidationError

from tokenmill.crawl.warc import UnusableInputError
from tokenmill.dagster_internals import DagsterInvalidPropertyError
from tokenmill.reports.plots import markdown
from tokenmill.storage.lake import Lake, LakeKeyError, LakeRefusedError, LakeUnreachableError
from tokenmill.storage.layout import Unit
from tokenmill.storage.outputs import (
    LANGUAGES_BY_FILE,
    WARNINGS,
    MissingInputError,
    StageReport,
)
from tokenmill.storage.rollups import Rollup

# Transient faults (object store, network, preempted node, a worker killed) get retried with
# backoff; bad input, bad settings and a broken installation fail at once, see
# `fail_permanently_on`.
STAGE_RETRY = RetryPolicy(
    max_retries=3, delay=5, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS
)
# Retrying cannot fix these: the failure names the cause instead of "Exceeded max_retries".
PERMANENT_ERRORS = (
    UnusableInputError,
    MissingInputError,
    LakeKeyError,
    LakeRefusedError,
    ImportError,
    ValidationError,
    ValueError,
    TypeError,
    KeyError,
)
# An unreachable object store (restart, outage, network partition) is waited out: attempts
# after 5, 10, 20 and 40 s ride out ~75 s of outage on top of the SDK's own request retries.
# Wrong credentials or a missing bucket are not (LakeRefusedError).
OUTAGE_RETRIES = 4
OUTAGE_FIRST_WAIT_S = 5.0
# An input found missing while another run is at work on its asset: it is being written again.
INPUT_RETRIES = 4
INPUT_FIRST_WAIT_S = 2.0
DRAWN = (
    "Each rule's value over every extracted document (whatever its language), the recipe's "
    "thresholds in blue; bins 0.01 wide in [0, 1], 10 per decade above 1."
)


@contextmanager
def fail_permanently_on(context: AssetExecutionContext | None = None) -> Iterator[None]:
    attempt = context.retry_number if context is not None else 0
    try:
        yield
    except LakeUnreachableError as error:
        if attempt < OUTAGE_RETRIES:
            # Raised directly (not left to STAGE_RETRY) so the final failure below carries
            # the explanation instead of Dagster's "Exceeded max_retries".
            wait = OUTAGE_FIRST_WAIT_S * 2**attempt
            raise RetryRequested(max_retries=OUTAGE_RETRIES, seconds_to_wait=wait) from error
        raise Failure(
            description=f"{error} (given up after {attempt + 1} attempts)", allow_retries=False
        ) from error
    except BrokenProcessPool:
        raise  # a worker died (killed, out of memory): the retry resumes after its parts
    except MissingInputError as error:
        # an input another run is writing again (its marker goes first) is waited for; one
        # nobody is writing stays missing
        if context is not None and attempt < INPUT_RETRIES and _input_at_work(context):
            wait = INPUT_FIRST_WAIT_S * 2**attempt
            raise RetryRequested(max_retries=INPUT_RETRIES, seconds_to_wait=wait) from error
        raise Failure(description=describe(error), allow_retries=False) from error
    except PERMANENT_ERRORS as error:
        raise Failure(description=describe(error), allow_retries=False) from error


def _input_at_work(context: AssetExecutionContext) -> bool:
    """Whether another live run is at work on an asset the step's asset reads."""
    from tokenmill.runs.claims import at_work_elsewhere

    try:
        upstream = frozenset(context.assets_def.dependency_keys)
    except DagsterInvalidPropertyError:
        return False
    return bool(upstream) and at_work_elsewhere(context.instance, context.run_id, upstream)


def describe(error: BaseException) -> str:
    """Its type and message, with its notes (which file of the unit it came from)."""
    return "".join(traceback.format_exception_only(error)).strip()


# A warning in the materialization's metadata: a Markdown list item, one a line.
WARNING_ITEM = "- **warning**: "
# Counts kept in the lake's markers only: thousands of histogram bins per unit (or every
# setting of the recipe, which the code version and `recipe_overrides` already name) would
# weigh on the event log (every unit's materialization) for nothing the UI shows.
MARKER_ONLY_COUNTS = frozenset({"score_histograms", "clean_settings", LANGUAGES_BY_FILE})


def stage_result(
    report: StageReport,
    lake: Lake,
    prefix: str,
    checks: list[AssetCheckResult] | None = None,
    data_files: tuple[str, ...] = (),
) -> MaterializeResult:
    metadata = {
        "records_in": report.records_in,
        "records_out": report.records_out,
        "records_dropped": sum(report.dropped.values()),
        "bytes_in": report.bytes_in,
        "bytes_out": report.bytes_out,
        "duration_s": round(report.seconds, 3),
        "cpu_s": round(report.cpu_s, 3),
        "dagster/row_count": report.records_out,
        "location": MetadataValue.path(lake.uri(prefix)),
    }
    if report.fed_cpu_s:  # it fed the next stage in the same pass over each file
        metadata["fed_cpu_s"] = round(report.fed_cpu_s, 3)
    if report.start_cpu_s >= 0.0005:  # its workers' start-up, not in cpu_s
        metadata["start_cpu_s"] = round(report.start_cpu_s, 3)
    if report.fed_parts:  # made in the pass of the stage feeding it
        metadata["fed_parts"] = report.fed_parts
    if report.seconds > 0:  # not for a kept output, which took no time
        metadata["records_per_s"] = round(report.records_in / report.seconds, 1)
    # One numeric entry per drop reason, so the UI plots each over partitions.
    for reason, count in sorted(report.dropped.items()):
        metadata[f"dropped {reason}"] = count
        metadata[f"drop_rate {reason}"] = round(count / max(report.records_in, 1), 4)
    for name, value in report.counts.items():
        if name in MARKER_ONLY_COUNTS or name == WARNINGS:  # warnings: as text, below
            continue
        metadata[name] = MetadataValue.json(value) if isinstance(value, dict | list) else value
    if warnings := report.counts.get(WARNINGS):
        metadata[WARNINGS] = MetadataValue.md("\n".join(WARNING_ITEM + w for w in warnings))
    if report.preview:
        metadata["preview"] = _preview_table(report.preview)
    if report.histograms:
        metadata["rule_distributions"] = MetadataValue.md(markdown(report.histograms, DRAWN))
    return MaterializeResult(
        metadata=metadata,
        check_results=checks or [],
        data_version=DataVersion(report.data_version(data_files)),
    )


def _preview_table(rows: list[dict]) -> MetadataValue:
    columns = list(rows[0])
    records = [TableRecord({c: _cell(row.get(c)) for c in columns}) for row in rows]
    schema = TableSchema(columns=[TableColumn(c, "string") for c in columns])
    return MetadataValue.table(records, schema)


def _cell(value) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= 200 else text[:197] + "..."


def partition_totals(
    rollup: Rollup, unit: Unit | None, crawl: str | None, report: StageReport
) -> dict:
    """The asset's totals over its partitions after this one's run, from the stage's running
    totals (`tokenmill.storage.rollups`): `dagster/row_count` and `dagster/size_bytes` (what the
    asset's overview shows), and the crawl's."""
    tokens = report.counts.get("tokens")
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0
    in_crawl, everywhere = rollup.record(
        unit.crawl if unit else crawl,
        unit.name if unit else crawl,
        report.records_out,
        report.bytes_out,
        tokens,
    )
    metadata = {
        "dagster/row_count": everywhere.records,
        "dagster/size_bytes": everywhere.bytes,
        f"{'units' if unit else 'crawls'}_counted": everywhere.parts,
    }
    if unit:
        metadata |= {
            "crawl_records_out": in_crawl.records,
            "crawl_bytes_out": in_crawl.bytes,
            "crawl_units_counted": in_crawl.parts,
        }
    if tokens:
        metadata["total_tokens"] = everywhere.tokens
        if unit:
            metadata["crawl_tokens"] = in_crawl.tokens
    return metadata
