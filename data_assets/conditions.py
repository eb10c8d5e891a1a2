"""When the automation runs each stage: its conditions, written so that an idle tick at corpus
scale (90,000 units per asset) costs milliseconds. Each condition node's subsets are hashed and
written into the sensor's cursor every tick, so no node may hold a set the size of the corpus
while nothing happens: operands that keep the previous tick's whole `missing` set (Dagster's
`newly_missing`, and `on_missing` built on it) are replaced by `NewlyAddedCondition`, and
conjunctions start with the operand that is empty when idle. Nor may an idle tick read the unit
list: `NewlyAddedCondition` reads the keys added after the last one it saw, and the lake-scope
stage asks its inputs' asset records whether they have anything materialized
(`AnyDepsMaterializedCondition`) before it computes their missing partitions."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dagster import (
    AssetRecordsFilter,
    AssetSelection,
    AutomationCondition,
    AutomationContext,
    AutomationResult,
    DynamicPartitionsDefinition,
)
from tokenmill.data_assets.partitions import crawl_units

from tokenmill.dagster_internals import CODE_VERSION_TAG
from tokenmill.runtime.stage import Scope, Stage
from tokenmill.stages import STAGES, stage_named

if TYPE_CHECKING:
    from tokenmill.data_assets.datasets import Catalog

log = logging.getLogger("tokenmill")


class ParameterlessCondition(AutomationCondition):
    """A custom condition without parameters: all of its kind are one condition. Its name and
    description (the UI's) are its class's ``condition_name`` and ``condition_description``."""

    condition_name: str
    condition_description: str

    @property
    def name(self) -> str:
        return self.condition_name

    @property
    def description(self) -> str:
        return self.condition_description

    def __eq__(self, other) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))


class NewlyAddedCondition(ParameterlessCondition):
    """Partitions added to the asset's dynamic partitions since the previous evaluation.

    Its cursor is the storage id of the last partition key seen (``id:`` and Dagster's
    pagination cursor): a tick reads only the keys added after it, not the 90,000 already there.
    None are new on the first evaluation."""

    condition_name = "newly_added"
    condition_description = "Partition added since the previous evaluation"

    def evaluate(self, context: AutomationContext) -> AutomationResult:
        partitions_def = context.partitions_def
        if not isinstance(partitions_def, DynamicPartitionsDefinition):
            return AutomationResult(context, context.get_empty_subset(), cursor=None)
        added, cursor = added_since(
            context.asset_graph_view.instance, partitions_def.name, context.cursor
        )
        subset = (
            context.asset_graph_view.get_subset_from_partition_keys(
                context.key, partitions_def, set(added)
            )
            if added
            else context.get_empty_subset()
        )
        return AutomationResult(
            context, context.candidate_subset.compute_intersection(subset), cursor=cursor
        )


ID_CURSOR = "id:"
PAGE_KEYS = 10_000


def added_since(store, name: str, cursor: str | None) -> tuple[list[str], str]:
    """The keys of dynamic partitions definition `name` added after `cursor`, and the cursor
    after them."""
    if cursor is not None and cursor.startswith(ID_CURSOR):
        added, page = [], cursor.removeprefix(ID_CURSOR)
        while True:
            found = store.get_paginated_dynamic_partitions(name, PAGE_KEYS, True, page)
            added += found.results
            page = found.cursor
            if not found.has_more:
                return added, ID_CURSOR + page
    # the newest key's storage id, taken before the keys are read: a key added in between is
    # seen twice (this tick and the next) rather than never; its run, in progress by the next
    # tick, keeps it to one launch
    newest = ID_CURSOR + store.get_paginated_dynamic_partitions(name, 1, False).cursor
    if cursor is None:
        return [], newest
    # a cursor of an earlier version: the number of keys seen and the last of them
    keys = list(store.get_dynamic_partitions(name))
    return keys[first_added(keys, cursor) :], newest


def first_added(keys: list[str], cursor: str) -> int:
    """Where the keys added since a cursor of the number of keys seen and the last of them
    start (the cursor before storage ids)."""
    count, _, last = cursor.partition(":")
    seen = int(count)
    if seen == 0:
        return 0
    if seen <= len(keys) and keys[seen - 1] == last:
        return seen
    # a partition was deleted since: the new ones follow the last key seen, if it is left
    if last in keys:
        return keys.index(last) + 1
    log.warning("partitions were deleted since the last tick: none launched as new this tick")
    return len(keys)


class AnyDepsMaterializedCondition(ParameterlessCondition):
    """Whether a partition of any input was ever materialized, from the inputs' asset records:
    Dagster's `any_deps_match(~missing())` computes every input's missing partitions (90,000
    keys read and hashed into the cursor) to answer the same (partitions are never deleted)."""

    condition_name = "any_deps_materialized"
    condition_description = "Any input has a materialized partition"

    def evaluate(self, context: AutomationContext) -> AutomationResult:
        queryer = context.asset_graph_view.get_inner_queryer_for_back_compat()
        records = (
            queryer.get_asset_record(key)
            for key in context.asset_graph.get(context.key).parent_entity_keys
        )
        materialized = any(
            record is not None and record.asset_entry.last_materialization_record is not None
            for record in records
        )
        return AutomationResult(
            context, context.candidate_subset if materialized else context.get_empty_subset()
        )


class BuiltWithAnotherCodeVersion(ParameterlessCondition):
    """Partitions whose latest materialization was made by another code version than the
    asset's now. Dagster's `code_version_changed` compares with its own previous evaluation: a
    daemon that last ticked before a recipe change would rebuild what `tokenmill run` (or
    another deployment) has built with the new version since. Read only where the code version
    changed, so an idle tick reads nothing."""

    condition_name = "built_with_another_code_version"
    condition_description = "Latest materialization made by another code version"

    def evaluate(self, context: AutomationContext) -> AutomationResult:
        candidates = context.candidate_subset
        if candidates.is_empty:
            return AutomationResult(context, candidates)
        current = context.asset_graph.get(context.key).code_version
        instance = context.asset_graph_view.instance
        if context.partitions_def is None:
            event = instance.get_latest_materialization_event(context.key)
            built = event and event.asset_materialization.tags.get(CODE_VERSION_TAG)
            return AutomationResult(
                context, candidates if built != current else context.get_empty_subset()
            )
        keys = sorted(candidates.expensively_compute_partition_keys())
        built: dict[str, str | None] = {}
        for start in range(0, len(keys), PAGE_KEYS):
            batch = keys[start : start + PAGE_KEYS]
            cursor = None
            while True:  # newest first: each partition's first record is its latest
                records = instance.fetch_materializations(
                    AssetRecordsFilter(asset_key=context.key, asset_partitions=batch),
                    limit=PAGE_KEYS,
                    cursor=cursor,
                )
                for record in records.records:
                    tags = record.asset_materialization.tags or {}
                    built.setdefault(record.partition_key, tags.get(CODE_VERSION_TAG))
                cursor = records.cursor
                if not records.has_more or len(built) == len(batch):
                    break
        other = {key for key in keys if built.get(key) != current}
        subset = context.asset_graph_view.get_subset_from_partition_keys(
            context.key, context.partitions_def, other
        )
        return AutomationResult(context, candidates.compute_intersection(subset))


def code_version_changed() -> AutomationCondition:
    """The asset's code version changed (its recipe section or code), and its partitions were
    built with another one."""
    return (AutomationCondition.code_version_changed() & BuiltWithAnotherCodeVersion()).with_label(
        "code version changed"
    )


def newly_registered() -> AutomationCondition:
    """Missing partitions added since the previous tick (what Dagster's `on_missing` does for an
    asset without inputs, without keeping every missing partition in the cursor)."""
    return (NewlyAddedCondition() & AutomationCondition.missing()).with_label("newly registered")


def first_seen_missing() -> AutomationCondition:
    return (AutomationCondition.initial_evaluation() & AutomationCondition.missing()).with_label(
        "missing when first evaluated"
    )


def follows_changed_inputs() -> AutomationCondition:
    """Dagster's `eager`, on inputs whose data changed: an input materialized again with the
    same data version (the same bytes where the stages below read) requests nothing, nor does
    an input made by a run that made this stage too (whenever a tick sees that input's change:
    the stage's own update does not always come after it). Not on inputs requested in the same
    tick, as `eager` is: a stage runs after its inputs committed, in runs of its own or, when
    its input feeds it, in the input's run (`MadeWithItsInputCondition`). Not on
    `newly_missing` either: a new unit's partitions are missing with their inputs, and the
    first materialization of an input is a data-version change."""
    input_changed = AutomationCondition.any_deps_match(
        AutomationCondition.data_version_changed()
        & ~AutomationCondition.executed_with_root_target()
    ).with_label("any_deps_data_changed")
    # A stage added to a deployment (or first evaluated by a new cursor) builds the missing
    # partitions whose inputs exist, once; the others wait for their inputs as usual.
    return (
        (input_changed.since_last_handled() | first_seen_missing())
        & ~AutomationCondition.any_deps_missing()
        & ~AutomationCondition.any_deps_in_progress()
        & ~AutomationCondition.in_progress()
    ).with_label("follows changed inputs")


class MadeWithItsInputCondition(ParameterlessCondition):
    """Missing partitions, in no run or backfill, whose input is requested this tick: the stage
    fed by that input (`Stage.feeds`; its only input), which the input's run makes too, one pass
    over each file. The input's automation sensor evaluates this stage as well (a tick sees only
    what its own sensor requests). One node, not Dagster's five (`any_deps_match(
    will_be_requested()) & missing() & ~in_progress()`): each node's subset, every new unit when
    a crawl is registered, is sorted, hashed and written into the cursor."""

    condition_name = "made_with_its_input"
    condition_description = "Missing, and its input is requested this tick"

    async def evaluate(self, context: AutomationContext) -> AutomationResult:
        view = context.asset_graph_view
        subset = context.get_empty_subset()
        for parent in context.asset_graph.get(context.key).parent_entity_keys:
            requested = context.request_subsets_by_key.get(parent)
            if requested is not None and not requested.is_empty:
                mapped = view.compute_child_subset(context.key, requested)
                subset = subset.compute_union(context.candidate_subset.compute_intersection(mapped))
        if not subset.is_empty:
            subset = await view.compute_missing_subset(key=context.key, from_subset=subset)
            for busy in (
                view.compute_run_in_progress_subset,
                view.compute_backfill_in_progress_subset,
            ):
                subset = subset.compute_difference(await busy(key=context.key, from_subset=subset))
        return AutomationResult(context, subset)


def automation_condition(stage: Stage, settings=None) -> AutomationCondition | None:
    """When the automation runs the stage, with these settings (None: any)."""
    if not stage.automatic or stage.idle_with(settings):
        return None
    if stage.name == STAGES[0].name:
        # Every new unit, whoever registered it (landing sensor, reconciliation job,
        # `tokenmill register`), is launched once. Units registered before the condition's
        # first evaluation (a new deployment, a sensor that starts after the registration)
        # are launched once at that evaluation. A unit registered while the first evaluation
        # ran is seen by both (see added_since): the next tick finds its run in progress.
        new = (newly_registered() | first_seen_missing()) & ~AutomationCondition.in_progress()
        return new | code_version_changed()
    if stage.scope is Scope.LAKE and stage.follows_settings:
        # made when first seen missing, then again when its settings change
        missing = first_seen_missing() | (
            AutomationCondition.newly_missing() & AutomationCondition.missing()
        )
        return (missing | code_version_changed()) & ~AutomationCondition.in_progress()
    if stage.scope is Scope.LAKE:
        # Built once, when there is text to train on; changing it re-tokenizes everything,
        # so that is a deliberate launch.
        return (
            AutomationCondition.missing()
            & AnyDepsMaterializedCondition()
            & ~AutomationCondition.any_deps_missing()
            & ~AutomationCondition.any_deps_in_progress()
            & ~AutomationCondition.in_progress()
        )
    # Each stage follows its inputs' data, and re-runs when its recipe section changes.
    condition = follows_changed_inputs() | (code_version_changed() & ~AutomationCondition.missing())
    if any(other.feeds == stage.name for other in STAGES):
        condition = MadeWithItsInputCondition() | condition
    if stage.boundary:
        # The unit list tells Dagster when the crawl stage is stale; its inputs on every unit
        # (the gathered observation) trigger the recomputation.
        return condition.ignore(AssetSelection.assets(crawl_units.key))
    return condition


def automation_sensors(catalog: Catalog) -> dict[str, tuple[Stage, ...]]:
    """Each automation sensor's name and the stages it evaluates: one sensor per stage the
    automation launches, except that a stage and the one it feeds (`Stage.feeds`) share one, so
    that the tick requesting a new unit's first stage requests the stage it feeds with it: one
    run, one pass over each file for both (`MadeWithItsInputCondition`)."""
    launched = [
        stage
        for stage in STAGES
        if catalog.serving(stage) and stage.automatic and not catalog.idle(stage)
    ]
    fed = {stage.feeds for stage in launched} & {stage.name for stage in launched}
    sensors = {}
    for stage in launched:
        if stage.name not in fed:
            together = (stage_named(stage.feeds),) if stage.feeds in fed else ()
            sensors[f"automation_{stage.name}"] = (stage, *together)
    return sensors
