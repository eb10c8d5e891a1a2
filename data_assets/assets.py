"""The stages as partitioned assets, built from their declarations (`tokenmill.stages`): each
asset hands its partition to the processing core and reports what it did."""

import os

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetIn,
    AssetKey,
    BackfillPolicy,
    Config,
    DynamicOut,
    DynamicOutput,
    In,
    MaterializeResult,
    Nothing,
    OpExecutionContext,
    Out,
    Output,
    TableColumn,
    TableSchema,
    asset,
    config_mapping,
    graph_asset,
    op,
)
from pydantic import Field, create_model
from tokenmill.data_assets.conditions import automation_condition
from tokenmill.data_assets.current import (
    INPUTS,
    KEPT,
    OUTSIDE,
    OVERRIDES,
    RECOMPUTE_TAG,
    current_output,
    input_data_versions,
)
from tokenmill.data_assets.datasets import Catalog, Dataset
from tokenmill.data_assets.groups import group_name
from tokenmill.data_assets.k8s import op_tags
from tokenmill.data_assets.partitions import (
    crawl_partitions,
    crawl_units,
    unit_partitions,
    versioned,
)
from tokenmill.data_assets.recipe import config_overrides, run_config_class
from tokenmill.data_assets.release_inputs import planned_observation
from tokenmill.data_assets.results import (
    STAGE_RETRY,
    fail_permanently_on,
    partition_totals,
    stage_result,
)
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.step_io import STEP_IO, STEPS
from tokenmill.resources.workers import WorkersResource

from tokenmill.crawl.units import registered_units
from tokenmill.filters.histograms import gathered
from tokenmill.runtime.budget import cpu_time
from tokenmill.runtime.parts import run_stage_work
from tokenmill.runtime.stage import Scope, Stage, Work
from tokenmill.stages import STAGES, stage_named
from tokenmill.storage.lake import LakeAccessError
from tokenmill.storage.layout import Unit, check_name, crawl_prefix
from tokenmill.storage.outputs import WARNINGS, is_committed
from tokenmill.storage.rollups import Rollup

# Who answers for the dataset's assets (shown in the UI; TOKENMILL_OWNERS, comma-separated).
OWNERS = [o for o in os.environ.get("TOKENMILL_OWNERS", "team:pretraining-data").split(",") if o]
# Bumped when a stage's code changes what it writes; the recipe's hash is added per stage.
CODE_VERSION = "4"
# Steps running a fanned-out stage's pieces at once (see fan_out_asset), unless a run says.
PARALLEL_STEPS_ENV = "TOKENMILL_PARALLEL_STEPS"
PARALLEL_STEPS = int(os.environ.get(PARALLEL_STEPS_ENV) or 1)
# What each parallel step of a fanned-out stage adds to its summary: its CPU seconds.
CPU_S = "cpu_s"
PARTITIONS = {Scope.UNIT: unit_partitions, Scope.CRAWL: crawl_partitions, Scope.LAKE: None}


def column_schema(schema) -> TableSchema:
    return TableSchema(columns=[TableColumn(f.name, str(f.type)) for f in schema])


def dependencies(stage: Stage, dataset: Dataset) -> list[AssetKey]:
    """The stage's inputs; across the unit/crawl boundary, the bridges a crawl stage declares
    (see data_assets/partitions.py) instead of the stages themselves."""
    if stage.follows:  # made from every unit: follows what it would make now instead
        return [dataset.key(stage.follows)]
    deps = []
    read = stage.reads(dataset.recipe.settings(stage.settings)) if stage.reads else ()
    for name in (*stage.upstream, *read):
        upstream = stage_named(name)
        if stage.scope is Scope.CRAWL and upstream.scope is Scope.UNIT and stage.boundary:
            deps += [dataset.key(stage.boundary.gathered), crawl_units.key]
        elif stage.scope is Scope.UNIT and upstream.scope is Scope.CRAWL and upstream.boundary:
            deps.append(dataset.key(upstream.boundary.reported or name))
        else:
            deps.append(dataset.key(name))
    return deps


