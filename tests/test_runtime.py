"""The runtime environment the image installs (`uv sync --locked --no-dev`, helm/Dockerfile) runs
every stage: a separate venv without the dev dependencies materializes a small demo crawl end to
end with the default settings, then trains a fastText classifier and scores and filters by it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testkit.datasets import recipe_lake
from tokenmill.cli.demo import land_demo_crawl
from tokenmill.demo.crawl import sample_articles
from tokenmill.reports.summary import stage_rows
from tokenmill.storage.lake import Lake

pytestmark = pytest.mark.integration

PROJECT_DIR = Path(__file__).resolve().parents[1]
CRAWL = "CC-MAIN-RUNTIME-2026-01"
STAGES = (
    "raw_crawl",
    "extracted",
    "scored",
    "score_distribution",
    "cleaned",
    "dedup_signatures",
    "dedup_clusters",
    "deduplicated",
    "tokenized_shards",
)


def uv() -> str:
    found = os.environ.get("UV") or shutil.which("uv")
    assert found, "uv is not on PATH"
    return found


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without the dev venv's activation, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    return env | extra


SYNC_RUNTIME = ["sync", "--locked", "--no-dev"]  # as helm/Dockerfile installs the image


def test_image_installs_the_runtime_this_test_checks():
    assert f"uv {' '.join(SYNC_RUNTIME)}" in (PROJECT_DIR / "helm" / "Dockerfile").read_text()


@pytest.fixture(scope="module")
def runtime_venv(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("runtime") / "venv"
    subprocess.run(
        [uv(), *SYNC_RUNTIME, "--quiet"],
        cwd=PROJECT_DIR,
        env=clean_env(UV_PROJECT_ENVIRONMENT=str(venv)),
        check=True,
        timeout=600,
    )
    return venv


def test_runtime_venv_has_no_dev_dependencies(runtime_venv):
    probe = "import importlib.util as u; print([m for m in ('faker', 'pytest') if u.find_spec(m)])"
    found = subprocess.run(
        [runtime_venv / "bin" / "python", "-c", probe], capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]"


def test_demo_without_its_generator_says_what_is_missing(runtime_venv, tmp_path):
    result = subprocess.run(
        [runtime_venv / "bin" / "tokenmill", "demo", "--pages-per-file", "1"],
        env=clean_env(TOKENMILL_LAKE_URL=str(tmp_path / "lake"), DAGSTER_HOME=str(tmp_path / "h")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "needs the 'faker' package" in result.stderr


def test_runtime_venv_runs_every_stage_then_a_recipe_keeps_by_a_classifiers_scores(
    runtime_venv, tmp_path
):
    lake = Lake.from_url(str(tmp_path / "lake"))
    truth = land_demo_crawl(lake, CRAWL, files=2, pages_per_file=30, seed=3)  # dev env: faker
    env = clean_env(TOKENMILL_LAKE_URL=str(tmp_path / "lake"), DAGSTER_HOME=str(tmp_path / "h"))
    tokenmill = [runtime_venv / "bin" / "tokenmill"]
    run = [*tokenmill, "run", "--crawl", CRAWL, "--files-per-unit", "1"]
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "FAILED" not in done.stdout
    rows = {row["stage"]: row for row in stage_rows(recipe_lake(lake))}  # the recipe's zones
    assert set(rows) == set(STAGES)
    for stage, row in rows.items():  # every partition of every stage committed, with output
        finished, total = row["partitions"].split("/")
        assert finished == total != "0" and row["docs_out"] > 0, (stage, row)
    assert rows["raw_crawl"]["docs_out"] >= len(truth["pages"])
    assert 0 < rows["tokenized_shards"]["docs_out"] < len(truth["pages"])
    assert rows["tokenized_shards"]["tokens"] > 0

    positives = tmp_path / "good.txt"
    positives.write_text("\n".join(sample_articles("en", 60, seed=2)))
    small = ["--epoch", "25", "--lr", "1.0", "--dim", "16", "--bucket", "100000"]
    train = [*tokenmill, "train-classifier", "good", "--positives", str(positives), *small]
    trained = subprocess.run(train, env=env, capture_output=True, text=True, timeout=300)
    assert trained.returncode == 0 and "held out" in trained.stdout, trained.stderr[-3000:]
    shared = tmp_path / "extraction.yaml"
    shared.write_text(
        "score:\n  classifiers:\n    - {name: good, model: classifiers/good/model.bin}\n"
    )
    recipe = tmp_path / "picky.yaml"
    recipe.write_text(
        "clean:\n  classifier_rules: [{classifier: good, label: hq, keep_top: 0.5}]\n"
    )
    settings = {"TOKENMILL_EXTRACTION": str(shared), "TOKENMILL_RECIPES": str(recipe)}
    done = subprocess.run(run, env=env | settings, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    scored = lake.read_json(f"scored/{CRAWL}/00000/_SUCCESS.json")["counts"]["classifiers"]
    assert scored["good"]["scored"] > 0
    cleaned = lake.read_json(f"recipes/picky/cleaned/{CRAWL}/00000/_SUCCESS.json")
    assert cleaned["dropped"]["filter:classifiers"] > 0
    assert cleaned["counts"]["classifier_thresholds"]["good.hq"][CRAWL]["crawl_kept_share"] > 0
