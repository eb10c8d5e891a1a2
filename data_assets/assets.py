"""The stages as partitioned assets, built from their declarations (`tokenmill.stages`): each
asset hands its partition to the processing core and reports what it did."""

import os

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetSelection,
    AutomationCondition,
    BackfillPolicy,
    Config,
    MaterializeResult,
    TableColumn,
    TableSchema,
    asset,
)

from data_assets.k8s import op_tags
from data_assets.partitions import (
    crawl_partitions,
    crawl_signatures,
    crawl_units,
    unit_duplicates,
    unit_partitions,
    versioned,
)
from data_assets.recipe import Recipe
from data_assets.results import STAGE_RETRY, fail_permanently_on, stage_result
from resources.lake import LakeResource
from resources.workers import WorkersResource
from tokenmill.layout import DEDUP_CLUSTERS, DEDUPLICATED, Unit, check_name, crawl_prefix
from tokenmill.parts import run_stage_work
from tokenmill.stage import Scope, Stage
from tokenmill.stages import STAGES

# Who answers for the dataset's assets (shown in the UI; TOKENMILL_OWNERS, comma-separated).
OWNERS = [o for o in os.environ.get("TOKENMILL_OWNERS", "team:pretraining-data").split(",") if o]
# Bumped when a stage's code changes what it writes; the recipe's hash is added per stage.
CODE_VERSION = "2"
PARTITIONS = {Scope.UNIT: unit_partitions, Scope.CRAWL: crawl_partitions, Scope.LAKE: None}
# Where a stage meets a dependency across the unit/crawl boundary, it depends on the bridge
# (see data_assets/partitions.py) instead of the stage itself.
BRIDGED = {
    (DEDUP_CLUSTERS, "dedup_signatures"): [crawl_signatures.key, crawl_units.key],
    (DEDUPLICATED, DEDUP_CLUSTERS): [unit_duplicates.key],
}
# The unit list tells Dagster when the clusters are stale; the signatures of all units (the
# crawl_signatures observation) trigger the recomputation.
IGNORED_FOR_AUTOMATION = {DEDUP_CLUSTERS: [crawl_units.key]}


def column_schema(schema) -> TableSchema:
    return TableSchema(columns=[TableColumn(f.name, str(f.type)) for f in schema])


def automation_condition(stage: Stage) -> AutomationCondition:
    if stage.name == STAGES[0].name:
        # Every new unit, whoever registered it (landing sensor, reconciliation job,
        # `tokenmill register`), is a newly missing partition: launched once.
        return AutomationCondition.on_missing() | AutomationCondition.code_version_changed()
    if stage.scope is Scope.LAKE:
        # Built once, when there is text to train on; changing it re-tokenizes everything,
        # so that is a deliberate launch.
        return (
            AutomationCondition.missing()
            & AutomationCondition.any_deps_match(~AutomationCondition.missing())
            & ~AutomationCondition.any_deps_missing()
            & ~AutomationCondition.any_deps_in_progress()
            & ~AutomationCondition.in_progress()
        )
    # Each stage follows its inputs, and re-runs when its recipe section changes.
    condition = AutomationCondition.eager() | (
        AutomationCondition.code_version_changed() & ~AutomationCondition.missing()
    )
    ignored = IGNORED_FOR_AUTOMATION.get(stage.name)
    return condition.ignore(AssetSelection.assets(*ignored)) if ignored else condition


def dependencies(stage: Stage) -> list:
    deps = []
    for upstream in stage.upstream:
        deps += BRIDGED.get((stage.name, upstream), [upstream])
    return deps


def stage_asset(stage: Stage, recipe: Recipe):
    scope = stage.scope
    checks = [AssetCheckSpec(c.name, asset=stage.name) for c in stage.checks]
    config_class = recipe.config_class(stage) if stage.settings else Config

    @asset(
        name=stage.name,
        partitions_def=PARTITIONS[scope],
        deps=dependencies(stage),
        op_tags=op_tags(stage),
        pool=stage.name,
        retry_policy=STAGE_RETRY,
        # One partition per run: its metadata, row count and data version are its own.
        backfill_policy=BackfillPolicy.multi_run(1) if scope is not Scope.LAKE else None,
        automation_condition=automation_condition(stage),
        code_version=f"{CODE_VERSION}-{recipe.version(stage.settings)}",
        group_name=stage.group,
        kinds=set(stage.kinds),
        check_specs=checks,
        description=stage.description,
        owners=OWNERS,
        metadata={"dagster/column_schema": column_schema(stage.schema)} if stage.schema else None,
    )
    def stage_asset_fn(
        context: AssetExecutionContext,
        config: config_class,
        lake: LakeResource,
        workers: WorkersResource,
    ) -> MaterializeResult:
        data = lake.get_lake()
        overrides = recipe.overrides(stage.settings, config) if stage.settings else {}
        with fail_permanently_on(context):
            settings = recipe.settings(stage.settings, overrides) if stage.settings else None
            unit = Unit.from_key(context.partition_key) if scope is Scope.UNIT else None
            crawl = context.partition_key if scope is Scope.CRAWL else None
            report = run_stage_work(
                stage,
                data,
                settings,
                unit=unit,
                crawl=crawl,
                workers=workers.count(),
                memory_limit=workers.memory_limit_bytes(),
                resume=context.run.tags.get("dagster/root_run_id") or context.run.run_id,
            )
        if stage.name == DEDUP_CLUSTERS:
            versions = report.counts.pop("unit_versions")
            report.counts["units_changed"] = _report_unit_duplicates(context, data, crawl, versions)
        location = (
            unit.prefix(stage.name)
            if unit
            else crawl_prefix(stage.name, crawl)
            if crawl
            else stage.name
        )
        results = [_check(c, data, unit or crawl) for c in stage.checks]
        result = stage_result(report, data, location, results)
        if overrides:
            result.metadata["recipe_overrides"] = overrides
        result.metadata["recipe"] = recipe.source
        return result

    return stage_asset_fn


def _check(check, lake, partition) -> AssetCheckResult:
    verdict = check.verify(lake, partition)
    return AssetCheckResult(
        check_name=check.name,
        passed=verdict.passed,
        severity=AssetCheckSeverity.WARN if check.warn_only else AssetCheckSeverity.ERROR,
        description=verdict.description,
        metadata=verdict.metadata,
    )


def _report_unit_duplicates(context, lake, crawl: str, versions: dict[str, str]) -> int:
    """Report `unit_duplicates` for the units whose removed documents changed since the last
    report (kept in the lake, written after the events, so a retry reports them again)."""
    # Beside the crawl's clusters, not among them: committing the clusters removes every file
    # under their prefix that the run did not write.
    reported_key = f"{DEDUP_CLUSTERS}/_reported/{check_name(crawl, 'crawl name')}.json"
    reported = lake.read_json(reported_key) if lake.exists(reported_key) else {}
    changed = {name: v for name, v in versions.items() if reported.get(name) != v}
    for name, version in changed.items():
        # An observation: Dagster reads an external asset's data versions from observations.
        context.log_event(versioned(unit_duplicates.key, f"{crawl}/{name}", version))
    if changed:
        lake.write_json(reported_key, versions)
    return len(changed)


def stage_assets(recipe: Recipe) -> list:
    return [stage_asset(stage, recipe) for stage in STAGES]
