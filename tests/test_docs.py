"""The docs stay true to the code: the site builds without a warning; every ```bash and
```python block of the getting-started page and of the guides runs against a demo lake; the
generated reference names every setting, command and asset; and no page, comment or docstring
carries a date, a clock time or a commit hash (history lives in git and CHANGELOG.md).

A page's blocks run in order, each on its own (a fresh bash with `set -euo pipefail`, or a
fresh Python) from the project root, on a copy of the demo lake and Dagster instance of the
page's own: a block must stand alone and exit 0. Blocks meant to be read, not run (a cluster's
commands, a server that keeps running, a session with its output), use another language
(```console, ```text, ```yaml, ...)."""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tokenize
from html.parser import HTMLParser
from pathlib import Path

import pytest

from testkit import commands

PROJECT_DIR = Path(__file__).resolve().parents[1]
DOCS = PROJECT_DIR / "docs"
RUN_PAGES = [DOCS / "getting-started.md", *sorted((DOCS / "guides").glob("*.md"))]
RUN_LANGUAGES = ("bash", "python")
# The demo at the size the tests build it (the default size takes minutes): a block's
# `tokenmill demo` runs at this size too, and finds the demo built already.
DEMO_PAGES_PER_FILE = "40"
BLOCK_TIMEOUT_S = 300
DEMO_OUTPUT = "demo.txt"  # what `tokenmill demo` printed, beside the demo lake
# Settings a block's environment does not inherit: the demo lake's and the demo's own choice.
OWN_ENV = (
    "TOKENMILL_LAKE_URL",
    "DAGSTER_HOME",
    "TOKENMILL_EXTRACTION",
    "TOKENMILL_RECIPES",
    "TOKENMILL_SETTINGS",
)


# -- the site -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built from the project root, as `uv run mkdocs build --strict` builds it."""
    out = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    built = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-6000:]
    return out


@pytest.mark.integration
def test_the_site_builds_without_a_warning(site):
    assert (site / "index.html").is_file()
    assert not list(site.rglob("*.py")), "the hooks' code is not published"


class Sections(HTMLParser):
    """Each heading's first code span -> the first code span of the first cell of each table
    row below it (a setting's name, a command's argument)."""

    def __init__(self, html: str):
        super().__init__()
        self.found: dict[str, set[str]] = {}
        self.heading: str | None = None
        self.where: str | None = None  # "heading" or "cell" while reading its first code span
        self.cells = 0
        self.code: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        if re.fullmatch(r"h[1-6]", tag):
            self.where, self.heading = "heading", None
        elif tag == "tr":
            self.cells = 0
        elif tag == "td":
            self.cells += 1
            self.where = "cell" if self.cells == 1 else None
        elif tag == "code" and self.where:
            self.code = []

    def handle_data(self, data):
        if self.code is not None:
            self.code.append(data)

    def handle_endtag(self, tag):
        if tag != "code" or self.code is None:
            if re.fullmatch(r"h[1-6]|td", tag):
                self.where = None
            return
        text, self.code = "".join(self.code), None
        if self.where == "heading":
            self.heading = text
            self.found.setdefault(text, set())
        elif self.where == "cell" and self.heading is not None:
            self.found[self.heading].add(text)
        self.where = None


def page_sections(site: Path, page: str) -> dict[str, set[str]]:
    return Sections((site / page / "index.html").read_text()).found


def config_paths(model, path: str):
    """(section path, name) of every field of a recipe's config model, and of the models it
    nests (a filter's thresholds, the items of a list of mappings)."""
    from pydantic import BaseModel

    for name, field in model.model_fields.items():
        yield path, name
        kind = field.annotation
        inner = next(iter(getattr(kind, "__args__", ())), kind)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            yield from config_paths(inner, f"{path}.{name}")


@pytest.mark.integration
def test_the_settings_page_names_every_field_of_every_recipe_section(site):
    from tokenmill.data_assets.recipe import run_config_class

    from tokenmill.recipes.recipe import Recipe, section
    from tokenmill.stages import STAGES

    recipe = Recipe({}, "reference.yaml")
    expected = {
        pair
        for stage in STAGES
        if stage.settings
        for pair in config_paths(run_config_class(recipe, stage), section(stage.settings))
    }
    assert len(expected) > 50
    found = page_sections(site, "reference/settings")
    missing = sorted(
        f"{path}: {name}" for path, name in expected if name not in found.get(path, ())
    )
    assert not missing


