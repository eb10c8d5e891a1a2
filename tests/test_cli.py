"""A failed run says why: the cause of each failed step, read from the run's event log, in the
error `materialize_all` raises and in what `tokenmill run` prints, without a traceback."""

from __future__ import annotations

import re

import pytest
from dagster import DagsterInstance, Failure, RetryPolicy, job, op, resource

from tokenmill.cli.commands import land_demo_crawl
from tokenmill.cli.commands import main as cli
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
    assert re.search(r"gopher_quality / n_words: \d+ documents", out)
    assert "src='data:image/png;base64," in (tmp_path / "p.html").read_text()
    proposed.write_text("clean:\n  gopher_quality:\n    min_words: 200\n")
    with pytest.raises(SystemExit):
        cli(["preview", str(proposed)])
    assert re.search(r"long-docs\.yaml.*min_words", capsys.readouterr().err)


@pytest.mark.integration
def test_dropped_shows_a_recipes_rejections_with_their_extracted_text(landed, capsys):
    import polars as pl

    from tokenmill.cli.commands import chosen_recipe
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


@pytest.mark.integration
def test_run_prints_the_checks_that_failed(landed, capsys):
    # 20 pages hold far too little text for the default 16,384-token vocabulary
    cli(["run", "--crawl", CRAWL, "--files-per-unit", "1"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    index, line = next((i, line) for i, line in enumerate(lines) if "check failed:" in line)
    assert "fineweb_en/tokenizer vocabulary_reaches_target: trained " in line
    assert "of the 16,384 asked for" in line
    # off a terminal (no progress bars): one plain line per run, the checks below their run's
    assert re.fullmatch(r"  tokenizer +- +ok", lines[index - 1])
    assert re.search(rf"^  raw_crawl +{re.escape(UNIT)} +ok$", out, re.MULTILINE)
    assert "\x1b" not in out and "\r" not in out


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
def test_the_demo_trains_a_classifier_and_builds_a_second_recipe_that_keeps_by_it(tmp_path):
    """`tokenmill demo` end to end, as the README's first command runs it (smaller pages):
    the project's recipe, then demo_quality trained from the crawls' good pages and the
    demo_top_quality recipe; `tokenmill summary` shows both datasets; run again, nothing runs."""
    import os
    import subprocess
    import sys

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TOKENMILL_EXTRACTION", "TOKENMILL_RECIPES", "TOKENMILL_LAKE_URL")
    }
    env |= {"TOKENMILL_LAKE_URL": str(tmp_path / "lake"), "DAGSTER_HOME": str(tmp_path / "h")}

    def tokenmill(*args: str) -> str:
        command = [sys.executable, "-m", "tokenmill.cli.commands", *args]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    out = tokenmill("demo", "--pages-per-file", "40")
    assert re.search(r"classifier demo_quality: \d+ positives, \d+ negatives", out)
    assert "with the demo's classifier declared and its recipe added:" in out
    lake = Lake.from_url(str(tmp_path / "lake"))
    card = lake.read_json("classifiers/demo_quality/card.json")
    assert card["held_out"]["recall"] and card["held_out"]["precision"]
    rows, summary = {}, tokenmill("summary").splitlines()
    for line in summary[2:]:
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3:
            rows[cells[0]] = {"partitions": cells[1], "docs_out": int(cells[3])}
    # and each recipe's release, as the demo ends with
    assert [line.split(":")[0] for line in summary if line.startswith("release ")] == [
        "release fineweb_en",
        "release demo_top_quality",
    ]
    for recipe in ("fineweb_en", "demo_top_quality"):
        shards = rows[f"{recipe}/tokenized_shards"]
        assert shards["partitions"] == "3/3" and shards["docs_out"] > 0, rows
    # the classifier keeps a share of what FineWeb's filters keep
    assert 0 < rows["demo_top_quality/cleaned"]["docs_out"] < rows["fineweb_en/cleaned"]["docs_out"]
    assert rows["scored"]["docs_out"] == rows["extracted"]["docs_out"]
    assert "\n0 runs succeeded" in "\n" + tokenmill("demo", "--pages-per-file", "40")
    # a release made on purpose: a recorded run; the same inputs and settings, the same version
    released = [line for line in summary if line.startswith("release demo_top_quality")]
    again = tokenmill("release", "--recipe", "demo_top_quality")
    assert "demo_top_quality/release: run " in again and released[0] in again
