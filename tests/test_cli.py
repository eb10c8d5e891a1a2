"""A failed run says why: the cause of each failed step, read from the run's event log, in the
error `materialize_all` raises and in what `tokenmill run` prints, without a traceback."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    DagsterInstance,
    Definitions,
    Failure,
    MaterializeResult,
    RetryPolicy,
    asset,
    define_asset_job,
    job,
    op,
    resource,
)

from tokenmill.cli.demo import land_demo_crawl
from tokenmill.cli.main import main as cli
from tokenmill.cli.runner import (
    ERROR_CHARS,
    definitions_for,
    execute,
    failure_of,
    local_instance,
    register,
)
from tokenmill.filters import FILTER_MODULES_ENV
from tokenmill.storage.lake import Lake

CRAWL = "CC-MAIN-FAIL-2026-01"
UNIT = f"{CRAWL}/00000"
DISALLOWED_FILTER = "clean:\n  plugin_filters:\n    - path: os.system\n"


@pytest.fixture
def landed(tmp_path, monkeypatch) -> Lake:
    """A small demo crawl landed in a temporary lake, with its own Dagster instance."""
    monkeypatch.setenv("TOKENMILL_LAKE_URL", str(tmp_path / "lake"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.delenv(FILTER_MODULES_ENV, raising=False)
    lake = Lake.from_url(str(tmp_path / "lake"))
    land_demo_crawl(lake, CRAWL, files=1, pages_per_file=20, seed=0)
    return lake


@pytest.mark.integration
def test_a_failed_run_prints_its_cause_not_only_its_run_id(landed, tmp_path, monkeypatch, capsys):
    (tmp_path / "lab.yaml").write_text(DISALLOWED_FILTER)
    monkeypatch.setenv("TOKENMILL_RECIPES", str(tmp_path / "lab.yaml"))  # its only recipe
    with pytest.raises(SystemExit) as exit_:
        cli(["run", "--crawl", CRAWL, "--files-per-unit", "1"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Stack Trace" not in err
    message = err[err.index("tokenmill run: ") :]
    assert message.startswith("tokenmill run: 1 run failed:\n")
    run_id = re.search(rf"run_cleaned\[{UNIT}\] \(run ([0-9a-f-]{{36}})\)", message)[1]
    cause = "lab__cleaned: FilterNotAllowedError: module 'os' of 'os.system' is not in the"
    assert cause in message and f"add its package to {FILTER_MODULES_ENV}" in message
    assert f"while cleaned worked on landing/{CRAWL}/" in message  # which file it was on
    with DagsterInstance.get() as instance:
        assert instance.get_run_by_id(run_id).is_failure


@pytest.mark.integration
def test_a_run_whose_input_is_not_materialized_says_which(landed):
    instance = local_instance()
    try:
        register(instance, landed, CRAWL, files_per_unit=1)
        outcome = execute("run_cleaned", UNIT, instance, definitions_for(landed, workers=1))
    finally:
        instance.dispose()
    assert not outcome.success
    assert outcome.error.startswith("fineweb_en__cleaned: MissingInputError: extracted")
    assert f"{UNIT} file 0 is not materialized" in outcome.error


@op
def crashes():
    raise RuntimeError("the disk is on fire")


@op(retry_policy=RetryPolicy(max_retries=1))
def keeps_crashing():
    raise RuntimeError("flaky")


@op
def fails_verbosely():
    raise Failure(
        description="ValueError: " + "\n".join(f"line {i} " + "x" * 300 for i in range(10))
    )


@resource
def unreachable(_):
    raise OSError("cannot reach the lake")


@op(required_resource_keys={"lake"})
def needs_the_lake():
    pass


@job
def crashing_job():
    crashes()


@job
def retried_job():
    keeps_crashing()


@job
def verbose_job():
    fails_verbosely()


@job(resource_defs={"lake": unreachable})
def unreachable_job():
    needs_the_lake()


@pytest.mark.parametrize(
    ("failing_job", "expected"),
    [
        # the user's error, not Dagster's "Error occurred while executing op" around it
        (crashing_job, "crashes: RuntimeError: the disk is on fire"),
        (retried_job, "keeps_crashing: RuntimeError: flaky (Exceeded max_retries of 1)"),
        # no step failed: the run's own error
        (unreachable_job, "OSError: cannot reach the lake"),
    ],
)
def test_the_cause_is_below_dagsters_wrappers(failing_job, expected):
    with DagsterInstance.ephemeral() as instance:
        result = failing_job.execute_in_process(instance=instance, raise_on_error=False)
    assert failure_of(result) == expected


def test_a_long_cause_is_cut_to_its_first_lines():
    with DagsterInstance.ephemeral() as instance:
        result = verbose_job.execute_in_process(instance=instance, raise_on_error=False)
    text = failure_of(result)
    assert text.startswith("fails_verbosely: ValueError: line 0 xxx")
    assert len(text) <= len("fails_verbosely: ") + ERROR_CHARS and text.endswith("…")


@pytest.mark.integration
def test_preview_prints_what_a_recipe_would_flip_and_draws_the_distributions(
    landed, tmp_path, capsys
):
    from tokenmill.crawl.units import register_new_files
    from tokenmill.runtime.parts import run_stage_work
    from tokenmill.stages import stage_named

    proposed = tmp_path / "long-docs.yaml"
    proposed.write_text("clean:\n  gopher_quality:\n    min_doc_words: 2000\n")
    with pytest.raises(SystemExit):  # nothing extracted yet: said in one line
        cli(["preview", str(proposed)])
    assert "nothing extracted yet" in capsys.readouterr().err
    (unit,) = register_new_files(landed, CRAWL, files_per_unit=1).units
    for name in ("raw_crawl", "extracted"):
        run_stage_work(stage_named(name), landed, unit=unit, workers=1)
    cli(["preview", str(proposed), "--crawl", CRAWL, "--html", str(tmp_path / "p.html")])
    out = capsys.readouterr().out
    assert "signals only (no text)" in out
    assert "now: recipe fineweb_en's file" in out and "nothing is built yet" in out
    assert re.search(r"\n  kept +gopher_quality / n_words +\d+", out)
    page = (tmp_path / "p.html").read_text()
    assert "<th>proposed</th>" in page and "src='data:image/png;base64," in page
    proposed.write_text("clean:\n  gopher_quality:\n    min_words: 200\n")
    with pytest.raises(SystemExit):
        cli(["preview", str(proposed)])
    assert re.search(r"long-docs\.yaml.*min_words", capsys.readouterr().err)


@pytest.mark.integration
def test_dropped_shows_a_recipes_rejections_with_their_extracted_text(landed, capsys):
    import polars as pl

    from tokenmill.cli.context import chosen_recipe
    from tokenmill.crawl.units import register_new_files
    from tokenmill.runtime.parts import run_stage_work
    from tokenmill.stages import stage_named

    (unit,) = register_new_files(landed, CRAWL, files_per_unit=1).units
    for name in ("raw_crawl", "extracted"):
        run_stage_work(stage_named(name), landed, unit=unit, workers=1)
    recipe_lake = chosen_recipe(None).lake(landed)
    run_stage_work(stage_named("cleaned"), recipe_lake, unit=unit, workers=1)
    rejected = pl.read_parquet(
        recipe_lake.path(f"{unit.part_prefix('cleaned', 0)}/rejected.parquet")
    )
    texts = pl.read_parquet(landed.path(f"{unit.part_prefix('extracted', 0)}/docs.parquet"))
    assert rejected.height >= 3 and rejected["text"].null_count() == rejected.height
    cli(["dropped", "--limit", "3", "--chars", "40"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 9  # filter, reason and URL; provenance; the text's start
    entries = [lines[i : i + 3] for i in range(0, len(lines), 3)]
    for row, (head, _, text) in zip(rejected.head(3).iter_rows(named=True), entries, strict=True):
        assert head == f"{row['filter']}  {row['reason']}  {row['url']}"
        start = texts.filter(pl.col("doc_id") == row["doc_id"])["text"][0][:40]
        assert text.strip() == start.replace("\n", " ⏎ ").strip()
    some = rejected["filter"][0]
    cli(["dropped", "--filter", some, "--limit", "100"])
    heads = capsys.readouterr().out.splitlines()[0::3]
    assert len(heads) == (rejected["filter"] == some).sum()
    assert all(head.startswith(f"{some}  ") for head in heads)


def run_to_cleaned(lake: Lake):
    """The landed crawl and an unusable file in one unit, read, extracted and cleaned (no
    Dagster); the unit and the recipe's lake."""
    from tokenmill.cli.context import chosen_recipe
    from tokenmill.crawl.units import register_new_files
    from tokenmill.runtime.parts import run_stage_work
    from tokenmill.stages import stage_named

    lake.write_bytes(f"landing/{CRAWL}/zz.warc.gz", b"<html>a page, not a WARC</html>")
    (unit,) = register_new_files(lake, CRAWL, files_per_unit=2).units
    recipe_lake = chosen_recipe(None).lake(lake)
    for name, on in (("raw_crawl", lake), ("extracted", lake), ("cleaned", recipe_lake)):
        run_stage_work(stage_named(name), on, unit=unit, workers=1)
    return unit, recipe_lake