@pytest.mark.integration
def test_the_command_line_page_names_every_command_and_argument(site):
    from tokenmill.cli.main import command_parser

    parser = command_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = page_sections(site, "reference/cli")
    missing = []
    for name, command in commands.choices.items():
        cells = " ".join(found.get(f"tokenmill {name}", ()))
        names = set(re.split(r"[ ,]+", cells))
        for action in command._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            missing += [
                f"tokenmill {name} {option}"
                for option in action.option_strings or [action.dest]
                if option not in names
            ]
        if f"tokenmill {name}" not in found:
            missing.append(f"tokenmill {name}")
    assert len(commands.choices) > 10
    assert not missing


@pytest.mark.integration
def test_the_assets_page_names_every_asset_of_the_code_location(site):
    from tokenmill.data_assets.datasets import Catalog
    from tokenmill.resources.lake import LakeResource

    from tokenmill.definitions import build_definitions
    from tokenmill.recipes.project import RECIPES_DIR, SHARED_SETTINGS

    catalog = Catalog.load(RECIPES_DIR, SHARED_SETTINGS)
    defs = build_definitions(LakeResource(url=str(site / "lake")), recipes=catalog)
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    found = page_sections(site, "reference/assets")
    assert len(keys) > 10
    assert keys - set(found) == set()


# -- the blocks of the getting-started page and the guides ---------------------------------------

FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*\{?\.?(?P<language>[\w+-]*)[^\n]*\n"
    r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


def code_blocks(markdown: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block, in order (a block inside a list item or an
    admonition without its indentation)."""
    blocks = []
    for found in FENCE.finditer(markdown):
        indent = len(found["indent"])
        body = "".join(line[indent:] for line in found["body"].splitlines(keepends=True))
        blocks.append((found["language"].lower(), body))
    return blocks


def test_the_block_parser_finds_each_fence_and_its_language():
    page = (
        "Run:\n\n```bash\nuv run tokenmill summary\n```\n\n"
        '!!! note\n\n    ```python title="x.py"\n    print(1)\n    ```\n\n'
        "~~~~console\n$ ls\n~~~~\n"
    )
    assert code_blocks(page) == [
        ("bash", "uv run tokenmill summary\n"),
        ("python", "print(1)\n"),
        ("console", "$ ls\n"),
    ]


@pytest.fixture(scope="session")
def demo_lake(tmp_path_factory) -> Path:
    """`tokenmill demo` (both recipes, the classifier it trains, the releases) into a lake and
    a Dagster instance of their own: `lake/` and `home/` under the returned folder."""
    root = tmp_path_factory.mktemp("demo")
    command = [sys.executable, "-m", "tokenmill.cli.main", "demo"]
    command += ["--pages-per-file", DEMO_PAGES_PER_FILE]
    done = subprocess.run(command, env=demo_env(root), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (root / DEMO_OUTPUT).write_text(done.stdout)
    return root


def demo_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OWN_ENV}
    return env | {
        "TOKENMILL_LAKE_URL": str(root / "lake"),
        "DAGSTER_HOME": str(root / "dagster_home"),
        "TOKENMILL_SETTINGS": str(root / "tokenmill.yaml"),
    }


def runnable(language: str, code: str) -> list[str]:
    if language == "python":
        return [sys.executable, "-c", code]
    code = re.sub(
        r"\btokenmill demo\b(?![^\n]*--pages-per-file)",
        f"tokenmill demo --pages-per-file {DEMO_PAGES_PER_FILE}",
        code,
    )
    return ["bash", "-c", "set -euo pipefail\n" + code]


@pytest.mark.integration
@pytest.mark.parametrize(
    "page", [p for p in RUN_PAGES if p.is_file()], ids=lambda p: str(p.relative_to(DOCS))
)
def test_every_block_of_the_page_runs(page, demo_lake, tmp_path):
    shutil.copytree(demo_lake, tmp_path / "demo", symlinks=True)
    env = demo_env(tmp_path / "demo")
    blocks = [(lang, code) for lang, code in code_blocks(page.read_text()) if lang in RUN_LANGUAGES]
    for number, (language, code) in enumerate(blocks, 1):
        done = subprocess.run(
            runnable(language, code),
            cwd=PROJECT_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
        )
        assert done.returncode == 0, (
            f"{page.relative_to(PROJECT_DIR)}, block {number} ({language}) exited "
            f"{done.returncode}:\n{code}\n--- stdout\n{done.stdout[-3000:]}\n"
            f"--- stderr\n{done.stderr[-3000:]}"
        )


@pytest.mark.integration
def test_the_demo_trains_a_classifier_and_builds_a_second_recipe_that_keeps_by_it(
    demo_lake, tmp_path
):
    """`tokenmill demo` end to end, as the README's first command runs it (smaller pages):
    the project's recipe, then demo_quality trained from the crawls' good pages and the
    demo_top_quality recipe; `tokenmill summary` shows both datasets; run again, nothing runs."""
    out = (demo_lake / DEMO_OUTPUT).read_text()
    assert re.search(r"classifier demo_quality: \d+ positives, \d+ negatives", out)
    assert f"the demo's classifier declared and its recipe added in {demo_lake}" in out
    root = tmp_path / "demo"
    shutil.copytree(demo_lake, root, symlinks=True)
    env = demo_env(root)

    def tokenmill(*args: str) -> str:
        return commands.run(env, *args)

    card = json.loads((root / "lake/classifiers/demo_quality/card.json").read_text())
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
        # its documents and tokens per language, from the tokenized units' markers
        (line,) = [s for s in summary if s.startswith(f"{recipe} (tokenized) per language: ")]
        per_language = re.findall(r"(\w+) ([\d,]+) docs, ([\d,]+) tokens", line)
        assert [language for language, *_ in per_language] == ["en"], line
        assert sum(int(docs.replace(",", "")) for _, docs, _ in per_language) == shards["docs_out"]
    # the classifier keeps a share of what FineWeb's filters keep
    assert 0 < rows["demo_top_quality/cleaned"]["docs_out"] < rows["fineweb_en/cleaned"]["docs_out"]
    assert rows["scored"]["docs_out"] == rows["extracted"]["docs_out"]
    assert "\n0 runs succeeded" in "\n" + tokenmill("demo", "--pages-per-file", DEMO_PAGES_PER_FILE)
    # a release made on purpose: a recorded run; the same inputs and settings, the same version
    released = [line for line in summary if line.startswith("release demo_top_quality")]
    again = tokenmill("release", "--recipe", "demo_top_quality")
    assert "demo_top_quality/release: run " in again and released[0] in again


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_the_ui_restarted_after_a_run_requests_nothing_that_run_built(demo_lake, tmp_path):
    """The UI's daemon ticked with the project's own settings; then the demo's settings were
    written (a classifier declared, a recipe added) and `tokenmill run` built what they
    change. Started again, `dagster dev` reads the same settings file as the commands and
    requests nothing: every automation sensor ticks three times without a run, though the
    code versions changed since its last tick."""
    root = tmp_path / "demo"
    shutil.copytree(demo_lake, root, symlinks=True)
    env = demo_env(root)
    settings = Path(env["TOKENMILL_SETTINGS"])
    demo_settings = settings.read_text()
    settings.write_text("")  # the project's own settings while the daemon first ticks
    assert ticks_launch_nothing(root, env) == []
    settings.write_text(demo_settings)
    tokenmill = [sys.executable, "-m", "tokenmill.cli.main"]
    run = subprocess.run([*tokenmill, "run"], env=env, capture_output=True, text=True)
    assert run.returncode == 0 and "\n0 runs succeeded" in "\n" + run.stdout, run.stdout
    assert ticks_launch_nothing(root, env) == []


@pytest.mark.integration
def test_a_new_evaluation_set_reruns_only_the_recipe_that_decontaminates(demo_lake, tmp_path):
    """A set added to the shared settings rebuilds eval_index; its new data version makes the
    cleaned partitions of demo_top_quality (which decontaminates) stale and they run again,
    with what follows them; fineweb_en (which does not) runs nothing."""
    root = tmp_path / "demo"
    shutil.copytree(demo_lake, root, symlinks=True)
    extraction = root / "extraction.yaml"
    extraction.write_text(
        (PROJECT_DIR / "tokenmill/demo/extraction.yaml").read_text()
        + "    - name: extra\n      path: eval/demo_qa.jsonl\n      fields: [answer]\n"
    )
    env = demo_env(root) | {"TOKENMILL_EXTRACTION": str(extraction)}
    tokenmill = [sys.executable, "-m", "tokenmill.cli.main"]
    run = subprocess.run([*tokenmill, "run"], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    ran = [line.split()[0] for line in run.stdout.splitlines() if line.endswith(" ok")]
    assert ran.count("eval_index") == 1
    assert ran.count("demo_top_quality/cleaned") == 3
    assert not [asset for asset in ran if asset.startswith("fineweb_en/")]
    sets = json.loads((root / "lake" / "eval_index" / "sets.json").read_text())
    assert set(sets) == {"demo_qa", "extra"}
    # each crawl's sums, in its dedup_clusters materialization's metadata
    from dagster import AssetKey, AssetRecordsFilter

    from testkit.dagster_dev import instance_at

    by_crawl = {}
    with instance_at(root / "dagster_home") as instance:
        key = AssetKey(["demo_top_quality", "dedup_clusters"])
        for crawl in instance.get_materialized_partitions(key):
            wanted = AssetRecordsFilter(asset_key=key, asset_partitions=[crawl])
            (record,) = instance.fetch_materializations(wanted, limit=1).records
            by_crawl[crawl] = record.asset_materialization.metadata["contamination"].value
    # demo_qa was taken from the first crawl's pages
    first = by_crawl["CC-MAIN-DEMO-2026-01"]["demo_qa"]
    assert first["documents"] >= 1 and len(first["items"]) >= 1, by_crawl


def ticks_launch_nothing(root: Path, env: dict[str, str]) -> list[tuple[str, str]]:
    """Start `dagster dev` on the demo's copy until every automation sensor ticked three more
    times; the runs and backfills it launched meanwhile."""
    from testkit.dagster_dev import instance_at, start_dagster_dev, stop_dagster_dev

    with instance_at(root / "dagster_home") as instance:
        before = {run.run_id for run in instance.get_runs()}
    dev = start_dagster_dev(
        root,
        TOKENMILL_TICK_SECONDS="2",
        TOKENMILL_SETTINGS=env["TOKENMILL_SETTINGS"],
        TOKENMILL_LAKE_URL=env["TOKENMILL_LAKE_URL"],
    )
    try:
        started, deadline = None, time.monotonic() + 300
        while True:
            ticks = automation_ticks(dev)
            started = started or {name: len(done) for name, done in ticks.items()}
            if ticks and all(len(ticks[name]) >= started.get(name, 0) + 3 for name in ticks):
                break
            assert time.monotonic() < deadline, f"automation ticks so far: {ticks}"
            time.sleep(2)
        with dev.instance() as instance:
            # the hourly reconciliation is not a request: its tick falls due when an hour
            # began since the demo's instance last ran
            launched = [
                (run.job_name, run.tags.get("dagster/partition"))
                for run in instance.get_runs()
                if run.run_id not in before and "dagster/schedule_name" not in run.tags
            ]
            launched += [("backfill", fill.backfill_id) for fill in instance.get_backfills()]
    finally:
        stop_dagster_dev(dev)
    assert not (failed := failed_ticks(dev)), failed
    return launched


def automation_ticks(dev) -> dict[str, list[str]]:
    """The statuses of each automation sensor's ticks so far, newest first."""
    with dev.instance() as instance:
        return {
            state.instigator_name: [
                tick.status.value
                for tick in instance.get_ticks(state.instigator_origin_id, state.selector_id)
            ]
            for state in instance.all_instigator_state()
            if state.instigator_name.startswith("automation_")
        }


# A tick that found `dagster dev`'s code location away is Dagster's, not the project's, when it
# was the sensor's last (cut off as dagster dev stopped) or its next tick ran (the location
# replaced under load); the location away for good fails tick after tick.
CODE_LOCATION_AWAY = ("DagsterUserCodeUnreachableError", "DagsterCodeLocationNotFoundError")


def failed_ticks(dev) -> dict[str, list[str]]:
    """The errors of each automation sensor's failed ticks, but for its code location away
    once (see ``CODE_LOCATION_AWAY``)."""
    with dev.instance() as instance:
        failed = {}
        for state in instance.all_instigator_state():
            if not state.instigator_name.startswith("automation_"):
                continue
            # newest first
            ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id)
            failed[state.instigator_name] = [
                tick.error.to_string() if tick.error else "no error recorded"
                for newer, tick in zip([None, *ticks], ticks, strict=False)
                if tick.status.value == "FAILURE"
                and not (
                    tick.error
                    and tick.error.cls_name in CODE_LOCATION_AWAY
                    and (newer is None or newer.status.value != "FAILURE")
                )
            ]
        return {name: errors for name, errors in failed.items() if errors}


# -- no dates, clock times or commit hashes -------------------------------------------------------

MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
DATE = re.compile(
    rf"\b(?:19|20)\d\d-[01]\d-[0-3]\d(?!\d)|\b[0-3]?\d {MONTH}\b|\b{MONTH}\.? [0-3]?\d\b"
    rf"|\b{MONTH},? (?:19|20)\d\d\b"
)
# hours:minutes (and seconds), not a ratio (1:2), a port (host:8080) or part of a longer number
CLOCK = re.compile(
    r"(?:(?<=\dT)|(?<![\w.:]))(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d)?(?!\d|[.:]\d|[A-Y_a-z])"
)
# 7 to 40 hex digits with a letter and a digit among them, standing alone: not a hex constant
# (0x...), a SHA-256 (64), a version in a path (release/...) or a word (added, decade)
COMMIT = re.compile(r"(?<![\w./-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/-])")
CODE_DIRS = ("tokenmill", "data_assets", "resources", "sensors", "tests", "testkit")
CODE_DIRS += ("benchmarks", "scripts", "docs")
HASH_COMMENTED = (
    "helm",
    "resources",
    "scripts",
    ".ci",
    "tokenmill/demo",
)  # YAML, shell and Dockerfile comments


def python_comments(text: str) -> list[tuple[int, str]]:
    """(line, text) of each comment and docstring of a Python module."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, documented) and (doc := ast.get_docstring(node, clean=False)):
            found.append((node.body[0].lineno, doc))
    return found


def hash_comments(text: str) -> list[tuple[int, str]]:
    """(line, text) of each `#` comment of a YAML file, a shell script or a Dockerfile."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        comment = re.search(r"(?:^|\s)#(.*)", line)
        if comment:
            found.append((number, comment[1]))
    return found


def markdown_lines(text: str) -> list[tuple[int, str, bool]]:
    """(line, text, in a fenced block) of each line of a Markdown page."""
    lines, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        opening = re.match(r"\s*(`{3,}|~{3,})", line)
        if opening and (fence is None or opening[1].startswith(fence)):
            fence = None if fence else opening[1]
        lines.append((number, line, fence is not None))
    return lines


def history_marks(text: str, commits: bool = True) -> list[str]:
    patterns = [DATE, CLOCK, COMMIT] if commits else [DATE, CLOCK]
    return [found[0] for pattern in patterns for found in pattern.finditer(text)]


def written_texts() -> list[tuple[str, int, str, bool]]:
    """(file, line, text, whether a commit-like hash counts) of every page, comment and
    docstring the rule covers; the changelog names versions, where its history belongs."""
    texts = []
    pages = [PROJECT_DIR / "README.md", *sorted(DOCS.rglob("*.md"))]
    for page in pages:
        if page.name.lower() == "changelog.md":
            continue
        for number, line, in_block in markdown_lines(page.read_text()):
            texts.append((page, number, line, not in_block))  # a block's output has run ids
    for folder in CODE_DIRS:
        for module in sorted((PROJECT_DIR / folder).rglob("*.py")):
            texts += [(module, n, t, True) for n, t in python_comments(module.read_text())]
    for folder in HASH_COMMENTED:
        for path in sorted((PROJECT_DIR / folder).rglob("*")):
            if path.suffix in (".yaml", ".yml", ".sh") or path.name in ("Dockerfile", "run"):
                texts += [(path, n, t, True) for n, t in hash_comments(path.read_text())]
    return [(str(path.relative_to(PROJECT_DIR)), n, t, c) for path, n, t, c in texts]


def test_history_marks_are_found_and_their_look_alikes_are_not():
    assert history_marks("measured on 27 November 18:52-18:54 at 1cab5ac, and Nov 27") == [
        "27 November",
        "Nov 27",
        "18:52",
        "18:54",
        "1cab5ac",
    ]
    assert history_marks("2026-11-27T09:15:02Z, at 7:05.") == ["2026-11-27", "09:15:02", "7:05"]
    look_alikes = (
        "1:2 ratios, 127.0.0.1:5432, 0x9e3779b97f4a7c15, 3.5:1, 1000000, added, a decade, "
        "release/f0c1751bbf40b11b, CC-MAIN-2024-10, May and June, v1.13.27, 10^10, " + "ab12" * 16
    )
    assert history_marks(look_alikes) == []


def test_no_page_comment_or_docstring_carries_a_date_a_clock_time_or_a_commit():
    found = [
        f"{path}:{line}: {mark!r}"
        for path, line, text, commits in written_texts()
        for mark in history_marks(text, commits)
    ]
    assert not found, "history belongs in git and CHANGELOG.md:\n" + "\n".join(found)
