"""`tokenmill` command line: demo crawl, registration, end-to-end runs, summary and tracing."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tokenmill.classifiers.training import CLASSIFIERS, TrainingSettings
from tokenmill.cli.runner import RunsFailedError
from tokenmill.reports.summary import (
    NoSuchTokenError,
    format_table,
    stage_rows,
    trace_release_token,
    trace_token,
)
from tokenmill.storage.lake import Lake, LakeAccessError
from tokenmill.storage.layout import LANDING, Unit

# Two crawls of different sizes: every partition of every asset has data, whatever the other
# crawl holds.
DEMO_CRAWLS = {"CC-MAIN-DEMO-2026-01": (8, 0), "CC-MAIN-DEMO-2026-02": (4, 1)}  # files, seed
PROJECT_DIR = Path(__file__).resolve().parents[2]
DEMO_CLASSIFIER = "demo_quality"
# fastText's defaults need thousands of examples; the demo has hundreds
DEMO_TRAINING = TrainingSettings(dim=16, epoch=25, lr=1.0, bucket=100_000)
# What a user can fix (an argument, a setting, a missing input, a run that failed naming its
# cause) is said in one message on stderr; anything else keeps its traceback. ValueError
# covers LakeKeyError, FileNotFoundError covers MissingInputError.
EXPECTED_ERRORS = (
    ValueError,
    FileNotFoundError,
    NoSuchTokenError,
    LakeAccessError,
    RunsFailedError,
)


def default_lake() -> Lake:
    url = os.environ.get("TOKENMILL_LAKE_URL") or str(PROJECT_DIR / "lake")
    return Lake.from_url(url, endpoint_url=os.environ.get("TOKENMILL_S3_ENDPOINT"))


def land_demo_crawl(lake: Lake, crawl: str, files: int, pages_per_file: int, seed: int) -> dict:
    """Generate the demo crawl and land it; a crawl landed with the same parameters is kept."""
    try:
        from tokenmill.demo.crawl import generate_demo_crawl
    except ModuleNotFoundError as error:
        if error.name != "faker":
            raise
        raise SystemExit(f"tokenmill demo: {error}") from error

    truth_key = f"demo/{crawl}/truth.json"
    params = {"files": files, "pages_per_file": pages_per_file, "seed": seed}
    if lake.exists(truth_key) and lake.read_json(truth_key).get("params") == params:
        return lake.read_json(truth_key)
    with tempfile.TemporaryDirectory() as scratch:
        warc_dir, truth_path = Path(scratch, "warc"), Path(scratch, "truth.json")
        generate_demo_crawl(
            warc_dir, truth_path, crawl=crawl, files=files, pages_per_file=pages_per_file, seed=seed
        )
        for path in sorted(warc_dir.iterdir()):
            lake.put_file(f"{LANDING}/{crawl}/{path.name}", path)
        truth = json.loads(truth_path.read_text()) | {"params": params}
    lake.write_json(truth_key, truth)
    return truth


def cmd_demo(args: argparse.Namespace) -> None:
    from tokenmill.cli.progress import progress

    lake = default_lake()
    started = time.perf_counter()
    with progress(len(DEMO_CRAWLS), "generating the demo crawls", unit="crawls") as bar:
        for crawl, (files, seed) in DEMO_CRAWLS.items():
            truth = land_demo_crawl(lake, crawl, files, args.pages_per_file, args.seed + seed)
            bar.advance(
                f"demo crawl {crawl}: {len(truth['pages'])} pages in {len(truth['files'])} "
                f"WARC files at {lake.uri(f'{LANDING}/{crawl}')}",
                notable=True,
            )
    crawls = list(DEMO_CRAWLS)
    if not use_demo_settings(lake) and not any(os.environ.get(k) for k in demo_settings()):
        # first the project's settings; then a classifier trained on the extracted pages
        # scores them, and the demo's second recipe keeps the best scored
        _register_and_run(lake, crawls, args.files_per_unit)
        train_demo_classifier(lake, crawls)
        use_demo_settings(lake)
        print("\nwith the demo's classifier declared and its recipe added:")
    _register_and_run(lake, crawls, args.files_per_unit)
    print(f"\nfinished in {time.perf_counter() - started:.0f} s")


def demo_settings() -> dict[str, str]:
    from tokenmill.data_assets.recipe import RECIPES_DIR, RECIPES_ENV, SHARED_ENV

    demo = Path(__file__).resolve().parents[1] / "demo"
    return {
        SHARED_ENV: str(demo / "extraction.yaml"),
        RECIPES_ENV: f"{RECIPES_DIR}{os.pathsep}{demo / 'recipes'}",
    }


def use_demo_settings(lake: Lake) -> bool:
    """Once the demo has trained its classifier in the lake, the commands use the demo's
    settings (its classifier declared, its second recipe), unless the environment names
    settings of its own."""
    settings = demo_settings()
    if any(os.environ.get(k) for k in settings):
        return False
    try:
        trained = lake.exists(f"{CLASSIFIERS}/{DEMO_CLASSIFIER}/card.json")
    except LakeAccessError:
        return False
    if trained:
        os.environ.update(settings)
    return trained


def train_demo_classifier(lake: Lake, crawls: list[str]) -> None:
    """demo_quality: the demo crawls' extracted good pages (by their ground truth) against a
    random sample of the crawls' extracted documents, at a size that learns from hundreds."""
    from tokenmill.classifiers.training import train_classifier
    from tokenmill.crawl.units import registered_units
    from tokenmill.storage.layout import EXTRACTED
    from tokenmill.storage.outputs import part_files, read_batches

    kinds = {}
    for crawl in crawls:
        truth = lake.read_json(f"demo/{crawl}/truth.json")
        kinds |= {page["url"]: page["kind"].partition(":")[0] for page in truth["pages"]}
    with tempfile.TemporaryDirectory() as scratch:
        examples = {kind: Path(scratch) / f"{kind}.jsonl" for kind in ("good", "spam")}
        with examples["good"].open("w") as good, examples["spam"].open("w") as spam:
            files = {"good": good, "spam": spam, "broken": spam}
            for crawl in crawls:
                for unit in registered_units(lake, crawl):
                    for key in part_files(lake, unit, EXTRACTED):
                        for batch in read_batches(lake, key, ["url", "text"]):
                            for url, text in zip(*batch.to_pydict().values(), strict=True):
                                if out := files.get(kinds.get(url)):
                                    out.write(json.dumps({"text": text}) + "\n")
        card = train_classifier(
            lake,
            DEMO_CLASSIFIER,
            examples["good"],
            settings=DEMO_TRAINING,
            negatives_file=examples["spam"],
        )
    describe_card(lake, card)


