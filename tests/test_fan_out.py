"""A stage that declares `fan_out` becomes a graph-backed asset: plan, parallel_steps mapped
steps, finish; its checks and materialization come from the finish step."""

from dagster import DagsterEventType, materialize
from tokenmill.data_assets.assets import fan_out_asset
from tokenmill.data_assets.datasets import Dataset
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.step_io import STEP_IO, STEPS, LakeStepIOManager
from tokenmill.resources.workers import WorkersResource

from tokenmill.recipes.recipe import Recipe
from tokenmill.runtime.stage import Check, FanOut, Pod, Scope, Stage, Verdict, Work
from tokenmill.storage.lake import Lake
from tokenmill.storage.outputs import StageReport

PIECES = [f"piece-{i}" for i in range(5)]


def plan(work: Work) -> list[str]:
    return PIECES


def run_share(work: Work, pieces: list[str], workers: int) -> dict:
    for piece in pieces:
        work.lake.write_json(f"{work.output}/_pieces/{piece}.json", {"piece": piece})
    return {"done": len(pieces)}


def finish(work: Work, shares: list[dict]) -> StageReport:
    done = sum(share["done"] for share in shares)
    return StageReport(records_in=done, records_out=done, counts={"shares": len(shares)})


def every_piece(lake: Lake, partition) -> Verdict:
    found = len(lake.list("toy/_pieces"))
    return Verdict(found == len(PIECES), f"{found} pieces")


def no_piece(lake: Lake, partition) -> Verdict:
    return Verdict(not lake.list("toy/_pieces"), "pieces were written")


TOY = Stage(
    name="toy",
    scope=Scope.LAKE,
    run=lambda work: finish(work, [run_share(work, plan(work), 1)]),
    description="A toy stage in pieces.",
    group="toy",
    pod=Pod("1", "1Gi", "1", "1Gi"),
    checks=(Check("every_piece", every_piece), Check("no_piece", no_piece, warn_only=True)),
    fan_out=FanOut(plan=plan, run=run_share, finish=finish),
)


def test_fanned_out_stage_runs_its_shares_in_steps_and_reports_its_checks(tmp_path):
    lake = LakeResource(url=str(tmp_path / "lake"))
    result = materialize(
        [fan_out_asset(TOY, Dataset(Recipe({}, "test")))],  # a stage of no recipe
        resources={
            "lake": lake,
            "workers": WorkersResource(processes=1),
            STEP_IO: LakeStepIOManager(lake=lake),
        },
        run_config={"ops": {"toy": {"config": {"parallel_steps": 3}}}},
    )
    assert result.success
    steps = {e.step_key for e in result.all_events if e.event_type == DagsterEventType.STEP_SUCCESS}
    assert steps == {"toy.toy_plan", "toy.toy_finish", *(f"toy.toy_part[{i}]" for i in range(3))}
    [materialization] = result.asset_materializations_for_node("toy")
    assert materialization.metadata["records_out"].value == 5
    assert materialization.metadata["shares"].value == 3
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"every_piece": True, "no_piece": False}
    handled = [
        e
        for e in result.all_events
        if e.event_type == DagsterEventType.HANDLED_OUTPUT
        and e.event_specific_data.manager_key == STEP_IO
    ]
    assert len(handled) == 6  # 3 shares, 3 summaries, through the lake
    assert lake.get_lake().list(f"{STEPS}/{result.run_id}") == []  # spent, deleted


def test_a_retry_deletes_the_step_values_of_the_attempts_it_retried_from(tmp_path):
    lake = LakeResource(url=str(tmp_path / "lake"))
    data = lake.get_lake()
    earlier = "e" * 8  # an attempt killed before its finish step: its plan's values stayed
    data.write_json(f"{STEPS}/{earlier}/toy.toy_plan/result/0.json", ["piece"])
    data.write_json(f"{STEPS}/{earlier}/other.other_plan/result/0.json", ["theirs"])
    result = materialize(
        [fan_out_asset(TOY, Dataset(Recipe({}, "test")))],
        resources={
            "lake": lake,
            "workers": WorkersResource(processes=1),
            STEP_IO: LakeStepIOManager(lake=lake),
        },
        tags={"dagster/parent_run_id": earlier, "dagster/root_run_id": earlier},
    )
    assert result.success
    assert data.list(f"{STEPS}/{earlier}") == [
        f"{STEPS}/{earlier}/other.other_plan/result/0.json"  # another stage's: kept
    ]
