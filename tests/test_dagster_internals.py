"""Dagster's private API that tokenmill uses (`tokenmill.dagster_internals`) still has the shape
the adapter relies on. A Dagster upgrade that moves or changes one of these names fails here,
naming it, before it fails a run."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import dagster
import pytest
from dagster import ConfigurableResource, EnvVar

from tokenmill import dagster_internals
from tokenmill.dagster_internals import (
    CODE_VERSION_TAG,
    DATA_VERSION_TAG,
    CachingStaleStatusResolver,
    LoadingContext,
    StaleCauseCategory,
    StaleStatus,
    extract_data_version_from_entry,
    follow_run,
    planned_form,
    planned_steps,
    read_keys_once_per_tick,
    resource_config,
)

PROJECT = Path(__file__).resolve().parents[1]
CODE = ["tokenmill", "data_assets", "resources", "sensors"]


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_dagster_is_the_pinned_release():
    pinned = next(
        line.split("==")[1].strip('",')
        for line in (PROJECT / "pyproject.toml").read_text().splitlines()
        if line.strip().startswith('"dagster==')
    )
    assert dagster.__version__ == pinned, (
        f"Dagster {dagster.__version__} is installed, {pinned} pinned: check every name of "
        "tokenmill/dagster_internals.py against the new release, then move the pin"
    )


def test_only_the_adapter_imports_dagster_private_modules():
    found = []
    for folder in CODE:
        for path in (PROJECT / folder).rglob("*.py"):
            if path.name == "dagster_internals.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                found += [f"{path.relative_to(PROJECT)}: {n}" for n in names if "dagster._" in n]
    assert found == []


def test_data_versions_are_read_from_the_tag_dagster_writes():
    assert DATA_VERSION_TAG == "dagster/data_version"
    assert CODE_VERSION_TAG == "dagster/code_version"
    assert parameters(extract_data_version_from_entry) == ["entry"]


def test_the_stale_status_resolver_takes_what_the_runner_gives_it():
    assert parameters(CachingStaleStatusResolver.__init__)[1:4] == [
        "instance",
        "asset_graph",
        "loading_context",
    ]
    assert {"get_status", "get_stale_causes"} <= set(vars(CachingStaleStatusResolver))
    assert {"FRESH", "STALE", "MISSING"} <= set(StaleStatus.__members__)
    assert {"CODE", "DATA", "DEPENDENCIES"} <= set(StaleCauseCategory.__members__)
    assert inspect.isclass(LoadingContext)


@dagster.op(out=dagster.DynamicOut())
def pieces():
    yield dagster.DynamicOutput(1, mapping_key="0")


@dagster.op
def piece(value: int) -> int:
    return value


@dagster.job
def mapped():
    pieces().map(piece)


def test_a_run_is_followed_event_by_event_against_its_planned_steps():
    with dagster.DagsterInstance.ephemeral() as instance:
        run_id, seen = "4a0f0b9e-1c5d-4c1e-9a43-5a6f0e3f2b11", []
        follow_run(
            instance, run_id, lambda entry: seen.append((entry, planned_steps(instance, run_id)))
        )
        mapped.execute_in_process(instance=instance, run_id=run_id)
    assert seen and all(isinstance(entry, dagster.EventLogEntry) for entry, _ in seen)
    assert sorted(seen[0][1]) == ["piece[?]", "pieces"]
    started = [
        e.step_key for e, _ in seen if e.dagster_event_type is dagster.DagsterEventType.STEP_START
    ]
    assert started == ["pieces", "piece[0]"]
    assert planned_form("piece[0]") == "piece[?]" and planned_form("pieces") == "pieces"
    assert planned_form("graph.op[12]") == "graph.op[?]"


class Greeting(ConfigurableResource):
    name: str
    times: int = 2


def test_a_resource_config_is_resolved_as_a_run_would(monkeypatch):
    monkeypatch.setenv("TOKENMILL_TEST_NAME", "lake")
    assert resource_config(Greeting(name=EnvVar("TOKENMILL_TEST_NAME"))) == {
        "name": "lake",
        "times": 2,
    }
    monkeypatch.delenv("TOKENMILL_TEST_NAME")
    with pytest.raises(dagster.DagsterInvalidConfigError):
        resource_config(Greeting(name=EnvVar("TOKENMILL_TEST_NAME")))


def test_the_cursor_shortcut_finds_the_function_it_wraps():
    serialized = dagster_internals.serialized_objects
    original = serialized._get_maybe_compressed_dynamic_partitions_subset
    try:
        assert read_keys_once_per_tick(), "Dagster's cursor serialization changed"
        patched = serialized._get_maybe_compressed_dynamic_partitions_subset
        assert getattr(patched, dagster_internals.PATCHED)
        assert parameters(patched) == ["subset"]
        assert read_keys_once_per_tick()  # installs once
        assert serialized._get_maybe_compressed_dynamic_partitions_subset is patched
    finally:
        serialized._get_maybe_compressed_dynamic_partitions_subset = original
