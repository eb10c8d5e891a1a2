"""The Dagster layer at corpus scale: a simulated Common Crawl corpus (paths files only, no data)
registered on a real instance, and what operators wait for on it.

    uv run python benchmarks/bench_scale.py --crawls 100 --files-per-crawl 90000 --out DIR

Each simulated crawl is declared by a `warc.paths.gz` of `--files-per-crawl` Common Crawl-style
paths (its objects are not there, so registration does not list them); one more crawl,
CC-MAIN-SIM-REAL, is backed by real small WARC files and registered with its objects checked.
The instance is PostgreSQL when a server answers on 127.0.0.1:5432 (a new database), SQLite
otherwise; it is left in DIR/home (`DAGSTER_HOME=DIR/home dagster dev -w workspace.yaml` opens
it, with `TOKENMILL_LAKE_URL=DIR/lake`). Measured: registration; a landing-sensor tick that
registers a landed crawl; automation ticks (the first one sees every unit new, the second has
nothing new), and the CPU the code server and the daemon spend per automation interval
while nothing happens; the UI's partition page through GraphQL; launching a backfill of one
whole crawl; and how many runs were requested for partitions that are not registered units
(phantoms). Last, the idle ticks once more with the daemon otherwise quiet (`dagster dev`
stopped, the unfinished backfills marked canceled, started again: it no longer submits their
runs into the closed queue).
`--recipes N` serves N recipes side by side (the project's and N-1 variants of it, written to
DIR/recipes). The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from benchmarks.measure import print_table
from benchmarks.results import record

PROJECT = Path(__file__).resolve().parents[1]

PG = ("127.0.0.1", 5432, "postgres")
# Runs are queued, never launched: the simulated files do not exist.
QUEUE = (
    "run_coordinator:\n  module: dagster.core.run_coordinator\n  class: QueuedRunCoordinator\n"
    "  config:\n    max_concurrent_runs: 0\n"
)
REAL_CRAWL = "CC-MAIN-SIM-REAL"
IDLE_INTERVALS = 3
LANDED_CRAWL = "CC-MAIN-SIM-LANDED"
PARTITION_PAGE = """
query ($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      partitionKeysByDimension { name partitionKeys }
      assetPartitionStatuses {
        ... on DefaultPartitionStatuses {
          materializedPartitions failedPartitions unmaterializedPartitions materializingPartitions
        }
      }
    }
  }
}"""
SENSOR_TICKS = """
query ($name: String!) {
  sensorOrError(sensorSelector: {repositoryLocationName: "tokenmill",
                                 repositoryName: "__repository__", sensorName: $name}) {
    ... on Sensor {
      sensorState {
        ticks(limit: 100) {
          status timestamp endTimestamp runIds requestedAssetMaterializationCount
          dynamicPartitionsRequestResults { partitionsDefName partitionKeys }
        }
      }
    }
  }
}"""
LAUNCH_BACKFILL = """
mutation ($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
  }
}"""


def postgres_up() -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(PG[:2]) == 0


def instance_yaml(home: Path) -> str:
    if not postgres_up():
        return "telemetry:\n  enabled: false\n" + QUEUE
    import psycopg2

    name = f"tokenmill_scale_{uuid.uuid4().hex[:8]}"
    connection = psycopg2.connect(host=PG[0], port=PG[1], user=PG[2], dbname="postgres")
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    connection.close()
    return (
        "telemetry:\n  enabled: false\nstorage:\n  postgres:\n    postgres_db:\n"
        f"      hostname: {PG[0]}\n      port: {PG[1]}\n      username: {PG[2]}\n"
        f"      password: ''\n      db_name: {name}\n" + QUEUE
    )


def write_paths_file(root: Path, crawl: str, files: int) -> Path:
    """Common Crawl's layout: 100 segments, files numbered within the crawl."""
    path = root / crawl / "warc.paths.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    per_segment = max(1, files // 100)
    with gzip.open(path, "wt", compresslevel=1) as out:
        for i in range(files):
            segment = f"1700000000000.{i // per_segment}"
            out.write(f"crawl-data/{crawl}/segments/{segment}/warc/{crawl}-{i:06d}.warc.gz\n")
    return path


