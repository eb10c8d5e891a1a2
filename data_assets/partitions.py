"""Partitions: a unit of a crawl, and a whole crawl. Both are dynamic, so new crawls and units
are added at run time (by the landing sensor, the reconciliation job or `tokenmill register`).

A per-unit asset has exactly the units that exist, keyed `<crawl>/<unit>`: no crawl × shard
cross product, so no partition without data, and a crawl of 90,000 WARC files in units of 100
is 900 partitions. Dagster has no built-in partition mapping between a unit and its crawl
(custom mappings are unsupported), so the crawl boundary is crossed by external assets, each
one partition wide where it meets its neighbour:

- `crawl_units` (per crawl): its data version is a hash of the crawl's registered units,
  observed whenever units are registered, so a new unit makes the crawl's stages stale.
- for each crawl stage that declares a `CrawlBoundary` (`dedup_clusters`): its `gathered` asset
  (per crawl, `crawl_signatures`), observed by the `crawl_signatures_complete` sensor once every
  unit of the crawl has the stage's per-unit inputs, with a version that changes when any
  unit's data does, which the stage follows; and its `reported` asset (per unit,
  `unit_duplicates`), reported by each of its runs for the units whose share of its output
  changed, which the per-unit stages below it follow, so only the units a new clustering
  affects are deduplicated again.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from dagster import (
    AssetObservation,
    AssetRecordsFilter,
    AssetsDefinition,
    AssetSpec,
    DagsterInstance,
    DynamicPartitionsDefinition,
    Failure,
    multi_observable_source_asset,
)
from tokenmill.data_assets.groups import group_name

from tokenmill.dagster_internals import DATA_VERSION_TAG, extract_data_version_from_entry
from tokenmill.runtime.stage import Scope, Stage
from tokenmill.stages import STAGES, stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import RAW_CRAWL, Unit

if TYPE_CHECKING:
    from tokenmill.data_assets.datasets import Catalog, Dataset
from tokenmill.crawl.units import registered_crawls, registered_units

unit_partitions = DynamicPartitionsDefinition(name="units")
crawl_partitions = DynamicPartitionsDefinition(name="crawls")

crawl_units = AssetSpec(
    "crawl_units",
    partitions_def=crawl_partitions,
    group_name=group_name(stage_named(RAW_CRAWL).group),
    description="The units registered for a crawl (manifests/<crawl>/); its data version "
    "changes when a unit is added.",
)
BOUNDARY_STAGES = [stage for stage in STAGES if stage.boundary]


def unit_inputs(stage: Stage) -> list[str]:
    """The per-unit stages a crawl stage reads."""
    return [name for name in stage.upstream if stage_named(name).scope is Scope.UNIT]


def gathered(stage: Stage, dataset: Dataset) -> AssetSpec:
    inputs = ", ".join(unit_inputs(stage))
    return AssetSpec(
        dataset.key(stage.boundary.gathered),
        partitions_def=crawl_partitions,
        deps=[dataset.key(name) for name in unit_inputs(stage)],
        group_name=group_name(stage.group, dataset.prefix),
        description=f"Every unit of the crawl has its {inputs}: observed by the "
        "crawl_signatures_complete sensor, with a version that changes when any unit's data "
        f"does; {stage.name} follows it.",
    )


def reported_by(stage: Stage, dataset: Dataset) -> AssetSpec:
    return AssetSpec(
        dataset.key(stage.boundary.reported),
        partitions_def=unit_partitions,
        deps=[dataset.key(stage.name)],
        group_name=group_name(stage.group, dataset.prefix),
        description=f"A unit's share of its crawl's {stage.name}: reported by each "
        f"{stage.name} run for the units whose share changed; the stages below follow it.",
    )


def observable(spec: AssetSpec) -> AssetsDefinition:
    """The bridge as an observable asset whose observations are reported by the sensors and the
    crawl stages' runs: for an external asset, Dagster's automation counts only
    materializations unless it is observable, while its staleness counts only observations."""

    @multi_observable_source_asset(specs=[spec], name="__".join(spec.key.path))
    def never_observed():
        raise Failure(
            f"{spec.key.to_user_string()} is reported by the sensors and the stages' "
            "runs, never observed on demand",
            allow_retries=False,
        )

    return never_observed


def bridge_specs(catalog: Catalog) -> list[AssetSpec]:
    """The crawls' unit lists, and each recipe's gathered and reported assets."""
    specs = [crawl_units]
    for stage in BOUNDARY_STAGES:
        for dataset in catalog.serving(stage):
            specs.append(gathered(stage, dataset))
            if stage.boundary.reported:
                specs.append(reported_by(stage, dataset))
    return specs


def bridges(catalog: Catalog) -> list[AssetsDefinition]:
    return [observable(spec) for spec in bridge_specs(catalog)]


def boundaries(catalog: Catalog) -> list[tuple[Stage, Dataset]]:
    """Each crawl stage between per-unit ones, with each dataset that has it."""
    return [(stage, d) for stage in BOUNDARY_STAGES for d in catalog.serving(stage)]


def versioned(key, partition: str, version: str) -> AssetObservation:
    return AssetObservation(key, partition=partition, tags={DATA_VERSION_TAG: version})


def unit_list_version(units: list[Unit]) -> str:
    return hashlib.sha256("\n".join(sorted(u.name for u in units)).encode()).hexdigest()


def latest_version(instance: DagsterInstance, key, partition: str) -> str | None:
    records = instance.fetch_observations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
    ).records
    return records[0].asset_observation.data_version if records else None


def unit_list_changes(
    instance: DagsterInstance, units_by_crawl: dict[str, list[Unit]]
) -> list[AssetObservation]:
    """Observations of `crawl_units` for the crawls whose registered units are not the ones
    last observed; recording them makes those crawls' clusters stale."""
    changes = []
    for crawl, units in units_by_crawl.items():
        version = unit_list_version(units)
        if version != latest_version(instance, crawl_units.key, crawl):
            changes.append(versioned(crawl_units.key, crawl, version))
    return changes