def asset_options(stage: Stage, dataset: Dataset) -> dict:
    """What a stage's asset declares, whether one op or a graph of ops computes it."""
    scope = stage.scope
    key = dataset.key(stage.name)
    description = stage.description
    if dataset.prefix:
        description = f"Recipe {dataset.prefix} ({dataset.recipe.source}): {description}"
    return dict(
        key=key,
        partitions_def=PARTITIONS[scope],
        # One partition per run: its metadata, row count and data version are its own.
        backfill_policy=BackfillPolicy.multi_run(1) if scope is not Scope.LAKE else None,
        automation_condition=automation_condition(
            stage, dataset.recipe.settings(stage.settings) if stage.settings else None
        ),
        code_version="-".join(
            filter(None, (CODE_VERSION, dataset.recipe.version(stage.settings), stage.version))
        ),
        group_name=group_name(stage.group, dataset.prefix),
        kinds=set(stage.kinds),
        check_specs=[AssetCheckSpec(c.name, asset=key) for c in stage.checks],
        description=description,
        owners=OWNERS,
        metadata={"dagster/column_schema": column_schema(stage.schema)} if stage.schema else None,
    )


def partition_of(stage: Stage, context) -> tuple[Unit | None, str | None]:
    unit = Unit.from_key(context.partition_key) if stage.scope is Scope.UNIT else None
    crawl = context.partition_key if stage.scope is Scope.CRAWL else None
    return unit, crawl


def settings_of(stage: Stage, recipe, config) -> tuple[dict, object]:
    """What a run's config changes from the recipe, and the stage's settings for the run."""
    if not stage.settings:
        return {}, None
    overrides = config_overrides(recipe, stage.settings, config)
    return overrides, recipe.settings(stage.settings, overrides)


def stage_asset(stage: Stage, dataset: Dataset):
    if stage.fan_out:
        return fan_out_asset(stage, dataset)
    recipe = dataset.recipe
    config_class = run_config_class(recipe, stage) if stage.settings else Config

    @asset(
        **asset_options(stage, dataset),
        deps=dependencies(stage, dataset),
        op_tags=op_tags(stage),
        pool=stage.name,
        retry_policy=STAGE_RETRY,
    )
    def stage_asset_fn(
        context: AssetExecutionContext,
        config: config_class,
        lake: LakeResource,
        workers: WorkersResource,
    ) -> MaterializeResult:
        data = dataset.lake(lake.get_lake())
        with fail_permanently_on(context):
            overrides, settings = settings_of(stage, recipe, config)
            unit, crawl = partition_of(stage, context)
            kept = inputs = None
            if stage.scope is not Scope.LAKE:  # the tokenizer is made again on purpose
                inputs = input_data_versions(context)
                if stage.outside is not None:
                    inputs[OUTSIDE] = stage.outside(data, settings, unit)
                location = location_of(stage, unit, crawl)
                kept = current_output(context, data, location, overrides, inputs)
            fed = None if kept else fed_settings(context, stage, dataset, data, unit, settings)
            report = kept or run_stage_work(
                stage,
                data,
                settings,
                unit=unit,
                crawl=crawl,
                workers=workers.count(),
                memory_limit=workers.memory_limit_bytes(),
                resume=context.run.tags.get("dagster/root_run_id") or context.run.run_id,
                fed_settings=fed,
            )
        if kept:
            context.log.info(
                "the committed output is current (same code, settings and inputs): kept"
            )
        result = stage_output(context, stage, dataset, data, report, overrides, kept=bool(kept))
        if inputs is not None:
            result.metadata[INPUTS] = inputs
        return result

    return stage_asset_fn


def fed_settings(context, stage: Stage, dataset: Dataset, lake, unit: Unit | None, settings):
    """The settings of the stage this one feeds (`Stage.feeds`) when the run makes that
    stage's partition anew too: its parts are then made in this stage's pass over each file,
    and its own step keeps them. None when the run does not select it, gives it a run config of
    its own, finds it committed already (unless the run recomputes), or reads records to
    another size limit."""
    if not stage.feeds or unit is None:
        return None
    fed = stage_named(stage.feeds)
    key = dataset.key(fed.name)
    selected = context.run.asset_selection or ()
    configured = (context.run.run_config or {}).get("ops") or {}
    if key not in selected or key.to_python_identifier() in configured:
        return None
    if is_committed(lake, unit.prefix(fed.name)) and context.run.tags.get(RECOMPUTE_TAG) != "true":
        return None  # its own step may find it current and keep it
    own = dataset.recipe.settings(fed.settings)
    limit = getattr(settings or stage.settings(), "max_record_mb", None)
    return own if getattr(own, "max_record_mb", None) == limit else None