def describe_card(lake: Lake, card: dict) -> None:
    name, held, negatives = card["name"], card["held_out"], card["negatives"]
    source = negatives.get("file") or ", ".join(negatives["crawls"])
    print(
        f"classifier {name}: {card['positives']['documents']} positives, "
        f"{negatives['documents']} negatives from {source}; held out {held['documents']}: "
        f"precision {held['precision']}, recall {held['recall']}"
    )
    print(f"  model {lake.uri(f'{CLASSIFIERS}/{name}/model.bin')} ({card['model_bytes']:,} B)")
    print(f"  card  {lake.uri(f'{CLASSIFIERS}/{name}/card.json')}")


def cmd_register(args: argparse.Namespace) -> None:
    from tokenmill.cli.runner import local_instance, register

    registration = register(
        local_instance(), default_lake(), args.crawl, args.files_per_unit, verify=not args.no_verify
    )
    for line in registration.describe_refused():
        print(f"refused: {line}", file=sys.stderr)
    units = registration.units
    shown = ", ".join(u.name for u in units[:10]) + (" ..." if len(units) > 10 else "")
    print(f"{len(units)} new units of {args.crawl}: {shown or '-'}")


def cmd_add_crawl(args: argparse.Namespace) -> None:
    from tokenmill.crawl.sources import CrawlSource

    source = CrawlSource(
        crawl=args.crawl,
        paths=args.paths,
        base=args.base,
        prefix=args.prefix,
        endpoint_url=args.endpoint_url,
        region=args.region,
        unsigned=args.unsigned,
        credentials=args.credentials,
        copy=args.copy,
    )
    lake = default_lake()
    source.save(lake)
    print(f"crawl {args.crawl} declared at {lake.uri(CrawlSource.key(args.crawl))}")
    if args.register:
        cmd_register(args)


