"""`tokenmill` command line: demo crawl, registration, end-to-end runs, summary and tracing."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tokenmill.lake import Lake
from tokenmill.report import format_table, stage_rows, trace_token
from tokenmill.shards import LANDING, Shard

DEMO_CRAWL = "CC-MAIN-DEMO-2026-01"
PROJECT_DIR = Path(__file__).resolve().parents[1]


def default_lake() -> Lake:
    url = os.environ.get("TOKENMILL_LAKE_URL") or str(PROJECT_DIR / "lake")
    return Lake.from_url(url, endpoint_url=os.environ.get("TOKENMILL_S3_ENDPOINT"))


def land_demo_crawl(lake: Lake, crawl: str, files: int, pages_per_file: int, seed: int) -> dict:
    """Generate the demo crawl and land it; a crawl landed with the same parameters is kept."""
    try:
        from tokenmill.demo import generate_demo_crawl
    except ModuleNotFoundError as missing:  # faker is a dev dependency, not in the runtime image
        raise SystemExit(
            f"tokenmill demo: the demo generator needs {missing.name!r}, a development "
            "dependency; install it with `uv sync --locked` (not --no-dev)"
        ) from missing

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
    lake = default_lake()
    started = time.perf_counter()
    truth = land_demo_crawl(lake, args.crawl, args.files, args.pages_per_file, args.seed)
    print(
        f"demo crawl {args.crawl}: {len(truth['pages'])} pages in {len(truth['files'])} "
        f"WARC files at {lake.uri(f'{LANDING}/{args.crawl}')}"
    )
    _register_and_run(lake, [args.crawl], args.files_per_shard, args.workers)
    print(f"\nfinished in {time.perf_counter() - started:.0f} s")


def cmd_register(args: argparse.Namespace) -> None:
    from data_assets.runner import local_instance, register

    lake = default_lake()
    new = register(local_instance(), lake, args.crawl, args.files_per_shard)
    print(f"{len(new)} new shards: {', '.join(str(s) for s in new) or '-'}")


def cmd_run(args: argparse.Namespace) -> None:
    _register_and_run(default_lake(), args.crawl or [], args.files_per_shard, args.workers)


def _register_and_run(lake: Lake, crawls: list[str], files_per_shard: int, workers: int) -> None:
    from data_assets.runner import (
        local_instance,
        materialize_all,
        materialized_partitions,
        register,
        sync_partitions,
    )

    instance = local_instance()
    for crawl in crawls:
        register(instance, lake, crawl, files_per_shard)
    sync_partitions(instance, lake)
    outcomes = materialize_all(instance, lake, workers)
    print(f"{len(outcomes)} runs succeeded on the instance at {instance.root_directory}")
    materialized = materialized_partitions(instance)
    rows = stage_rows(lake)
    for row in rows:
        row["dagster"] = len(materialized.get(row["stage"], ()))
    print(format_table(rows))


def cmd_summary(args: argparse.Namespace) -> None:
    print(format_table(stage_rows(default_lake())))


def cmd_trace(args: argparse.Namespace) -> None:
    found = trace_token(default_lake(), Shard(args.crawl, args.shard), args.position)
    print(
        f"token {found['position']} = {found['token']!r} (id {found['token_id']})"
        + (" [end of document]" if found["is_end_of_document"] else "")
    )
    for field in ("url", "crawl", "source_file", "record_id", "record_offset", "doc_id"):
        print(f"  {field:14} {found[field]}")
    print(f"  {'context':14} …{found['before']}[[{found['text']}]]{found['after']}…")


def cmd_ui(args: argparse.Namespace) -> None:
    from data_assets.runner import local_instance

    local_instance()
    os.chdir(PROJECT_DIR)
    command = ["dagster", "dev", "-w", "workspace.yaml", "-h", args.host, "-p", str(args.port)]
    os.execvp(command[0], command)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tokenmill", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="generate the demo crawl and run every stage on it")
    demo.add_argument("--crawl", default=DEMO_CRAWL)
    demo.add_argument("--files", type=int, default=8, help="WARC files (default 8)")
    demo.add_argument("--pages-per-file", type=int, default=500)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=cmd_demo)

    register = commands.add_parser("register", help="group landed WARC files into new shards")
    register.add_argument("crawl")
    register.set_defaults(func=cmd_register)

    run = commands.add_parser("run", help="materialize every stage for every partition")
    run.add_argument("--crawl", action="append", help="register this crawl's new files first")
    run.set_defaults(func=cmd_run)

    for sub in (demo, register, run):
        sub.add_argument("--files-per-shard", type=int, default=2)
    for sub in (demo, run):
        sub.add_argument("--workers", type=int, default=2, help="runs at a time")

    summary = commands.add_parser("summary", help="docs and tokens per stage")
    summary.set_defaults(func=cmd_summary)

    trace = commands.add_parser("trace", help="where a token of a tokenized shard came from")
    trace.add_argument("crawl")
    trace.add_argument("shard")
    trace.add_argument("position", type=int)
    trace.set_defaults(func=cmd_trace)

    ui = commands.add_parser("ui", help="open the Dagster UI (dagster dev) on this project")
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument("--port", type=int, default=3000)
    ui.set_defaults(func=cmd_ui)

    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    sys.exit(main())