def location_of(stage: Stage, unit: Unit | None, crawl: str | None) -> str:
    """The lake prefix of a stage's partition."""
    if unit:
        return unit.prefix(stage.name)
    return crawl_prefix(stage.name, crawl) if crawl else stage.name


def stage_output(
    context, stage, dataset: Dataset, lake, report, overrides, kept: bool = False
) -> MaterializeResult:
    """The materialization of a stage's partition: its report, checks and recipe."""
    unit, crawl = partition_of(stage, context)
    if stage.distributions_of and crawl:
        units = [u.prefix(stage.distributions_of) for u in registered_units(lake, crawl)]
        report.histograms, without, sums = gathered(lake, units, stage.crawl_sums)
        report.counts |= sums
        if without:
            report.counts["units_without_histograms"] = without
    else:  # kept in the units' markers, drawn by the crawl stage that declares them
        report.histograms = {}
    if stage.boundary and stage.boundary.reported:
        versions = report.counts.pop("unit_versions")
        reported = dataset.key(stage.boundary.reported)
        report.counts["units_changed"] = _report_units(
            context, lake, stage, reported, crawl, versions
        )
    location = location_of(stage, unit, crawl)
    results = [_check(c, lake, unit or crawl) for c in stage.checks]
    for warning in report.counts.get(WARNINGS, []):
        context.log.warning(warning)
    result = stage_result(report, lake, location, results, stage.data_files)
    if unit or crawl:  # the partition's own rows; the asset's over every partition below
        result.metadata["dagster/partition_row_count"] = result.metadata.pop("dagster/row_count")
        try:
            result.metadata.update(partition_totals(Rollup(lake, stage.name), unit, crawl, report))
        except (LakeAccessError, OSError) as error:  # the output is committed: only its sums miss
            context.log.warning(f"totals over the partitions of {stage.name} not updated: {error}")
    if overrides:
        result.metadata[OVERRIDES] = overrides
    if kept:
        result.metadata[KEPT] = True
    result.metadata["recipe"] = dataset.recipe.source
    return result