def cmd_run(args: argparse.Namespace) -> None:
    _register_and_run(default_lake(), args.crawl or [], args.files_per_unit, args.force)


def _register_and_run(
    lake: Lake, crawls: list[str], files_per_unit: int, force: bool = False
) -> None:
    from tokenmill.cli.runner import (
        local_instance,
        materialize_all,
        materialized_partitions,
        register,
        sync_partitions,
    )
    from tokenmill.data_assets.datasets import Catalog

    catalog = Catalog.load()  # read once for the whole command
    for problem in catalog.problems:  # the other recipes run
        print(f"recipe left out: {problem}", file=sys.stderr)
    instance = local_instance()
    for crawl in crawls:
        for line in register(instance, lake, crawl, files_per_unit).describe_refused():
            print(f"refused: {line}", file=sys.stderr)
    sync_partitions(instance, lake)
    outcomes = materialize_all(instance, lake, force=force, catalog=catalog)
    print(f"{len(outcomes)} runs succeeded on the instance at {instance.root_directory}")
    materialized = materialized_partitions(instance, catalog)
    rows = summary_rows(lake, catalog)
    for row in rows:
        row["dagster"] = len(materialized.get(row["stage"], ()))
    print(format_table(rows))
    for line in release_lines(lake, catalog.recipes):
        print(line)


def release_lines(lake: Lake, datasets) -> list[str]:
    """Each recipe's latest release: where it is and what it holds."""
    from tokenmill.release.plan import release_report
    from tokenmill.storage.outputs import MissingInputError

    lines = []
    for dataset in datasets:
        recipe_lake = dataset.lake(lake)
        try:
            counts = release_report(recipe_lake)["counts"]
        except MissingInputError:
            continue
        where = recipe_lake.uri(f"release/{counts['version']}")
        lines.append(
            f"release {dataset.prefix}: {counts['train_shards']} train shards "
            f"({counts['train_tokens']:,} tokens), {counts['valid_shards']} valid "
            f"({counts['valid_tokens']:,} tokens) at {where}"
        )
    return lines


def summary_rows(lake: Lake, catalog=None) -> list[dict]:
    """The shared stages, then each recipe's (`<recipe>/<stage>`, as its asset key)."""
    from tokenmill.data_assets.datasets import Catalog

    catalog = catalog or Catalog.load()
    rows = stage_rows(lake, catalog.shared.stages)
    for dataset in catalog.recipes:
        rows += stage_rows(dataset.lake(lake), dataset.stages, f"{dataset.prefix}/")
    return rows


def cmd_summary(args: argparse.Namespace) -> None:
    from tokenmill.data_assets.datasets import Catalog

    lake, catalog = default_lake(), Catalog.load()
    print(format_table(summary_rows(lake, catalog)))
    for line in release_lines(lake, catalog.recipes):
        print(line)


def chosen_recipe(name: str | None, what: str = "--recipe"):
    """The named recipe of the recipes folder; without a name, the only one there is."""
    from tokenmill.data_assets.datasets import Catalog

    catalog = Catalog.load()
    if name:
        return catalog.recipe(name)
    if len(catalog.recipes) != 1:
        names = ", ".join(d.prefix for d in catalog.recipes) or "none"
        raise ValueError(f"name a recipe with {what} (recipes: {names})")
    return catalog.recipes[0]