@pytest.mark.integration
def test_summary_columns_add_up_with_a_legend_and_as_json(landed, capsys):
    unit, _ = run_to_cleaned(landed)
    dropped = landed.read_json(f"{unit.prefix('raw_crawl')}/_SUCCESS.json")["dropped"]
    bad_records = sum(n for reason, n in dropped.items() if reason != "unusable_file")
    assert bad_records > 0  # the demo crawl's truncated and corrupt records
    cli(["summary"])
    out = capsys.readouterr().out
    table, legend = out.split("\n\n")[:2]
    header, _, *lines = table.splitlines()
    columns = [c.strip() for c in header.split("|")]
    rows = {}
    for line in lines:
        cells = [c.strip() for c in line.split("|")]
        values = [cells[0], cells[1], *map(float, cells[2:])]
        rows[cells[0]] = dict(zip(columns, values, strict=True))
    done = {name: row for name, row in rows.items() if not row["partitions"].startswith("0/")}
    assert set(done) == {"raw_crawl", "extracted", "fineweb_en/cleaned"}
    for row in done.values():
        assert row["docs_in"] == row["docs_out"] + row["dropped"], row
    # the unusable file in each stage that met it; the records raw_crawl could not read, again
    assert done["raw_crawl"]["unread"] == 1 and done["fineweb_en/cleaned"]["unread"] == 1
    assert done["extracted"]["unread"] == 1 + bad_records
    assert [line.split()[0] for line in legend.splitlines()] == columns[1:]
    cli(["summary", "--json"])
    found = json.loads(capsys.readouterr().out)
    assert found["releases"] == {}
    assert {row["stage"]: row for row in found["stages"]} == rows


