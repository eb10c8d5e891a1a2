"""The asset groups the UI shows: the stages' groups (`Stage.group`) numbered in pipeline order,
as the UI sorts groups by name, the shared stages' at the top (`1_ingest`, `2_extract`) and
each recipe's in a folder of its own (`fineweb_en/3_clean`, `fineweb_en/4_dedup`, ...)."""

from __future__ import annotations

from tokenmill import stages as pipeline


def stage_groups() -> list[str]:
    """The stages' groups in pipeline order (of each group's first stage); read when called, as
    a new stage module may extend the stage list."""
    return list(dict.fromkeys(stage.group for stage in pipeline.STAGES))


def group_name(group: str, recipe: str | None = None) -> str:
    """The UI group of stage group `group`'s assets, for `recipe`'s stages or the shared ones
    (a group of no listed stage is numbered after the others)."""
    groups = stage_groups()
    position = groups.index(group) if group in groups else len(groups)
    leaf = f"{position + 1}_{group}"
    return f"{recipe}/{leaf}" if recipe else leaf
