"""`tokenmill` command line: demo crawl, registration, end-to-end runs, status, summary, previews
and tracing."""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

from tokenmill.cli.errors import exit_status


def command_parser() -> argparse.ArgumentParser:
    """Every command and its options (the docs' command-line reference is generated from it)."""
    parser = argparse.ArgumentParser(prog="tokenmill", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="generate two demo crawls and run every stage")
    demo.add_argument(
        "--pages-per-file", type=int, default=500, help="pages in each demo WARC file (500)"
    )
    demo.add_argument("--seed", type=int, default=0, help="the demo crawls' random seed (0)")
    demo.set_defaults(handler="demo:cmd_demo")

    register = commands.add_parser("register", help="group a crawl's new WARC files into units")
    register.add_argument("crawl", help="the crawl's name (its folder in the landing zone)")
    register.add_argument(
        "--no-verify", action="store_true", help="do not list a paths file's objects first"
    )
    register.set_defaults(handler="pipeline:cmd_register")

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
    crawl.set_defaults(handler="pipeline:cmd_add_crawl")

    run = commands.add_parser(
        "run", help="materialize every partition that is missing or stale, stage by stage"
    )
    run.add_argument("--crawl", action="append", help="register this crawl's new files first")
    run.add_argument(
        "--force", action="store_true", help="every partition, even up to date: computed again"
    )
    run.add_argument(
        "--recipe", action="append", help="only this recipe's stages (default: every recipe)"
    )
    run.add_argument(
        "--select",
        action="append",
        metavar="STAGE",
        help="only this stage, e.g. cleaned (default: every stage)",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="say what would run, and why, without running it"
    )
    run.add_argument(
        "--release",
        action="store_true",
        help="then make each recipe's release, when its shards changed since the last one",
    )
    run.set_defaults(handler="pipeline:cmd_run")

    for sub in (demo, register, crawl, run):
        sub.add_argument(
            "--files-per-unit", type=int, default=4, help="WARC files per unit (partition)"
        )

    status = commands.add_parser(
        "status",
        help="the settings in force; per recipe and stage what is missing or stale, and why; "
        "what `run` would launch",
    )
    status.add_argument("--recipe", action="append", help="only this recipe (default: every one)")
    status.set_defaults(handler="pipeline:cmd_status")

    summary = commands.add_parser("summary", help="docs and tokens per stage")
    summary.add_argument(
        "--json", action="store_true", help="the rows and releases as JSON, for scripts"
    )
    summary.set_defaults(handler="reading:cmd_summary")

    trace = commands.add_parser("trace", help="where a token of a tokenized file came from")
    trace.add_argument("unit", help="<crawl>/<unit>")
    trace.add_argument("part", type=int, help="the unit's file number")
    trace.add_argument("position", type=int, help="the token's position in the file")
    trace.add_argument("--recipe", help="whose shards (default: the only recipe)")
    trace.set_defaults(handler="reading:cmd_trace")

    traced = commands.add_parser("trace-release", help="where a token of a release shard came from")
    traced.add_argument("shard", help="the shard's name, e.g. train-00000")
    traced.add_argument("position", type=int, help="the token's position in the shard")
    traced.add_argument("--version", help="the release version (default: the latest)")
    traced.add_argument("--recipe", help="whose release (default: the only recipe)")
    traced.set_defaults(handler="reading:cmd_trace_release")

    preview = commands.add_parser(
        "preview",
        help="what a recipe file would change against what is built: documents, words and "
        "tokens kept, per language, per filter and rule, and the documents whose fate changes "
        "(from the stored signals: nothing is extracted or written)",
    )
    preview.add_argument("recipe", help="the recipe file to try")
    preview.add_argument(
        "--against",
        help="compare with this recipe as built (a name in the recipes folder) or with a "
        "recipe file's settings (default: the recipe named as the file, else the first; its "
        "file's settings where nothing is built yet)",
    )
    preview.add_argument("--crawl", action="append", help="only this crawl (default: every one)")
    preview.add_argument("--sample", type=int, default=3, help="sample URLs per rule")
    preview.add_argument(
        "--html", help="write the report, with each rule's distribution and thresholds, here"
    )
    preview.set_defaults(handler="reading:cmd_preview")

    dropped = commands.add_parser(
        "dropped", help="documents a recipe dropped: filter, reason, URL and the start of the text"
    )
    dropped.add_argument("--recipe", help="whose filtering (default: the only recipe)")
    dropped.add_argument("--crawl", action="append", help="only this crawl (default: every one)")
    dropped.add_argument("--filter", action="append", help="only this filter's (default: any)")
    dropped.add_argument("--limit", type=int, default=10, help="documents shown (10)")
    dropped.add_argument("--chars", type=int, default=300, help="characters of each text (300)")
    dropped.add_argument(
        "--count", action="store_true", help="how many per filter and rule, instead of documents"
    )
    dropped.set_defaults(handler="reading:cmd_dropped")

    contamination = commands.add_parser(
        "contamination",
        help="what a recipe's decontamination removed: per evaluation set, the items matched "
        "and the passages with their URLs",
    )
    contamination.add_argument("--recipe", help="whose cleaning (default: the only recipe)")
    contamination.add_argument("--set", action="append", help="only this set (default: every one)")
    contamination.add_argument("--crawl", action="append", help="only this crawl (default: all)")
    contamination.add_argument("--limit", type=int, default=10, help="passages shown (10)")
    contamination.set_defaults(handler="reading:cmd_contamination")

    retrain = commands.add_parser(
        "retrain-tokenizer", help="build a recipe's tokenizer again, on purpose (a tagged run)"
    )
    retrain.add_argument("--recipe", help="whose tokenizer (default: the only recipe)")
    retrain.set_defaults(handler="pipeline:cmd_retrain_tokenizer")

    released = commands.add_parser(
        "release", help="make a recipe's training release now (a recorded run)"
    )
    released.add_argument("--recipe", help="whose release (default: the only recipe)")
    released.set_defaults(handler="pipeline:cmd_release")

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
    from tokenmill.classifiers.settings import (
        SMALL_DATA,
        SMALL_DATA_EXAMPLES,
        TRAINING_FLAGS,
        TrainingSettings,
    )

    defaults, small = TrainingSettings(), SMALL_DATA
    for field in TRAINING_FLAGS:
        default, chosen = getattr(defaults, field), getattr(small, field)
        about = f"fastText's {field} (default: {default}"
        about += f"; {chosen} below {SMALL_DATA_EXAMPLES:,} examples)" if chosen != default else ")"
        train.add_argument(f"--{field}", type=type(default), help=about)
    train.set_defaults(handler="classifier:cmd_train_classifier")

    recipes = commands.add_parser(
        "recipes", help="the recipes, their outputs, and recipe files that fail validation"
    )
    recipes.add_argument(
        "--remove", metavar="NAME", help="delete the outputs of a recipe whose file is gone"
    )
    recipes.add_argument(
        "--add-folder",
        metavar="DIR",
        help="add a folder of recipe files to the project settings file (tokenmill.yaml)",
    )
    recipes.set_defaults(handler="reading:cmd_recipes")

    ui = commands.add_parser("ui", help="open the Dagster UI (dagster dev) on this project")
    ui.add_argument("--host", default="127.0.0.1", help="the address to serve on (127.0.0.1)")
    ui.add_argument("--port", type=int, default=3000, help="the port to serve on (3000)")
    ui.set_defaults(handler="pipeline:cmd_ui")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = command_parser().parse_args(argv)
    module, _, name = args.handler.partition(":")
    try:
        getattr(import_module(f"tokenmill.cli.{module}"), name)(args)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as error:
        status = exit_status(error)
        if status is None:
            raise
        print(f"tokenmill {args.command}: {error}", file=sys.stderr)
        raise SystemExit(status) from None


if __name__ == "__main__":
    sys.exit(main())