@pytest.mark.integration
def test_dropped_counts_per_filter_and_rule(landed, capsys):
    import polars as pl

    unit, recipe_lake = run_to_cleaned(landed)
    rejected = pl.read_parquet(
        recipe_lake.path(f"{unit.part_prefix('cleaned', 0)}/rejected.parquet")
    )
    pairs = rejected.select("filter", "reason").iter_rows()
    expected = Counter((name, reason.split("=")[0]) for name, reason in pairs)
    assert len(expected) > 1
    cli(["dropped", "--count"])
    header, *lines, total = capsys.readouterr().out.splitlines()
    assert header.split() == ["filter", "rule", "documents"]
    found = {(line.split()[0], line.split()[1]): int(line.split()[2]) for line in lines}
    assert found == expected
    assert [int(line.split()[2]) for line in lines] == sorted(expected.values(), reverse=True)
    marker = recipe_lake.read_json(f"{unit.prefix('cleaned')}/_SUCCESS.json")
    filtered = sum(n for reason, n in marker["dropped"].items() if reason.startswith("filter:"))
    assert total.split() == ["total", str(filtered)]
    some = rejected["filter"][0]
    cli(["dropped", "--count", "--filter", some])
    _, *lines, total = capsys.readouterr().out.splitlines()
    assert {line.split()[0] for line in lines} == {some}
    assert int(total.split()[1]) == (rejected["filter"] == some).sum()


