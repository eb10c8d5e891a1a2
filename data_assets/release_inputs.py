"""A release's staleness in Dagster. A release is made from every unit of its recipe's
`tokenized_shards`, but Dagster compares no data of an input of 100 partitions or more
(`SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD`): a release over 90,000 units would never
show stale. So the release follows an unpartitioned external asset instead, `release_inputs`
(per recipe, below the tokenized shards), whose version is the version a release made now would
have (`tokenmill.release.staleness`):

- each release run observes it, before planning, with the version it is about to make, so its
  materialization records that version as its input's;
- the `release_inputs_changed` sensor (and `tokenmill run`) observe it again when tokenized
  shards were materialized since and a release made now would be another one: the release then
  shows stale, with "has a new dependency data version", until the next release.

Nothing launches a release on it (the release has no automation condition). The units read are
those tokenized since the latest release run began (from the instance), so a check reads one
marker per changed unit, not one per unit.
"""

from __future__ import annotations

from dagster import AssetKey, AssetObservation, AssetRecordsFilter, AssetSpec, DagsterInstance
from tokenmill.data_assets.datasets import Catalog, Dataset
from tokenmill.data_assets.groups import group_name
from tokenmill.data_assets.partitions import observable, versioned

from tokenmill.release.plan import ReleaseError, ReleaseSettings, plan_release
from tokenmill.release.staleness import NONE, ReleaseState, release_staleness
from tokenmill.stages import STAGES
from tokenmill.storage.lake import Lake
from tokenmill.storage.outputs import MissingInputError

FOLLOWING = [stage for stage in STAGES if stage.follows]
# how far back from the release's materialization its own run's observation is looked for
OBSERVATIONS_SEARCHED = 50


def followed_spec(stage, dataset: Dataset) -> AssetSpec:
    return AssetSpec(
        dataset.key(stage.follows),
        deps=[dataset.key(name) for name in stage.upstream],
        group_name=group_name(stage.group, dataset.prefix),
        description=f"What a {stage.name} made now would be: its version, observed by each "
        f"{stage.name} run and by the release_inputs_changed sensor when the "
        f"{', '.join(stage.upstream)} change it; {stage.name} follows it (and shows stale "
        "when it changed), but is never launched on it.",
    )


def followed(catalog: Catalog) -> list:
    return [
        observable(followed_spec(stage, dataset))
        for stage in FOLLOWING
        for dataset in catalog.serving(stage)
    ]


def release_key(dataset: Dataset) -> AssetKey:
    (stage,) = FOLLOWING
    return dataset.key(stage.name)


def inputs_key(dataset: Dataset) -> AssetKey:
    (stage,) = FOLLOWING
    return dataset.key(stage.follows)


def observed_version(instance: DagsterInstance, key: AssetKey) -> str | None:
    records = instance.fetch_observations(key, limit=1).records
    return records[0].asset_observation.data_version if records else None


def made_from(instance: DagsterInstance, dataset: Dataset) -> tuple[str, int] | None:
    """The version of `release_inputs` the latest release run observed and that observation's
    storage id; None without a release materialized on this instance."""
    made = instance.fetch_materializations(release_key(dataset), limit=1).records
    if not made:
        return None
    observations = instance.fetch_observations(
        AssetRecordsFilter(asset_key=inputs_key(dataset), before_storage_id=made[0].storage_id),
        limit=OBSERVATIONS_SEARCHED,
    ).records
    for record in observations:
        if record.run_id == made[0].run_id:
            return record.asset_observation.data_version, record.storage_id
    return None


def touched_since(instance: DagsterInstance, dataset: Dataset, storage_id: int) -> set[str]:
    (stage,) = FOLLOWING
    touched: set[str] = set()
    for name in stage.upstream:
        touched |= instance.get_materialized_partitions(dataset.key(name), after_cursor=storage_id)
    return touched


def release_state(
    lake: Lake, dataset: Dataset, instance: DagsterInstance | None = None, settings=None
) -> ReleaseState:
    """The recipe's latest release against one made now (with the recipe's release settings,
    or `settings`), reading only the units tokenized since the latest release run on
    `instance` began, when that run published the lake's latest release; every unit
    otherwise (and without an instance)."""
    recipe_lake = dataset.lake(lake)
    settings = settings or dataset.recipe.settings(ReleaseSettings)
    made = made_from(instance, dataset) if instance is not None else None
    touched = None
    if made is not None:
        touched = touched_since(instance, dataset, made[1])
    state = release_staleness(recipe_lake, settings, touched)
    if made is not None and state.latest != made[0]:  # published elsewhere: read every unit
        state = release_staleness(recipe_lake, settings)
    return state


def planned_observation(
    instance: DagsterInstance, lake: Lake, dataset: Dataset, settings
) -> AssetObservation | None:
    """What a release run observes before it plans: the version it is about to make (read
    before the plan reads the markers, so a unit tokenized meanwhile can only make the release
    look stale, never fresh). None when no release can be made now (the plan then fails)."""
    state = release_state(lake, dataset, instance, settings)
    version = state.planned
    if state.state == NONE:
        try:
            version = plan_release(dataset.lake(lake), settings).version
        except (ReleaseError, MissingInputError):
            return None
    return versioned(inputs_key(dataset), None, version) if version else None


def release_input_changes(
    instance: DagsterInstance, lake: Lake, datasets, quick: bool = False
) -> list[AssetObservation]:
    """Observations of each recipe's `release_inputs` whose version a release made now differs
    from the one last observed. `quick` (the sensor): a recipe whose release shows stale
    already is left as it is (no markers read while a corpus is tokenized again)."""
    changes = []
    for dataset in datasets:
        made = made_from(instance, dataset)
        observed = observed_version(instance, inputs_key(dataset))
        if made is None or (quick and observed != made[0]):
            continue  # no release here yet (its run observes), or stale already
        planned = release_state(lake, dataset, instance).planned
        if planned and planned != observed:
            changes.append(versioned(inputs_key(dataset), None, planned))
    return changes
