"""Every command, given what a user gets wrong, answers in one line naming what is wrong and
the valid choices, with exit status 2 (usage) or 1 (work that failed): never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tokenmill.cli.demo import land_demo_crawl
from tokenmill.cli.main import command_parser
from tokenmill.cli.main import main as cli
from tokenmill.crawl.units import register_new_files
from tokenmill.storage.lake import Lake

CRAWL = "CC-MAIN-ERRORS-2026-01"
USAGE, FAILED = 2, 1

# (arguments, exit status, what the message must say)
BAD = [
    (["demo", "--pages-per-file", "many"], USAGE, "invalid int value: 'many'"),
    (["register"], USAGE, "the following arguments are required: crawl"),
    (["register", "nope"], USAGE, f"no crawl named 'nope' landed or declared; crawls: {CRAWL}"),
    (["add-crawl", "CC-X"], USAGE, "one of the arguments --paths --prefix is required"),
    (["run", "--recipe", "nope"], USAGE, "no recipe named 'nope'; recipes: fineweb_en, lab"),
    (["run", "--recipe", "broken"], USAGE, "recipe 'broken' was left out: recipe "),
    (["run", "--select", "cleand"], USAGE, "no stage named 'cleand'; stages: raw_crawl, "),
    (["run", "--crawl", "nope"], USAGE, "no crawl named 'nope' landed or declared"),
    (["status", "--recipe", "nope"], USAGE, "no recipe named 'nope'; recipes: fineweb_en, lab"),
    (["summary", "--bogus"], USAGE, "unrecognized arguments: --bogus"),
    (["trace", "nope", "0", "0", "--recipe", "lab"], USAGE, "'nope' is not a unit"),
    (["trace", f"{CRAWL}/00000", "0", "0"], USAGE, "name a recipe with --recipe (recipes: "),
    (["trace", f"{CRAWL}/00000", "0", "x"], USAGE, "invalid int value: 'x'"),
    (["trace-release", "train-00000", "0", "--recipe", "nope"], USAGE, "no recipe named 'nope'"),
    (["preview", "missing.yaml"], USAGE, "recipe missing.yaml: No such file or directory"),
    (["preview", "LAB", "--against", "nope"], USAGE, "no recipe named 'nope' to compare with; "),
    (["preview", "LAB", "--against", "lab", "--crawl", "nope"], USAGE, "no registered crawl"),
    (["dropped", "--recipe", "broken"], USAGE, "recipe 'broken' was left out: recipe "),
    (["dropped", "--recipe", "lab", "--filter", "gopher"], USAGE, "no filter named 'gopher' in"),
    (["dropped", "--recipe", "lab", "--crawl", "nope"], USAGE, "no registered crawl named 'nope'"),
    (["contamination", "--recipe", "nope"], USAGE, "no recipe named 'nope'; recipes: fineweb_en"),
    (["contamination", "--recipe", "lab", "--set", "mmlu"], USAGE, "lab does not decontaminate"),
    (["contamination", "--recipe", "lab", "--crawl", "x"], USAGE, "no registered crawl named 'x'"),
    (["retrain-tokenizer"], USAGE, "name a recipe with --recipe (recipes: fineweb_en, lab)"),
    (["release", "--recipe", "nope"], USAGE, "no recipe named 'nope'; recipes: fineweb_en, lab"),
    (["train-classifier", "q", "--positives", "none.txt"], USAGE, "positives file none.txt does"),
    (["train-classifier", "q", "--positives", "LAB", "--crawl", "x"], USAGE, "no registered crawl"),
    (["recipes", "--remove", "nope"], USAGE, "no outputs of a recipe named 'nope' in "),
    (["recipes", "--remove", "lab"], USAGE, "recipe lab is in the recipes folder"),
    (["ui", "--port", "http"], USAGE, "invalid int value: 'http'"),
    (["nonsense"], USAGE, "invalid choice: 'nonsense'"),
    # failed work: the lake holds nothing to read yet
    (["preview", "LAB", "--against", "lab"], FAILED, f"nothing extracted yet in {CRAWL}"),
    (["trace", f"{CRAWL}/00000", "0", "0", "--recipe", "lab"], FAILED, "not materialized"),
    (["trace-release", "train-00000", "0", "--recipe", "lab"], FAILED, "no release is published"),
]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A lake with a registered (not yet processed) crawl, the project's recipe beside a lab
    recipe and a broken one."""
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    from tokenmill.recipes.recipe import DEFAULT_RECIPE

    (recipes / "fineweb_en.yaml").write_text(DEFAULT_RECIPE.read_text())
    (recipes / "lab.yaml").write_text("clean:\n  keep_languages: [en, de]\n")
    (recipes / "broken.yaml").write_text("dedup:\n  bands: many\n")
    monkeypatch.setenv("TOKENMILL_RECIPES", str(recipes))
    monkeypatch.setenv("TOKENMILL_LAKE_URL", str(tmp_path / "lake"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    lake = Lake.from_url(str(tmp_path / "lake"))
    land_demo_crawl(lake, CRAWL, files=1, pages_per_file=10, seed=0)
    register_new_files(lake, CRAWL, files_per_unit=1)
    return recipes


def test_every_command_is_driven_with_bad_arguments():
    commands = set(command_parser()._subparsers._group_actions[0].choices)
    assert commands == {args[0] for args, _, _ in BAD if args[0] != "nonsense"}


@pytest.mark.parametrize("args, status, says", BAD, ids=[" ".join(a) for a, _, _ in BAD])
def test_a_mistake_is_one_line_with_an_exit_status(project, capsys, args, status, says):
    args = [str(project / "lab.yaml") if a == "LAB" else a for a in args]
    with pytest.raises(SystemExit) as exit_:
        cli(args)
    err = capsys.readouterr().err
    assert exit_.value.code == status, err
    assert "Traceback" not in err
    assert says in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(("tokenmill", "usage: tokenmill")), err


def test_an_unforeseen_error_keeps_its_traceback(project, monkeypatch):
    """Bugs are not dressed as user errors."""
    import tokenmill.cli.reading as reading

    def broken(*_):
        raise KeyError("a bug")

    monkeypatch.setattr(reading, "load_catalog", broken)
    with pytest.raises(KeyError):
        cli(["recipes"])


def test_a_usage_error_from_the_installed_command_has_no_traceback(project):
    done = subprocess.run(
        [sys.executable, "-m", "tokenmill.cli.main", "release", "--recipe", "nope"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == USAGE
    assert done.stderr.strip() == (
        "tokenmill release: no recipe named 'nope'; recipes: fineweb_en, lab"
    ), done.stderr