@pytest.mark.integration
def test_run_prints_a_failed_warn_check_as_a_warning(landed, capsys):
    # 20 pages hold far too little text for the default 16,384-token vocabulary
    cli(["run", "--crawl", CRAWL, "--files-per-unit", "1"])
    out = capsys.readouterr().out
    assert "check failed:" not in out  # nothing broke
    lines = out.splitlines()
    index, line = next((i, line) for i, line in enumerate(lines) if "vocabulary_reach" in line)
    assert line.startswith("    warning: fineweb_en/tokenizer vocabulary_reaches_target: trained ")
    assert "of the 16,384 asked for" in line
    # off a terminal (no progress bars): one plain line per run, the checks below their run's
    assert re.fullmatch(r"  fineweb_en/tokenizer +- +ok", lines[index - 1])
    assert re.search(rf"^  raw_crawl \+ extracted +{re.escape(UNIT)} +ok$", out, re.MULTILINE)
    assert re.search(r"^  extracted +1 partitions made with raw_crawl$", out, re.MULTILINE)
    assert "\x1b" not in out and "\r" not in out


@asset(
    check_specs=[
        AssetCheckSpec("looks_odd", asset="checked"),
        AssetCheckSpec("is_broken", asset="checked"),
        AssetCheckSpec("is_fine", asset="checked"),
    ]
)
def checked():
    yield MaterializeResult(
        check_results=[
            AssetCheckResult(
                check_name="looks_odd",
                passed=False,
                severity=AssetCheckSeverity.WARN,
                description="fewer rows than usual",
            ),
            AssetCheckResult(check_name="is_broken", passed=False, description="a row is lost"),
            AssetCheckResult(check_name="is_fine", passed=True, description="all there"),
        ]
    )


def test_failed_checks_are_told_apart_by_severity():
    defs = Definitions(assets=[checked], jobs=[define_asset_job("checking", [checked])])
    with DagsterInstance.ephemeral() as instance:
        outcome = execute("checking", None, instance, defs)
    assert outcome.success
    assert outcome.failed_checks == ("checked is_broken: a row is lost",)
    assert outcome.warnings == ("checked looks_odd: fewer rows than usual",)


@pytest.mark.integration
def test_a_release_with_an_empty_split_warns_in_its_metadata_and_its_command(
    landed, tmp_path, monkeypatch, capsys
):
    """20 pages and a validation share of one in a million: no validation document."""
    from tokenmill.cli.runner import local_instance
    from tokenmill.storage.outputs import WARNINGS

    (tmp_path / "lab.yaml").write_text("release:\n  validation: 1.0e-6\n")
    monkeypatch.setenv("TOKENMILL_RECIPES", str(tmp_path / "lab.yaml"))
    cli(["run", "--crawl", CRAWL, "--files-per-unit", "1"])  # a release is made when none is
    ran = capsys.readouterr().out
    cli(["release"])
    warnings = [line for line in capsys.readouterr().out.splitlines() if "warning" in line]
    assert len(warnings) == 1 and warnings[0].startswith(
        "warning: the validation split is empty: at validation 1e-06, none of the "
    )
    assert "set `validation` in the recipe's `release:` section to " in warnings[0]
    instance = local_instance()
    try:
        event = instance.get_latest_materialization_event(AssetKey(["lab", "release"]))
    finally:
        instance.dispose()
    shown = event.asset_materialization.metadata[WARNINGS].value
    assert shown == f"- **warning**: {warnings[0].removeprefix('warning: ')}"
    assert f"    warning: lab/release: {shown.removeprefix('- **warning**: ')}" in ran


@pytest.mark.integration
def test_retraining_the_tokenizer_is_a_tagged_run_and_says_what_changed(landed, capsys):
    cli(["run", "--crawl", CRAWL, "--files-per-unit", "1"])
    capsys.readouterr()
    cli(["retrain-tokenizer"])
    line = capsys.readouterr().out.strip()
    match = re.fullmatch(r"fineweb_en/tokenizer: run ([0-9a-f-]{36}), sha256 (.+)", line)
    assert match, line
    # the same deduplicated text trains the same vocabulary
    assert match[2] == "unchanged"
    with DagsterInstance.get() as instance:
        run = instance.get_run_by_id(match[1])
        assert run.is_success
        assert run.tags["tokenmill/retrained"].startswith("tokenmill retrain-tokenizer by ")


