"""When the automation runs each stage: its conditions, written so that an idle tick at corpus
scale (90,000 units per asset) costs milliseconds. Each condition node's subsets are hashed and
written into the sensor's cursor every tick, so no node may hold a set the size of the corpus
while nothing happens: operands that keep the previous tick's whole `missing` set (Dagster's
`newly_missing`, and `on_missing` built on it) are replaced by `NewlyAddedCondition`, and
conjunctions start with the operand that is empty when idle."""

from __future__ import annotations

import logging

from dagster import AssetSelection, AutomationCondition, AutomationContext, AutomationResult

from data_assets.partitions import crawl_units
from tokenmill.stage import Scope, Stage
from tokenmill.stages import STAGES

log = logging.getLogger("tokenmill")


class NewlyAddedCondition(AutomationCondition):
    """Partitions added to the asset's dynamic partitions since the previous evaluation.

    Its cursor is the number of partition keys seen and the last of them: keys are listed in
    the order they were added, so the new ones follow it. None on the first evaluation."""

    @property
    def name(self) -> str:
        return "newly_added"

    @property
    def description(self) -> str:
        return "Partition added since the previous evaluation"

    def __eq__(self, other) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def evaluate(self, context: AutomationContext) -> AutomationResult:
        keys = list(context.partitions_def.get_partition_keys()) if context.partitions_def else []
        added = keys[first_added(keys, context.cursor) :]
        subset = (
            context.asset_graph_view.get_subset_from_partition_keys(
                context.key, context.partitions_def, set(added)
            )
            if added
            else context.get_empty_subset()
        )
        cursor = f"{len(keys)}:{keys[-1]}" if keys else "0:"
        return AutomationResult(
            context, context.candidate_subset.compute_intersection(subset), cursor=cursor
        )


def first_added(keys: list[str], cursor: str | None) -> int:
    """Where the keys added since `cursor` start; none are new on the first evaluation."""
    if cursor is None:
        return len(keys)
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
    same data version (the same bytes where the stages below read) requests nothing. Not on
    inputs requested in the same tick, as `eager` is: each stage runs in runs of its own, after
    its inputs committed. Not on `newly_missing` either: a new unit's partitions are missing
    with their inputs, and the first materialization of an input is a data-version change."""
    input_changed = AutomationCondition.any_deps_match(
        AutomationCondition.data_version_changed()
    ).with_label("any_deps_data_changed")
    # A stage added to a deployment (or first evaluated by a new cursor) builds the missing
    # partitions whose inputs exist, once; the others wait for their inputs as usual.
    return (
        (input_changed.since_last_handled() | first_seen_missing())
        & ~AutomationCondition.any_deps_missing()
        & ~AutomationCondition.any_deps_in_progress()
        & ~AutomationCondition.in_progress()
    ).with_label("follows changed inputs")


def automation_condition(stage: Stage) -> AutomationCondition | None:
    if not stage.automatic:
        return None
    if stage.name == STAGES[0].name:
        # Every new unit, whoever registered it (landing sensor, reconciliation job,
        # `tokenmill register`), is launched once. Units registered before the condition's
        # first evaluation (a new deployment, a sensor that starts after the registration)
        # are launched once at that evaluation.
        return (
            newly_registered() | first_seen_missing() | AutomationCondition.code_version_changed()
        )
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
    # Each stage follows its inputs' data, and re-runs when its recipe section changes.
    condition = follows_changed_inputs() | (
        AutomationCondition.code_version_changed() & ~AutomationCondition.missing()
    )
    if stage.boundary:
        # The unit list tells Dagster when the crawl stage is stale; its inputs on every unit
        # (the gathered observation) trigger the recomputation.
        return condition.ignore(AssetSelection.assets(crawl_units.key))
    return condition