def real_crawl(root: Path, files: int) -> Path:
    from tokenmill.demo.crawl import generate_demo_crawl

    folder = root / REAL_CRAWL
    generate_demo_crawl(
        folder / "warc",
        folder / "truth.json",
        crawl=REAL_CRAWL,
        files=files,
        pages_per_file=20,
        seed=3,
    )
    names = sorted(p.name for p in (folder / "warc").iterdir())
    with gzip.open(folder / "warc.paths.gz", "wt") as out:
        out.writelines(f"warc/{name}\n" for name in names)
    return folder


def graphql(url: str, query: str, variables: dict) -> dict:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(
        f"{url}/graphql", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        answer = json.loads(response.read())
    if answer.get("errors"):
        raise RuntimeError(answer["errors"])
    return answer["data"]


def start_dagster_dev(env: dict, port: int) -> subprocess.Popen:
    """`dagster dev` (webserver and daemon) on the benchmark's instance; the instance's run
    queue launches nothing, so requested runs stay queued and countable."""
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "dagster"),
            "dev",
            "-w",
            str(PROJECT / "workspace.yaml"),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        cwd=PROJECT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            graphql(f"http://127.0.0.1:{port}", "{ version }", {})
            return process
        except OSError:
            time.sleep(1)
    process.kill()
    raise RuntimeError("the webserver did not start")