@pytest.mark.integration
def test_status_and_dry_run_tell_what_a_recipe_change_makes_stale_and_run_limits_to_it(
    landed, tmp_path, monkeypatch, capsys
):
    from tokenmill.recipes.recipe import DEFAULT_RECIPE

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "fineweb_en.yaml").write_text(DEFAULT_RECIPE.read_text())
    (recipes / "lab.yaml").write_text("clean:\n  keep_languages: [en]\n")
    monkeypatch.setenv("TOKENMILL_RECIPES", str(recipes))
    cli(["run", "--crawl", CRAWL, "--files-per-unit", "1"])
    capsys.readouterr()
    # fewer documents kept: the cleaned data changes, and with it what is below
    (recipes / "lab.yaml").write_text("clean:\n  gopher_quality:\n    min_doc_words: 400\n")

    cli(["status"])
    table = [line for line in capsys.readouterr().out.splitlines() if line[:1].isalpha()]
    rows = {line.split()[0]: line for line in table}
    assert rows["lab/cleaned"].split()[1:5] == ["1", "0", "0", "1"]
    assert rows["lab/cleaned"].endswith("1 code version changed (its recipe section or code)")
    assert rows["fineweb_en/cleaned"].endswith("up to date")
    assert rows["lab/dedup_signatures"].endswith("up to date")  # until cleaned's data changes

    cli(["run", "--dry-run"])
    plan = capsys.readouterr().out.splitlines()
    assert plan[0].split()[:6] == ["lab/cleaned", "1", "partitions", "1", "code", "version"]
    assert any(line.split()[:3] == ["lab/deduplicated", "1", "partitions"] for line in plan)
    assert not any("fineweb_en" in line for line in plan)
    assert plan[-1].startswith("tokenmill run would launch 1 runs (at most ")
    with DagsterInstance.get() as instance:  # the dry run launched nothing
        runs = len(instance.get_runs())

    cli(["run", "--recipe", "lab", "--select", "cleaned"])
    out = capsys.readouterr().out
    assert re.search(rf"lab/cleaned +{UNIT} +ok", out)
    assert "fineweb_en/" not in out.split("runs succeeded")[0]
    assert "dedup_signatures" not in out.split("runs succeeded")[0]
    with DagsterInstance.get() as instance:
        assert len(instance.get_runs()) == runs + 1
    cli(["run", "--dry-run", "--recipe", "lab"])
    plan = capsys.readouterr().out
    launched = [line.split()[0] for line in plan.splitlines() if line.startswith("  ")]
    assert "lab/cleaned" not in launched and "lab/dedup_signatures" in launched
    assert "1 input data changed (lab/cleaned)" in plan


@pytest.mark.integration
def test_run_of_a_recipe_that_reads_anothers_tokenizer_makes_that_tokenizer(
    landed, tmp_path, monkeypatch, capsys
):
    from tokenmill.recipes.recipe import DEFAULT_RECIPE

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "fineweb_en.yaml").write_text(DEFAULT_RECIPE.read_text())  # trains it
    (recipes / "lab.yaml").write_text("clean:\n  keep_languages: [en]\n")
    monkeypatch.setenv("TOKENMILL_RECIPES", str(recipes))

    cli(["run", "--recipe", "lab", "--crawl", CRAWL, "--files-per-unit", "1"])
    out = capsys.readouterr().out.split("runs succeeded")[0]
    assert "FAILED" not in out
    made = set(re.findall(r"\b(\w+/\w+)\b", out))
    # the owner's stages up to its tokenizer, none below it; the chosen recipe's all
    assert {"fineweb_en/deduplicated", "fineweb_en/tokenizer"} <= made
    assert {"lab/deduplicated", "lab/tokenized_shards"} <= made
    assert "fineweb_en/tokenized_shards" not in made
    assert landed.exists("recipes/fineweb_en/tokenizer/tokenizer.json")
    assert landed.list("recipes/lab/tokenized_shards/")
    assert not landed.list("recipes/fineweb_en/tokenized_shards/")