def inputs_version(instance: DagsterInstance, crawl: str, units: list[str], keys) -> str:
    """A hash of the data version of each unit's latest materialization of each of `keys` (its
    event id where it has none): a unit materialized again with the same data leaves it as it
    was."""
    digest = hashlib.sha256(crawl.encode())
    for key in keys:
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=key, asset_partitions=units), limit=len(units) * 4
        ).records
        latest: dict[str, tuple[int, str]] = {}
        for record in records:
            partition, storage_id = record.partition_key, record.storage_id
            if storage_id > latest.get(partition, (0, ""))[0]:
                version = extract_data_version_from_entry(record.event_log_entry)
                latest[partition] = (storage_id, version.value if version else f"#{storage_id}")
        for unit in units:
            digest.update(
                f"{key.to_user_string()}:{unit}={latest.get(unit, (0, None))[1]}".encode()
            )
    return digest.hexdigest()


def gathered_changes(
    instance: DagsterInstance, crawls: list[str], catalog: Catalog
) -> list[AssetObservation]:
    """Observations of each recipe's boundary `gathered` assets for the crawls among `crawls`
    whose units all have the stage's per-unit inputs, and whose inputs are not the ones last
    observed."""
    all_units = instance.get_dynamic_partitions(unit_partitions.name)
    changes = []
    for stage, dataset in boundaries(catalog):
        keys = [dataset.key(name) for name in unit_inputs(stage)]
        done = [set(instance.get_materialized_partitions(key)) for key in keys]
        target = dataset.key(stage.boundary.gathered)
        for crawl in crawls:
            units = [u for u in all_units if u.startswith(f"{crawl}/")]
            if not units or any(u not in had for had in done for u in units):
                continue  # the last units to get them will touch the crawl again
            version = inputs_version(instance, crawl, units, keys)
            if version != latest_version(instance, target, crawl):
                changes.append(versioned(target, crawl, version))
    return changes


def add_partitions(instance: DagsterInstance, units: list[Unit]) -> None:
    """Add the crawls and units the instance does not know yet (one listing per definition,
    not one query per key: a corpus has ~100,000 units)."""
    for definition, keys in (
        (crawl_partitions, sorted({u.crawl for u in units})),
        (unit_partitions, [u.key for u in units]),
    ):
        known = set(instance.get_dynamic_partitions(definition.name))
        missing = [k for k in keys if k not in known]
        if missing:
            instance.add_dynamic_partitions(definition.name, missing)


def sync_partitions(instance: DagsterInstance, lake: Lake, crawls: list[str] | None = None) -> None:
    """Add every registered crawl and unit of the lake (or of `crawls`) that the instance does
    not know, and observe the unit list of every crawl whose units changed."""
    units_by_crawl = {c: registered_units(lake, c) for c in crawls or registered_crawls(lake)}
    add_partitions(instance, [u for units in units_by_crawl.values() for u in units])
    for observation in unit_list_changes(instance, units_by_crawl):
        instance.report_runless_asset_event(observation)