def stop(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(30)


def wait_for_tick(
    url: str, sensor: str, after: float, count: int, at_least: bool = True
) -> list[dict]:
    """The first `count` finished ticks of a sensor that started after `after` (epoch s); with
    `at_least=False`, all there are (at most `count`) without waiting."""
    deadline = time.time() + 1800
    while time.time() < deadline:
        answer = graphql(url, SENSOR_TICKS, {"name": sensor})["sensorOrError"]
        ticks = [
            t
            for t in reversed(answer["sensorState"]["ticks"])
            if t["timestamp"] >= after and t["endTimestamp"] and t["status"] != "STARTED"
        ]
        if len(ticks) >= count or not at_least:
            for tick in ticks:
                tick["seconds"] = round(tick["endTimestamp"] - tick["timestamp"], 2)
            return ticks[:count]
        time.sleep(5)
    raise TimeoutError(f"no {count} ticks of {sensor} after {after}")


def idle_cpu(server: subprocess.Popen, intervals: int) -> dict:
    """CPU seconds per automation interval (30 s) of the code server, where the automation
    sensors are evaluated (the benchmark's instance has no `sensors:` section: its daemon
    ticks them one after another), and of the daemon, measured over `intervals` idle
    intervals."""
    import psutil

    def roles() -> dict[str, list]:
        found: dict[str, list] = {"code_server": [], "daemon": []}
        for process in psutil.Process(server.pid).children(recursive=True):
            argv = process.cmdline()[:5]  # the daemon's later arguments name the code server
            if "code-server" in argv or ("api" in argv and "grpc" in argv):
                found["code_server"].append(process)
            elif "dagster._daemon" in argv:
                found["daemon"].append(process)
        return found

    def cpu(processes) -> float:
        return sum(sum(p.cpu_times()[:2]) for p in processes)

    processes = roles()
    before = {role: cpu(found) for role, found in processes.items()}
    time.sleep(30 * intervals)
    return {
        f"{role}_idle_cpu_s_per_interval": round((cpu(found) - before[role]) / intervals, 2)
        for role, found in processes.items()
    }


def requested_keys(instance) -> list[str | None]:
    """The partitions of every backfill and run on the instance."""
    keys = [
        key
        for backfill in instance.get_backfills()
        if backfill.asset_backfill_data is not None
        for _, key in backfill.asset_backfill_data.target_subset.iterate_asset_partitions()
    ]
    return keys + [r.tags.get("dagster/partition") for r in instance.get_runs()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crawls", type=int, default=100)
    parser.add_argument("--files-per-crawl", type=int, default=90_000)
    parser.add_argument("--files-per-unit", type=int, default=100)
    parser.add_argument("--recipes", type=int, default=1, help="recipes served side by side")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    out = args.out.resolve()
    home, lake_dir, sources = out / "home", out / "lake", out / "sources"
    for folder in (home, lake_dir, sources):
        folder.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(instance_yaml(home))
    os.environ.update(DAGSTER_HOME=str(home), TOKENMILL_LAKE_URL=str(lake_dir))
    recipes = write_recipes(out / "recipes", args.recipes)
    os.environ["TOKENMILL_RECIPES"] = str(out / "recipes")

    from dagster import DagsterInstance

    from tokenmill.storage.lake import Lake

    lake = Lake.from_url(str(lake_dir))
    instance = DagsterInstance.get()
    storage = "postgres" if "postgres" in (home / "dagster.yaml").read_text() else "sqlite"
    figures: dict = {
        "instance": storage,
        "crawls": args.crawls + 1,
        "files": args.crawls * args.files_per_crawl,
        "recipes": len(recipes),
    }

    crawls = [f"CC-MAIN-SIM-{i:03d}" for i in range(args.crawls)]
    started = time.perf_counter()
    for crawl in crawls:
        write_paths_file(sources, crawl, args.files_per_crawl)
    figures["paths_files_s"] = round(time.perf_counter() - started, 1)

    # The daemon runs from before the corpus is registered, as in production.
    port = 3400 + os.getpid() % 500
    url = f"http://127.0.0.1:{port}"
    server = start_dagster_dev(os.environ.copy(), port)
    try:
        measure(args, figures, url, crawls, instance, lake, lake_dir, sources, recipes, server)
    finally:
        stop(server)
    quiet_daemon(figures, port, instance)
    print_table(
        f"tokenmill at corpus scale: {figures['crawls']} crawls, {figures['files']:,} WARC "
        f"files, {args.files_per_unit} files per unit, {storage} instance",
        ["measure", "value"],
        [[name, value] for name, value in figures.items()],
    )
    print(json.dumps(figures))
    corpus = {
        "data": "a simulated corpus: Common Crawl-style paths files of WARC files that are not "
        "there, plus a real crawl of 8 small WARC files",
        "crawls": args.crawls,
        "files_per_crawl": args.files_per_crawl,
        "files_per_unit": args.files_per_unit,
        "recipes": args.recipes,
    }
    record("bench_scale", figures, corpus)


def write_recipes(folder: Path, count: int) -> list[str]:
    """The project's recipe and `count - 1` variants of it (other languages and thresholds)."""
    from tokenmill.recipes.recipe import DEFAULT_RECIPE

    folder.mkdir(parents=True, exist_ok=True)
    names = [DEFAULT_RECIPE.stem]
    (folder / DEFAULT_RECIPE.name).write_text(DEFAULT_RECIPE.read_text())
    for index in range(1, count):
        name = f"variant_{index}"
        (folder / f"{name}.yaml").write_text(
            f"clean:\n  keep_languages: [en, de]\n  min_language_score: {0.6 + index / 100}\n"
            f"  gopher_quality:\n    min_doc_words: {50 + 25 * index}\n"
        )
        names.append(name)
    return names


def measure(args, figures, url, crawls, instance, lake, lake_dir, sources, recipes, server) -> None:
    from tokenmill.data_assets.partitions import unit_partitions

    from tokenmill.cli.runner import register
    from tokenmill.crawl.sources import CrawlSource

    wait_for_tick(url, "automation_raw_crawl", 0, 1)
    registering = time.time()

    started = time.perf_counter()
    refused = 0
    for crawl in crawls:
        folder = sources / crawl
        CrawlSource(crawl, paths=str(folder / "warc.paths.gz"), base=str(folder)).save(lake)
        registration = register(instance, lake, crawl, args.files_per_unit, verify=False)
        refused += sum(len(p) for p in registration.refused.values())
    folder = real_crawl(sources, 8)
    CrawlSource(REAL_CRAWL, paths=str(folder / "warc.paths.gz"), base=str(folder)).save(lake)
    real = register(instance, lake, REAL_CRAWL, 4)
    figures["registration_s"] = round(time.perf_counter() - started, 1)
    figures["refused_paths"] = refused + sum(len(p) for p in real.refused.values())

    units = set(instance.get_dynamic_partitions(unit_partitions.name))
    figures["partitions_per_unit_asset"] = len(units)

    # A landing-sensor tick that finds a crawl of 2,000 dropped files.
    landing = lake_dir / "landing" / LANDED_CRAWL
    landing.mkdir(parents=True)
    for i in range(2_000):
        (landing / f"{LANDED_CRAWL}-{i:05d}.warc.gz").write_bytes(b"")
    landed = time.time()
    landing_tick = wait_for_tick(url, "landing_zone", landed, 1)[0]
    figures["landing_tick_s"] = landing_tick["seconds"]
    figures["landing_tick_units"] = sum(
        len(result["partitionKeys"] or [])
        for result in landing_tick["dynamicPartitionsRequestResults"]
        if result["partitionsDefName"] == unit_partitions.name
    )
    # From the files landing to the first stage's runs requested for them by its automation
    # (as backfills or runs naming the landed crawl's units).
    prefix = f"{LANDED_CRAWL}/"
    requested_at = None
    while requested_at is None and time.time() < landed + 900:
        if any(key and key.startswith(prefix) for key in requested_keys(instance)):
            requested_at = time.time()
        else:
            time.sleep(2)
    figures["landed_to_requested_s"] = round(requested_at - landed, 1) if requested_at else None
    # The daemon's own automation ticks (a sensor per stage, raw_crawl's with extracted) from
    # the registration on: the ones that saw the new units, then idle ones.
    names = automation_sensors()
    for name in names:
        wait_for_tick(url, name, landing_tick["endTimestamp"], 2)
    ticks = {name: wait_for_tick(url, name, registering, 100, at_least=False) for name in names}
    every = [t for name in names for t in ticks[name]]
    figures["automation_ticks"] = len(every)
    figures["automation_max_tick_s"] = max(t["seconds"] for t in every)
    figures["automation_requested"] = sum(t["requestedAssetMaterializationCount"] for t in every)
    idle = {name: ticks[name][-1]["seconds"] for name in names}
    figures["automation_idle_tick_max_s"] = max(idle.values())
    figures.update(idle_ticks("automation_idle", idle))
    figures.update(idle_cpu(server, IDLE_INTERVALS))
    units = set(instance.get_dynamic_partitions(unit_partitions.name))
    requested = requested_keys(instance)
    figures["requested_partitions"] = len(requested)
    figures["runs_for_units_without_data"] = sum(
        1 for key in requested if key and "/" in key and key not in units
    )
    started = time.perf_counter()
    cleaned = {"path": [recipes[0], "cleaned"]}
    page = graphql(url, PARTITION_PAGE, {"key": cleaned})["assetNodeOrError"]
    figures["partition_page_s"] = round(time.perf_counter() - started, 2)
    figures["partition_page_keys"] = len(page["partitionKeysByDimension"][0]["partitionKeys"])
    crawl_units = sorted(u for u in units if u.startswith(f"{crawls[0]}/"))
    params = {
        "partitionNames": crawl_units,
        "assetSelection": [{"path": ["raw_crawl"]}],
        "title": f"re-index {crawls[0]}",
    }
    started = time.perf_counter()
    launched = graphql(url, LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
    figures["backfill_launch_s"] = round(time.perf_counter() - started, 2)
    figures["backfill_partitions"] = len(crawl_units)
    figures["backfill_launched"] = launched["__typename"] == "LaunchBackfillSuccess"


def automation_sensors() -> list[str]:
    """The automation sensors of the stages the automation runs with these settings."""
    from tokenmill.data_assets.conditions import automation_sensors as sensors
    from tokenmill.data_assets.datasets import Catalog

    return list(sensors(Catalog.load()))


def idle_ticks(prefix: str, seconds: dict[str, float]) -> dict:
    """One idle tick per automation sensor: their sum and each, by stage."""
    return {
        f"{prefix}_ticks_sum_s": round(sum(seconds.values()), 1),
        f"{prefix}_ticks_s": {name.removeprefix("automation_"): s for name, s in seconds.items()},
    }


def quiet_daemon(figures: dict, port: int, instance) -> None:
    """The idle ticks again with the daemon otherwise quiet, as in an instance that has caught
    up: with `dagster dev` stopped (its backfill thread rewrites a backfill it holds), every
    unfinished backfill is marked canceled, so the restarted daemon submits no more of their
    runs (those submitted stay queued); then one interval of ticks and CPU."""
    from dagster._core.execution.backfill import BulkActionStatus

    done = (BulkActionStatus.CANCELED, BulkActionStatus.COMPLETED_SUCCESS)
    for backfill in instance.get_backfills():
        if backfill.status not in done:
            instance.update_backfill(backfill.with_status(BulkActionStatus.CANCELED))
    server = start_dagster_dev(os.environ.copy(), port)
    try:
        url = f"http://127.0.0.1:{port}"
        quiet = time.time() + 5
        ticks = {
            name: wait_for_tick(url, name, quiet, 2)[-1]["seconds"] for name in automation_sensors()
        }
        figures.update(idle_ticks("quiet_daemon_idle", ticks))
        figures.update({f"quiet_{k}": v for k, v in idle_cpu(server, 1).items()})
    finally:
        stop(server)


if __name__ == "__main__":
    main()