def cmd_trace(args: argparse.Namespace) -> None:
    lake = chosen_recipe(args.recipe).lake(default_lake())
    print_trace(trace_token(lake, Unit.from_key(args.unit), args.part, args.position))


def cmd_trace_release(args: argparse.Namespace) -> None:
    lake = chosen_recipe(args.recipe).lake(default_lake())
    found = trace_release_token(lake, args.shard, args.position, args.version)
    print_trace(found)
    print(f"  {'copied from':14} {found['source']} document {found['source_doc_index']}")


def print_trace(found: dict) -> None:
    print(
        f"token {found['position']} = {found['token']!r} (id {found['token_id']})"
        + (" [end of document]" if found["is_end_of_document"] else "")
    )
    for field in ("url", "crawl", "source_file", "record_id", "record_offset", "doc_id"):
        print(f"  {field:14} {found[field]}")
    print(f"  {'context':14} …{found['before']}[[{found['text']}]]{found['after']}…")


def cmd_preview(args: argparse.Namespace) -> None:
    from tokenmill.crawl.units import registered_crawls, registered_units
    from tokenmill.data_assets.recipe import RECIPE_FILE_SUFFIXES, Recipe
    from tokenmill.reports.preview import html_report, preview, text_report
    from tokenmill.stages.cleaned import CleanSettings
    from tokenmill.storage.layout import EXTRACTED, MARKER

    lake = default_lake()
    proposed = Recipe.load(args.recipe).settings(CleanSettings)
    if args.against and Path(args.against).suffix in RECIPE_FILE_SUFFIXES:
        against = Recipe.load(args.against)
    else:
        against = chosen_recipe(args.against, "--against").recipe
    current = against.settings(CleanSettings)
    crawls = args.crawl or registered_crawls(lake)
    units = [
        unit
        for crawl in crawls
        for unit in registered_units(lake, crawl)
        if lake.exists(f"{unit.prefix(EXTRACTED)}/{MARKER}")
    ]
    if not units:
        raise ValueError(f"nothing extracted yet in {', '.join(crawls) or 'the lake'}")
    result = preview(lake, units, current, proposed, samples=args.sample)
    print(text_report(result))
    if args.html:
        Path(args.html).write_text(html_report(result))
        print(f"\ndistributions with both thresholds: {args.html}")


def cmd_dropped(args: argparse.Namespace) -> None:
    from tokenmill.crawl.units import registered_crawls, registered_units
    from tokenmill.reports.dropped import dropped_documents, text_report
    from tokenmill.stages.cleaned import CleanSettings

    dataset = chosen_recipe(args.recipe)
    lake = dataset.lake(default_lake())
    crawls = args.crawl or registered_crawls(lake)
    units = (unit for crawl in crawls for unit in registered_units(lake, crawl))
    mask = dataset.recipe.settings(CleanSettings).mask_pii
    found = dropped_documents(lake, units, args.filter, args.limit, args.chars, mask)
    print(text_report(found))


RETRAINED_TAG = "tokenmill/retrained"
RELEASED_TAG = "tokenmill/released"


def cmd_retrain_tokenizer(args: argparse.Namespace) -> None:
    """The recipe's tokenizer built again on purpose (trained anew, or read again from its
    path): a run tagged `tokenmill/retrained`, so the UI shows who changed the vocabulary; the
    tokenized shards are then stale and the automation (or `tokenmill run`) re-tokenizes."""
    from tokenmill.cli.runner import definitions_for, execute, local_instance
    from tokenmill.data_assets.jobs import job_name
    from tokenmill.storage.layout import TOKENIZER

    dataset = chosen_recipe(args.recipe)
    lake = default_lake()
    before = _tokenizer_sha(dataset.lake(lake))
    instance = local_instance()
    outcome = execute(
        job_name(TOKENIZER),
        None,
        instance,
        definitions_for(lake),
        [dataset.key(TOKENIZER)],
        tags={RETRAINED_TAG: f"tokenmill retrain-tokenizer by {os.environ.get('USER', '?')}"},
    )
    if not outcome.success:
        raise RunsFailedError([outcome])
    after = _tokenizer_sha(dataset.lake(lake))
    change = "unchanged" if after == before else f"{before or 'none'} -> {after}"
    print(f"{dataset.key(TOKENIZER).to_user_string()}: run {outcome.run_id}, sha256 {change}")