def fan_out_asset(stage: Stage, dataset: Dataset):
    """A stage that fans out (``Stage.fan_out``) as a graph-backed asset: a plan step, then
    ``parallel_steps`` steps each running a share of the pieces (a pod each on Kubernetes,
    sized by the stage's op tags), then a finish step that writes the output and materializes
    the asset. Steps hand each other only piece names and summaries, through the lake."""
    fan_out = stage.fan_out
    recipe = dataset.recipe
    config_class = fan_out_config(stage, recipe)
    step = dict(tags=op_tags(stage), retry_policy=STAGE_RETRY)
    inputs = {
        key.to_python_identifier(): AssetIn(key, dagster_type=Nothing)
        for key in dependencies(stage, dataset)
    }
    # the graph's outputs: the asset's, then one per check, in the finish op's order
    key = dataset.key(stage.name)
    checks = [AssetCheckSpec(c.name, asset=key).get_python_identifier() for c in stage.checks]

    def work_of(context, config, lake: LakeResource) -> Work:
        unit, crawl = partition_of(stage, context)
        settings = settings_of(stage, recipe, config)[1]
        return Work(dataset.lake(lake.get_lake()), stage.name, settings, unit=unit, crawl=crawl)

    @op(
        name=dataset.op_name(f"{stage.name}_plan"),
        ins={name: In(Nothing) for name in inputs},
        out=DynamicOut(list, io_manager_key=STEP_IO),
        pool=stage.name,
        **step,
    )
    def plan(context: OpExecutionContext, config: config_class, lake: LakeResource):
        with fail_permanently_on(context):
            work = work_of(context, config, lake)
            if stage.follows:  # before planning: the version this run makes (see there)
                observed = planned_observation(
                    context.instance, lake.get_lake(), dataset, work.settings
                )
                if observed:
                    context.log_event(observed)
            pieces = fan_out.plan(work)
        steps = max(1, min(config.parallel_steps, len(pieces)))
        for index in range(steps):
            yield DynamicOutput(pieces[index::steps], mapping_key=str(index))

    @op(
        name=dataset.op_name(f"{stage.name}_part"),
        out=Out(dict, io_manager_key=STEP_IO),
        pool=f"{stage.name}_parts",
        **step,
    )
    def part(
        context: OpExecutionContext,
        config: config_class,
        lake: LakeResource,
        workers: WorkersResource,
        pieces: list,
    ) -> dict:
        with fail_permanently_on(context):
            started = cpu_time()
            summary = fan_out.run(work_of(context, config, lake), pieces, workers.count())
            return {**summary, CPU_S: cpu_time() - started}

    @op(
        name=dataset.op_name(f"{stage.name}_finish"),
        out={"result": Out(Nothing), **{name: Out(Nothing, is_required=False) for name in checks}},
        pool=stage.name,
        **step,
    )
    def finish(context: OpExecutionContext, config: config_class, lake: LakeResource, shares: list):
        with fail_permanently_on(context):
            started = cpu_time()
            overrides, _ = settings_of(stage, recipe, config)
            report = fan_out.finish(work_of(context, config, lake), shares)
            report.cpu_s = cpu_time() - started + sum(share[CPU_S] for share in shares)
        data = dataset.lake(lake.get_lake())
        result = stage_output(context, stage, dataset, data, report, overrides)
        yield Output(None, "result", metadata=result.metadata, data_version=result.data_version)
        yield from result.check_results
        # the values this graph's steps handed each other are spent, this run's and those of
        # the earlier attempts it retried from (a run may hold the same stage of other
        # recipes: theirs may not be)
        tags = context.run.tags
        attempts = {
            context.run_id,
            tags.get("dagster/parent_run_id"),
            tags.get("dagster/root_run_id"),
        }
        graph = "__".join(key.path)  # the graph's node: its steps are "<node>.<op>"
        try:
            data = lake.get_lake()
            for run_steps in (f"{STEPS}/{run_id}" for run_id in sorted(attempts - {None})):
                for step in data.list_dirs(run_steps):
                    if step.startswith(f"{graph}."):
                        data.delete_prefix(f"{run_steps}/{step}")
        except (LakeAccessError, OSError) as error:
            context.log.warning(f"step values of run {context.run_id} not deleted: {error}")

    @config_mapping
    def same_config_for_every_step(config: config_class) -> dict:
        values = config.model_dump()
        return {node.name: {"config": values} for node in (plan, part, finish)}

    def compose(**upstream):
        outputs = finish(plan(**upstream).map(part).collect())
        if not checks:
            return outputs
        return dict(zip(["result", *checks], outputs, strict=True))

    return graph_asset(
        **asset_options(stage, dataset), ins=inputs, config=same_config_for_every_step
    )(compose)


def fan_out_config(stage: Stage, recipe) -> type[Config]:
    """The stage's run config, and how many parallel steps run its pieces."""
    return create_model(
        f"{recipe.name.title()}{stage.name.title().replace('_', '')}FanOutConfig",
        __base__=run_config_class(recipe, stage) if stage.settings else Config,
        parallel_steps=(
            int,
            Field(
                default=PARALLEL_STEPS,
                ge=1,
                description="Steps (pods on Kubernetes) sharing the stage's pieces; "
                f"default: {PARALLEL_STEPS_ENV} or 1",
            ),
        ),
    )


def _check(check, lake, partition) -> AssetCheckResult:
    verdict = check.verify(lake, partition)
    return AssetCheckResult(
        check_name=check.name,
        passed=verdict.passed,
        severity=AssetCheckSeverity.WARN if check.warn_only else AssetCheckSeverity.ERROR,
        description=verdict.description,
        metadata=verdict.metadata,
    )


def _report_units(
    context, lake, stage: Stage, key: AssetKey, crawl: str, versions: dict[str, str]
) -> int:
    """Report the stage's `reported` asset (`key`) for the units whose share of its output
    changed since the last report (kept in the lake, written after the events, so a retry
    reports them again)."""
    # Beside the crawl's output, not in it: committing the output removes every file under its
    # prefix that the run did not write.
    reported_key = f"{stage.name}/_reported/{check_name(crawl, 'crawl name')}.json"
    reported = lake.read_json(reported_key) if lake.exists(reported_key) else {}
    changed = {name: v for name, v in versions.items() if reported.get(name) != v}
    for name, version in changed.items():
        # An observation: Dagster reads an external asset's data versions from observations.
        context.log_event(versioned(key, f"{crawl}/{name}", version))
    if changed:
        lake.write_json(reported_key, versions)
    return len(changed)


def stage_assets(catalog: Catalog) -> list:
    return [stage_asset(stage, dataset) for stage in STAGES for dataset in catalog.serving(stage)]