def cmd_release(args: argparse.Namespace) -> None:
    """A release of the recipe as its `release:` section says, made on purpose: a recorded
    Dagster run of the recipe's release asset; a version published already is left as it is."""
    from tokenmill.cli.progress import progress
    from tokenmill.cli.runner import definitions_for, execute, local_instance
    from tokenmill.data_assets.jobs import job_name
    from tokenmill.storage.layout import RELEASE

    dataset = chosen_recipe(args.recipe)
    lake = default_lake()
    with progress(None, dataset.key(RELEASE).to_user_string(), unit="steps") as bar:
        outcome = execute(
            job_name(RELEASE),
            None,
            local_instance(),
            definitions_for(lake),
            [dataset.key(RELEASE)],
            tags={RELEASED_TAG: f"tokenmill release by {os.environ.get('USER', '?')}"},
            on_step=bar.update,
        )
    if not outcome.success:
        raise RunsFailedError([outcome])
    print(f"{dataset.key(RELEASE).to_user_string()}: run {outcome.run_id}")
    for line in release_lines(lake, [dataset]):
        print(line)


def _tokenizer_sha(lake: Lake) -> str | None:
    from tokenmill.storage.layout import MARKER, TOKENIZER

    key = f"{TOKENIZER}/{MARKER}"
    return lake.read_json(key)["counts"]["sha256"][:16] if lake.exists(key) else None


def cmd_train_classifier(args: argparse.Namespace) -> None:
    from tokenmill.classifiers.training import TRAINING_PHASES, train_classifier
    from tokenmill.cli.progress import progress

    lake = default_lake()
    with progress(len(TRAINING_PHASES), f"classifier {args.name}", unit="phases") as bar:

        def show(now) -> None:
            if now.finished:
                bar.advance()
            else:
                bar.status(f"{now.phase}: {now.documents:,} documents")

        card = train_classifier(
            lake,
            args.name,
            Path(args.positives),
            crawls=args.crawl,
            negatives=args.negatives,
            negatives_file=Path(args.negatives_from) if args.negatives_from else None,
            settings=TrainingSettings(
                epoch=args.epoch, lr=args.lr, dim=args.dim, bucket=args.bucket, seed=args.seed
            ),
            progress=show,
        )
    describe_card(lake, card)


def cmd_recipes(args: argparse.Namespace) -> None:
    """The recipes, where their outputs are, recipe files left out and why, and outputs whose
    recipe file is gone; `--remove NAME` deletes such outputs."""
    from tokenmill.data_assets.datasets import RECIPES_ZONE, Catalog

    catalog = Catalog.load()
    lake = default_lake()
    names = {d.prefix for d in catalog.recipes}
    stored = set(lake.list_dirs(RECIPES_ZONE))
    if args.remove:
        if args.remove in names:
            raise ValueError(
                f"recipe {args.remove} is in the recipes folder "
                f"({catalog.recipe(args.remove).recipe.source}): delete its file first"
            )
        if args.remove not in stored:
            raise ValueError(f"no outputs of a recipe named {args.remove!r} in {lake.uri('')}")
        lake.delete_prefix(f"{RECIPES_ZONE}/{args.remove}")
        print(f"deleted {lake.uri(f'{RECIPES_ZONE}/{args.remove}')}")
        return
    for dataset in catalog.recipes:
        where = lake.uri(f"{RECIPES_ZONE}/{dataset.prefix}")
        print(f"{dataset.prefix:20} {dataset.recipe.source}  outputs: {where}")
    for name in sorted(stored - names):
        print(
            f"{name:20} (no recipe file) outputs kept: {lake.uri(f'{RECIPES_ZONE}/{name}')}; "
            f"`tokenmill recipes --remove {name}` deletes them"
        )
    if catalog.problems:
        raise ValueError("recipe files left out:\n" + "\n".join(f"  {p}" for p in catalog.problems))


def cmd_ui(args: argparse.Namespace) -> None:
    from tokenmill.cli.runner import local_instance

    local_instance()
    os.chdir(PROJECT_DIR)
    command = ["dagster", "dev", "-w", "workspace.yaml", "-h", args.host, "-p", str(args.port)]
    os.execvp(command[0], command)


def command_parser() -> argparse.ArgumentParser:
    """Every command and its options (the docs' command-line reference is generated from it)."""
    parser = argparse.ArgumentParser(prog="tokenmill", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="generate two demo crawls and run every stage")
    demo.add_argument(
        "--pages-per-file", type=int, default=500, help="pages in each demo WARC file (500)"
    )
    demo.add_argument("--seed", type=int, default=0, help="the demo crawls' random seed (0)")
    demo.set_defaults(func=cmd_demo)

    register = commands.add_parser("register", help="group a crawl's new WARC files into units")
    register.add_argument("crawl", help="the crawl's name (its folder in the landing zone)")
    register.add_argument(
        "--no-verify", action="store_true", help="do not list a paths file's objects first"
    )
    register.set_defaults(func=cmd_register)

    crawl = commands.add_parser(
        "add-crawl", help="declare a crawl read in place: a paths file or a prefix"
    )
    crawl.add_argument("crawl", help="the crawl's name, e.g. CC-MAIN-2024-10")
    where = crawl.add_mutually_exclusive_group(required=True)
    where.add_argument("--paths", help="warc.paths(.gz) URI: one path per line, relative to --base")
    where.add_argument("--prefix", help="local folder or s3:// prefix holding the WARC files")
    crawl.add_argument("--base", help="the URI the paths file's paths are relative to")
    crawl.add_argument("--endpoint-url", help="S3-compatible endpoint of the source bucket")
    crawl.add_argument("--region", help="the source bucket's region")
    crawl.add_argument("--unsigned", action="store_true", help="public bucket: unsigned requests")
    crawl.add_argument(
        "--credentials",
        help="environment prefix P: keys from P_ACCESS_KEY_ID and P_SECRET_ACCESS_KEY",
    )
    crawl.add_argument("--copy", action="store_true", help="keep a copy of each file in the lake")
    crawl.add_argument("--register", action="store_true", help="register its units now")
    crawl.add_argument("--no-verify", action="store_true", help=argparse.SUPPRESS)
    crawl.set_defaults(func=cmd_add_crawl)

    run = commands.add_parser(
        "run", help="materialize every partition that is missing or stale, stage by stage"
    )
    run.add_argument("--crawl", action="append", help="register this crawl's new files first")
    run.add_argument("--force", action="store_true", help="every partition, even up to date")
    run.set_defaults(func=cmd_run)

    for sub in (demo, register, crawl, run):
        sub.add_argument(
            "--files-per-unit", type=int, default=4, help="WARC files per unit (partition)"
        )

    summary = commands.add_parser("summary", help="docs and tokens per stage")
    summary.set_defaults(func=cmd_summary)

    trace = commands.add_parser("trace", help="where a token of a tokenized file came from")
    trace.add_argument("unit", help="<crawl>/<unit>")
    trace.add_argument("part", type=int, help="the unit's file number")
    trace.add_argument("position", type=int, help="the token's position in the file")
    trace.add_argument("--recipe", help="whose shards (default: the only recipe)")
    trace.set_defaults(func=cmd_trace)

    traced = commands.add_parser("trace-release", help="where a token of a release shard came from")
    traced.add_argument("shard", help="the shard's name, e.g. train-00000")
    traced.add_argument("position", type=int, help="the token's position in the shard")
    traced.add_argument("--version", help="the release version (default: the latest)")
    traced.add_argument("--recipe", help="whose release (default: the only recipe)")
    traced.set_defaults(func=cmd_trace_release)

    preview = commands.add_parser(
        "preview",
        help="what a recipe would newly drop and keep, from the stored signals (nothing is "
        "extracted or written)",
    )
    preview.add_argument("recipe", help="the recipe file to try")
    preview.add_argument(
        "--against",
        help="the recipe (a name in the recipes folder, or a file) to compare with "
        "(default: the only recipe)",
    )
    preview.add_argument("--crawl", action="append", help="only this crawl (default: every one)")
    preview.add_argument("--sample", type=int, default=3, help="sample URLs per rule")
    preview.add_argument("--html", help="write the distributions, thresholds marked, here")
    preview.set_defaults(func=cmd_preview)

    dropped = commands.add_parser(
        "dropped", help="documents a recipe dropped: filter, reason, URL and the start of the text"
    )
    dropped.add_argument("--recipe", help="whose filtering (default: the only recipe)")
    dropped.add_argument("--crawl", action="append", help="only this crawl (default: every one)")
    dropped.add_argument("--filter", action="append", help="only this filter's (default: any)")
    dropped.add_argument("--limit", type=int, default=10, help="documents shown (10)")
    dropped.add_argument("--chars", type=int, default=300, help="characters of each text (300)")
    dropped.set_defaults(func=cmd_dropped)

    retrain = commands.add_parser(
        "retrain-tokenizer", help="build a recipe's tokenizer again, on purpose (a tagged run)"
    )
    retrain.add_argument("--recipe", help="whose tokenizer (default: the only recipe)")
    retrain.set_defaults(func=cmd_retrain_tokenizer)

    released = commands.add_parser(
        "release", help="make a recipe's training release now (a recorded run)"
    )
    released.add_argument("--recipe", help="whose release (default: the only recipe)")
    released.set_defaults(func=cmd_release)

    train = commands.add_parser(
        "train-classifier",
        help="train a fastText quality classifier: your documents against the crawl's (or yours)",
    )
    train.add_argument("name", help="the classifier's name (classifiers/<name>/ in the lake)")
    train.add_argument(
        "--positives", required=True, help="good documents: .txt (one a line), .jsonl, .parquet"
    )
    train.add_argument(
        "--crawl", action="append", help="sample negatives from this crawl (default: every one)"
    )
    train.add_argument(
        "--negatives", type=int, help="how many extracted documents (default: as many as positives)"
    )
    train.add_argument(
        "--negatives-from",
        metavar="PATH",
        help="bad documents from a file (as --positives) instead of a sample of the crawl",
    )
    defaults = TrainingSettings()
    for field in ("epoch", "lr", "dim", "bucket", "seed"):
        default = getattr(defaults, field)
        about = f"fastText's {field} ({default})"
        train.add_argument(f"--{field}", type=type(default), default=default, help=about)
    train.set_defaults(func=cmd_train_classifier)

    recipes = commands.add_parser(
        "recipes", help="the recipes, their outputs, and recipe files that fail validation"
    )
    recipes.add_argument(
        "--remove", metavar="NAME", help="delete the outputs of a recipe whose file is gone"
    )
    recipes.set_defaults(func=cmd_recipes)

    ui = commands.add_parser("ui", help="open the Dagster UI (dagster dev) on this project")
    ui.add_argument("--host", default="127.0.0.1", help="the address to serve on (127.0.0.1)")
    ui.add_argument("--port", type=int, default=3000, help="the port to serve on (3000)")
    ui.set_defaults(func=cmd_ui)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = command_parser().parse_args(argv)
    try:
        if args.command != "demo":
            use_demo_settings(default_lake())
        args.func(args)
    except EXPECTED_ERRORS as error:
        print(f"tokenmill {args.command}: {error}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    sys.exit(main())
