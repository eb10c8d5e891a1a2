"""Fault injection shared by tests/test_faults.py and benchmarks/fault_table.py: stages run in
child processes that get killed, object-store outages, instance-database restarts, and
hostile WARC input.

A child is `python -c` on this module from the project directory; it prints `go` when its
imports are done and the work starts, and one JSON line when the work ended, so a parent can
kill it at a chosen moment of the work itself rather than of the interpreter start-up.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tokenmill.crawl.units import unit_files
from tokenmill.runtime.stage import Scope, Stage
from tokenmill.stages import STAGES, stage_named
from tokenmill.storage.lake import TEMP_MARKER, Lake, is_temporary
from tokenmill.storage.layout import MARKER, Unit, crawl_prefix

PROJECT_DIR = Path(__file__).resolve().parents[1]
CRAWL = "CC-MAIN-FAULTS-2026-01"
UNIT = Unit(CRAWL, "00000")
DEMO = {"files": 4, "pages_per_file": 60, "seed": 8}
FILES_PER_UNIT = 2  # two units of two files: a kill can land between a unit's files
RESUME_FIELD = "resume"


def stage_settings(stage: Stage):
    """The settings a stage's asset runs with when its run config is left alone: the
    recipe's."""
    from tokenmill.recipes.recipe import Recipe

    return Recipe.load().settings(stage.settings) if stage.settings else None


def run_stage(lake: Lake, stage: str, target: str, resume: str | None = None):
    """A stage's processing core on one target (a unit key, a crawl, or "" for the lake), as
    its asset runs it, with one worker process; `resume` as a retried step passes it."""
    from tokenmill.runtime.parts import run_stage_work

    definition = stage_named(stage)
    scope = definition.scope
    return run_stage_work(
        definition,
        lake,
        stage_settings(definition),
        unit=Unit.from_key(target) if scope is Scope.UNIT else None,
        crawl=target if scope is Scope.CRAWL else None,
        workers=1,
        resume=resume,
    )


def output_prefix(stage: str, target: str) -> str:
    scope = stage_named(stage).scope
    if scope is Scope.UNIT:
        return Unit.from_key(target).prefix(stage)
    return crawl_prefix(stage, target) if scope is Scope.CRAWL else stage


def targets(lake: Lake, crawl: str, stage: str) -> list[str]:
    from tokenmill.crawl.units import registered_units

    scope = stage_named(stage).scope
    if scope is Scope.UNIT:
        return [unit.key for unit in registered_units(lake, crawl)]
    return [crawl] if scope is Scope.CRAWL else [""]


def build_demo_lake(
    root: Path, crawl: str = CRAWL, demo: dict = DEMO
) -> tuple[Lake, dict[tuple[str, str], float]]:
    """A local lake with a registered demo crawl and every stage run once, undisturbed; also
    how long each stage's work took per target."""
    from tokenmill.cli.demo import land_demo_crawl
    from tokenmill.crawl.units import register_new_files

    lake = Lake.from_url(str(root))
    land_demo_crawl(lake, crawl, **demo)
    register_new_files(lake, crawl, FILES_PER_UNIT)
    seconds = {}
    for stage in STAGES:
        for target in targets(lake, crawl, stage.name):
            started = time.perf_counter()
            run_stage(lake, stage.name, target)
            seconds[stage.name, target] = time.perf_counter() - started
    return lake, seconds


# What a partition looks like from outside


def is_marker(key: str) -> bool:
    return key.rsplit("/", 1)[-1] == MARKER


def marker_content(data: bytes) -> dict:
    """A marker less what says which attempt wrote it (the resume token, how many parts or
    tasks a resumed run kept, and so computed itself): the same for an undisturbed run and a
    resumed one."""
    summary = json.loads(data)
    summary.pop(RESUME_FIELD, None)
    for attempts_own in ("resumed_parts", "tasks_computed", "tasks_found"):
        summary.get("counts", {}).pop(attempts_own, None)
    return summary


def digest(key: str, data: bytes) -> str:
    """sha256 of an object (of a marker, of its content)."""
    if is_marker(key):
        data = json.dumps(marker_content(data), sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def snapshot(lake: Lake, prefix: str) -> dict[str, str]:
    """sha256 of every committed object under a prefix (of a marker, of its content)."""
    return {key: digest(key, lake.read_bytes(key)) for key in lake.list(prefix)}


def tree_snapshot(root: Path, top: Collection[str]) -> dict[str, str]:
    """The same of every file below the folders and files `top` of `root` (a project folder:
    its lake, its settings file...), writers' temporaries left out as listings leave them."""
    paths = [path for name in top for path in [root / name, *(root / name).rglob("*")]]
    return {
        path.relative_to(root).as_posix(): digest(path.name, path.read_bytes())
        for path in sorted(paths)
        if path.is_file() and not is_temporary(path.name)
    }


def differing(expected: dict[str, str], found: dict[str, str]) -> list[str]:
    """The keys of two snapshots whose objects differ, are missing or are extra."""
    return sorted(
        key for key in expected.keys() | found.keys() if expected.get(key) != found.get(key)
    )


def commit_problems(lake: Lake, prefix: str) -> list[str]:
    """What is wrong with a partition as readers see it: every marker (the unit's, each
    part's) must describe exactly the objects below it (names, sizes, sha256), and no
    temporary object may ever be listed. A part or unit without a marker is not committed:
    readers refuse it (MissingInputError)."""
    keys = lake.list(prefix)
    problems = [f"temporary object listed: {k}" for k in keys if TEMP_MARKER in k]
    for marker in [k for k in keys if is_marker(k)]:
        base = marker[: -len(MARKER) - 1]
        outputs = lake.read_json(marker)["outputs"]
        # Markers and bookkeeping (`_reported.json`) are not outputs.
        present = {
            k[len(base) + 1 :]
            for k in keys
            if k.startswith(base + "/") and not k.rsplit("/", 1)[-1].startswith("_")
        }
        if present != set(outputs):
            problems.append(f"{marker} lists {sorted(outputs)}, lake holds {sorted(present)}")
        for name in present & set(outputs):
            data = lake.read_bytes(f"{base}/{name}")
            if len(data) != outputs[name]["bytes"]:
                problems.append(f"{name}: {len(data)} bytes, {marker} says {outputs[name]}")
            elif hashlib.sha256(data).hexdigest() != outputs[name]["sha256"]:
                problems.append(f"{name}: content differs from the sha256 of {marker}")
    return problems


def parts_committed(lake: Lake, unit: Unit, stage: str, resume: str) -> list[int]:
    """The unit's parts committed by the attempt with this resume token."""
    done = []
    for key in lake.list(unit.prefix(stage)):
        part = key[len(unit.prefix(stage)) + 1 :].split("/")[0]
        if not key.endswith(f"/{part}/{MARKER}"):
            continue
        try:
            marker = lake.read_json(key)
        except FileNotFoundError:  # the running stage removed it since the listing: redoing it
            continue
        if marker.get(RESUME_FIELD) == resume:
            done.append(int(part))
    return sorted(done)


def rows_lost_and_duplicated(reference: Lake, lake: Lake, prefix: str) -> tuple[int, int]:
    """Rows (documents, records, clusters...) of the reference partition's Parquet outputs that
    are missing from `lake`, and rows that appear more often than in the reference."""
    import polars as pl

    lost = duplicated = 0
    for key in reference.list(prefix):
        if not key.endswith(".parquet"):
            continue
        expected = Counter(pl.read_parquet(reference.read_bytes(key)).hash_rows().to_list())
        got = (
            Counter(pl.read_parquet(lake.read_bytes(key)).hash_rows().to_list())
            if lake.exists(key)
            else Counter()
        )
        lost += sum((expected - got).values())
        duplicated += sum((got - expected).values())
    return lost, duplicated


def stray_temp_files(root: Path) -> list[Path]:
    """Temporary files a killed writer left on disk (never listed, but they take space)."""
    return sorted(p for p in root.rglob(f"{TEMP_MARKER}*") if p.is_file())


# Child processes


CHILD = "import sys, testkit.faults as f; f.child_main(sys.argv[1:])"
ROOT_RUN_TAG, PARENT_RUN_TAG = "dagster/root_run_id", "dagster/parent_run_id"


def child_command(*args: str) -> list[str]:
    return [sys.executable, "-c", CHILD, *args]


def child_main(args: list[str]) -> None:
    """`stage <lake_url> <stage> <target> <resume>` runs a stage's core; `jobs <partition>
    <job>[@<root run id>],...` runs Dagster jobs one after the other with execute_in_process,
    on the instance and lake the environment names, one worker process per run; a job given a
    root run id runs as a retry of that run (what the daemon's run retries launch)."""
    kind, *rest = args
    if kind == "stage":
        url, stage, target, resume = rest
        lake = Lake.from_url(url, endpoint_url=os.environ.get("TOKENMILL_S3_ENDPOINT"))
        print("go", flush=True)
        started = time.perf_counter()
        report = run_stage(lake, stage, target, resume or None)
        outcome = {
            "success": True,
            "seconds": time.perf_counter() - started,
            "resumed_parts": report.counts.get("resumed_parts"),
        }
        print(json.dumps(outcome), flush=True)
    elif kind == "jobs":
        from dagster import DagsterInstance
        from tokenmill.resources.workers import WorkersResource

        from tokenmill.cli.runner import QUIET_CONSOLE
        from tokenmill.definitions import build_definitions, lake_resource

        partition, jobs = rest
        defs = build_definitions(lake_resource(), workers=WorkersResource(processes=1))
        outcome = {"success": True, "run_ids": [], "retries": 0}
        with DagsterInstance.get() as instance:
            print("go", flush=True)
            started = time.perf_counter()
            for item in jobs.split(","):
                name, _, root = item.partition("@")
                result = defs.resolve_job_def(name).execute_in_process(
                    run_config=QUIET_CONSOLE,
                    instance=instance,
                    partition_key=partition or None,
                    raise_on_error=False,
                    tags={ROOT_RUN_TAG: root, PARENT_RUN_TAG: root} if root else None,
                )
                outcome["run_ids"].append(result.run_id)
                outcome["retries"] += sum(e.is_step_up_for_retry for e in result.all_events)
                if not result.success:
                    outcome["success"] = False
                    break
            outcome["run_id"] = outcome["run_ids"][-1]
            outcome["seconds"] = time.perf_counter() - started
        print(json.dumps(outcome), flush=True)
    else:
        raise SystemExit(f"unknown child kind {kind!r}")


@dataclass
class Child:
    process: subprocess.Popen
    # A file, not a pipe: Dagster logs plenty, and stdout is read line by line meanwhile.
    stderr: IO[str]

    @classmethod
    def start(cls, *args: str, env: dict[str, str] | None = None) -> Child:
        stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 - lives as long as the child
        process = subprocess.Popen(
            child_command(*args),
            cwd=PROJECT_DIR,
            env=os.environ | (env or {}),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
        return cls(process, stderr)

    def error_output(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-3000:]

    def wait_for_go(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            if line.strip() == "go":
                return
        self.kill()
        raise RuntimeError(f"child never started its work: {self.error_output()}")

    def kill(self) -> bool:
        """SIGKILL to the child's process group (it and any worker process), as a node dies:
        no handler, no cleanup, no flush. True if the work had not finished (no result line
        printed) when the signal landed."""
        kill_group(self.process)
        return not any(line.startswith("{") for line in self.process.stdout.read().splitlines())

    def outcome(self, timeout: float = 600) -> dict:
        # Not communicate(timeout=...): it reads the pipe's file descriptor and would miss
        # what wait_for_go's readline already buffered. The child prints two short lines.
        self.process.wait(timeout)
        out = self.process.stdout.read()
        results = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if self.process.returncode != 0 or not results:
            raise RuntimeError(f"child exited {self.process.returncode}: {self.error_output()}")
        return results[-1]


def kill_group(process: subprocess.Popen) -> bool:
    """SIGKILL to the process group of a process started with `start_new_session=True` (it and
    every process it started): no handler, no cleanup, no flush. True if it was still running
    when the signal landed."""
    if process.returncode is None:  # not reaped yet: its pid is still its group's id
        with suppress(ProcessLookupError):  # the group is gone: it exited, nothing left
            os.killpg(process.pid, signal.SIGKILL)
    return process.wait() == -signal.SIGKILL


def wait_or_kill(process: subprocess.Popen, timeout: float) -> int | None:
    """A process's exit status; None when it did not exit within `timeout` s (its group is
    killed then, so that nothing waits for ever)."""
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        return None


def wait_for(condition: Callable[[], bool], timeout: float, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout} s")
        time.sleep(interval)


def run_child(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> dict:
    child = Child.start(*args, env=env)
    child.wait_for_go()
    return child.outcome(timeout)


# Crash trials


@dataclass
class CrashTrial:
    stage: str
    target: str
    delay: float
    killed_while_running: bool
    problems_after_kill: list[str]
    identical_after_rerun: bool
    rows_lost: int
    rows_duplicated: int
    stray_temps: int
    parts_committed_at_kill: int | None = None  # per-unit stages: by the killed attempt
    parts_resumed: int | None = None  # ... and kept by the re-run of the same attempt


def crash_trial(
    reference: Lake,
    root: Path,
    stage: str,
    target: str,
    seconds: float,
    rng: random.Random,
    fresh: bool,
) -> CrashTrial:
    """Kill a stage's run midway, check what readers see, re-run it as a retry of the same
    attempt (same resume token), compare with the undisturbed reference. A per-unit stage is
    killed at a random point after its first file was committed, so the re-run must resume at
    file granularity; another stage at a random point of its work (`seconds` long undisturbed).
    `fresh`: the partition had no outputs yet (else it is a re-run over committed outputs)."""
    lake = Lake.from_url(str(root))
    prefix = output_prefix(stage, target)
    if fresh:
        lake.delete_prefix(prefix)
    resume = uuid.uuid4().hex
    per_unit = stage_named(stage).scope is Scope.UNIT
    child = Child.start("stage", str(root), stage, target, resume)
    child.wait_for_go()
    if per_unit:
        unit = Unit.from_key(target)
        files = len(unit_files(lake, unit))
        wait_for(lambda: parts_committed(lake, unit, stage, resume), timeout=300)
        delay = rng.uniform(0, seconds / files)
    else:
        delay = rng.uniform(0, seconds)
    time.sleep(delay)
    killed_while_running = child.kill()
    problems = commit_problems(lake, prefix)
    committed = len(parts_committed(lake, unit, stage, resume)) if per_unit else None
    report = run_stage(lake, stage, target, resume)
    lost, duplicated = rows_lost_and_duplicated(reference, lake, prefix)
    return CrashTrial(
        stage,
        target,
        delay,
        killed_while_running,
        problems + commit_problems(lake, prefix),
        snapshot(lake, prefix) == snapshot(reference, prefix),
        lost,
        duplicated,
        len(stray_temp_files(root / prefix)),
        committed,
        report.counts.get("resumed_parts") if per_unit else None,
    )


def copy_lake(reference_root: Path, root: Path) -> Path:
    shutil.copytree(reference_root, root)
    return root


# Hostile WARC input


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, int]:
    """Random damage: bit flips, overwritten runs, cut or inserted bytes; also returns the
    first damaged position (everything before it is intact)."""
    data = bytearray(data)
    first = len(data)
    for _ in range(rng.randint(1, 6)):
        position = rng.randrange(len(data))
        first = min(first, position)
        damage = rng.choice(("flip", "flip", "run", "cut", "insert"))
        if damage == "flip":
            data[position] ^= 1 << rng.randrange(8)
        elif damage == "run":
            data[position : position + 16] = bytes(rng.randrange(256) for _ in range(16))
        elif damage == "cut":
            del data[position : position + rng.randint(1, 4096)]
        else:
            data[position:position] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    if rng.random() < 0.2:
        position = rng.randrange(len(data))
        first = min(first, position)
        del data[position:]
    return bytes(data), first


@dataclass
class FuzzResult:
    files: int = 0
    unusable: int = 0
    crashes: list[str] = field(default_factory=list)
    good_records_lost: int = 0
    bad_records: int = 0


def fuzz_reader(samples: list[bytes], mutations: int, seed: int) -> FuzzResult:
    """Read `mutations` damaged copies of the samples: the reader may only ever raise
    UnusableInputError, and every record that ends before the first damaged byte must come
    out exactly as in the undamaged file."""
    from tokenmill.crawl.warc import BadRecord, UnusableInputError, WarcRecord, iter_records

    rng = random.Random(seed)
    intact = [list(iter_records(io.BytesIO(sample))) for sample in samples]
    result = FuzzResult()
    for trial in range(mutations):
        index = trial % len(samples)
        damaged, first = mutate(samples[index], rng)
        result.files += 1
        try:
            records = list(iter_records(io.BytesIO(damaged), name=f"mutant-{trial}"))
        except UnusableInputError:
            result.unusable += 1
            continue
        except Exception as error:  # noqa: BLE001 - any other exception is the finding
            result.crashes.append(f"mutant {trial}: {type(error).__name__}: {error}")
            continue
        result.bad_records += sum(isinstance(r, BadRecord) for r in records)
        survived = {(r.offset, r.record_id, r.block) for r in records if isinstance(r, WarcRecord)}
        before_damage = [
            r for r in intact[index] if isinstance(r, WarcRecord) and r.offset + r.length <= first
        ]
        result.good_records_lost += sum(
            (r.offset, r.record_id, r.block) not in survived for r in before_damage
        )
    return result


# Hostile input, whole files


def page(title: str, text: str) -> str:
    return f"<html><head><title>{title}</title></head><body><article><p>{text}</p></article>"


def hostile_warc() -> bytes:
    """Records a crawler really meets: charsets declared, undeclared and wrong, binary bodies
    sent as text/html, a header line that is not UTF-8, and damage in the middle."""
    out = io.BytesIO()
    from tokenmill.demo.warc_writer import WarcWriter, encode_record, gzip_member

    writer = WarcWriter(out, id_seed="hostile")
    prose = "The committee met on Tuesday to review the budget for the new library. " * 20
    russian = "Комитет собрался во вторник, чтобы обсудить бюджет новой библиотеки. " * 20
    cases = [
        ("utf8", page("ok", prose).encode(), "text/html; charset=utf-8"),
        ("cp1251", page("ru", russian).encode("cp1251"), "text/html; charset=windows-1251"),
        ("mislabeled", page("ru", russian).encode("cp1251"), "text/html; charset=utf-8"),
        ("undeclared", page("fr", "Le comité s'est réuni. " * 40).encode("latin-1"), "text/html"),
        ("binary", random.Random(1).randbytes(20_000), "text/html"),
        ("png", b"\x89PNG\r\n\x1a\n" + b"\x00IHDR" * 3000, "text/html; charset=utf-8"),
    ]
    for index, (name, body, content_type) in enumerate(cases):
        writer.write_response(
            f"http://hostile.example/{name}",
            body,
            content_type=content_type,
            date="2026-01-01T00:00:00Z",
            record_id=f"<urn:uuid:00000000-0000-0000-0000-{index:012d}>",
        )
    writer.write_raw(gzip_member(b"\xff\xfe garbage that is not a WARC record")[:40])
    bad_header = encode_record("response", {"WARC-Target-URI": "http://hostile.example/!"}, b"hi")
    writer.write_raw(gzip_member(bad_header.replace(b"/!", b"/\xff\xfe")))
    return out.getvalue()


def nested_divs_warc(depth: int) -> bytes:
    """A good page, a page of `depth` nested <div>s (extraction is quadratic in the depth, in C
    code that holds the GIL), and another good page."""
    from tokenmill.demo.warc_writer import WarcWriter

    out = io.BytesIO()
    writer = WarcWriter(out, id_seed=f"nested-{depth}")
    prose = "The committee met on Tuesday to review the budget for the new library. " * 20
    nested = "<div>" * depth + prose + "</div>" * depth
    for index, (name, html) in enumerate(
        [
            ("before", page("ok", prose)),
            ("nested", page("deep", nested)),
            ("after", page("ok", prose)),
        ]
    ):
        writer.write_response(
            f"http://nested.example/{name}",
            html.encode(),
            content_type="text/html; charset=utf-8",
            date="2026-01-01T00:00:00Z",
            record_id=f"<urn:uuid:00000000-0000-0000-0001-{index:012d}>",
        )
    return out.getvalue()


# Peak RSS from VmHWM: ru_maxrss would carry the parent's peak over fork and exec.
BIG_RECORD_CHILD = """
import json, re, sys
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import Unit
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import raw_crawl
def peak_kib():
    return int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
lake = Lake.from_url(sys.argv[1])
before = peak_kib()
report = run_stage_work(raw_crawl.STAGE, lake, unit=Unit(sys.argv[2], "00000"), workers=1)
growth = peak_kib() - before
outcome = {"growth_mb": growth / 1024, "dropped": report.dropped, "out": report.records_out}
print(json.dumps(outcome))
"""


def _warc_record(n: int, body: bytes) -> bytes:
    block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body
    head = (
        f"WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{n:08d}>\r\n"
        f"WARC-Target-URI: http://big.example/{n}\r\nContent-Length: {len(block)}\r\n\r\n"
    ).encode()
    return head + block + b"\r\n\r\n"


def big_record_trial(lake_root: Path, size: int, compressed: bool) -> dict:
    """Index a WARC file holding one `size`-byte record between two small ones, declared with
    `copy` so that raw_crawl also copies it into the lake in the same pass, in a child process:
    how much its peak RSS grew, what was kept aside, and whether the copy is exact."""

    crawl = "CC-MAIN-BIG"
    name = "big.warc.gz" if compressed else "big.warc"
    source = lake_root.with_name(f"{lake_root.name}-source")
    try:
        return _big_record_trial(lake_root, source, crawl, name, size, compressed)
    finally:
        shutil.rmtree(source, ignore_errors=True)


def _big_record_trial(lake_root, source, crawl, name, size, compressed) -> dict:
    import zlib

    from tokenmill.crawl.sources import CrawlSource
    from tokenmill.crawl.units import register_new_files

    path = source / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for n, body in enumerate([b"<p>small</p>", b"<p>" + b"a long page " * (size // 12), b""]):
            part = _warc_record(n, body or b"<p>small too</p>")
            f.write(zlib.compress(part, 1, wbits=31) if compressed else part)
    lake = Lake.from_url(str(lake_root))
    CrawlSource(crawl, prefix=str(source), copy=True).save(lake)
    register_new_files(lake, crawl, files_per_unit=1)
    child = subprocess.run(
        [sys.executable, "-c", BIG_RECORD_CHILD, str(lake_root), crawl],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if child.returncode != 0:
        raise RuntimeError(child.stderr[-3000:])
    outcome = json.loads(child.stdout.splitlines()[-1])
    (copy,) = [p for p in (lake_root / "raw_crawl" / crawl).rglob(name)]
    outcome["copied_identically"] = _file_sha256(copy) == _file_sha256(path)
    return outcome


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# Server faults


def s3_outage(server, seconds: float, freeze: bool = False) -> float:
    """Take the SeaweedFS server of `testkit.servers.start_seaweedfs` away for `seconds`: frozen
    (SIGSTOP: connections hang) or killed (SIGKILL: connections refused) and restarted on the
    same ports and data directory. Returns how long it was unavailable."""
    from testkit.servers import wait_for_port

    started = time.monotonic()
    group = server.process.pid
    if freeze:
        os.killpg(group, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.killpg(group, signal.SIGCONT)
        return time.monotonic() - started
    os.killpg(group, signal.SIGKILL)
    server.process.wait()
    time.sleep(seconds)
    command = list(server.process.args)
    log = Path(next(a for a in command if a.startswith("-logdir=")).split("=", 1)[1])
    with open(log / "restarted.log", "ab") as out:
        server.process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    port = int(server.endpoint.rsplit(":", 1)[1])
    wait_for_port(port, 60, server.process, log / "restarted.log")
    return time.monotonic() - started


def postgres_cluster() -> list[str]:
    versions = sorted(os.listdir("/etc/postgresql"))
    return [versions[-1], "main"]


def restart_postgres() -> float:
    """Restart the PostgreSQL server (all connections drop); returns the seconds it took."""
    started = time.monotonic()
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", *postgres_cluster(), "restart"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return time.monotonic() - started


def ensure_postgres_running(timeout: float = 60) -> None:
    """Whatever a test did to the server, leave it accepting connections."""
    from testkit.servers import postgres_available

    if not postgres_available():
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", *postgres_cluster(), "start"],
            capture_output=True,
            timeout=120,
        )
    deadline = time.monotonic() + timeout
    while not postgres_available():
        if time.monotonic() > deadline:
            raise RuntimeError("PostgreSQL did not come back")
        time.sleep(0.2)


def dagster_env(home: Path, lake_url: str, **extra: str) -> dict[str, str]:
    """Environment of a Dagster child: its instance (DAGSTER_HOME) and lake."""
    return {"DAGSTER_HOME": str(home), "TOKENMILL_LAKE_URL": lake_url, **extra}


def local_home(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        shutil.copy(PROJECT_DIR / "dagster.yaml", home / "dagster.yaml")
    return home


def postgres_home(home: Path, database: str) -> tuple[Path, dict[str, str]]:
    """A DAGSTER_HOME with the production instance (helm/dagster-instance.yaml) on `database`."""
    from testkit.servers import PG_HOST, PG_PORT, PG_USER, write_production_instance

    write_production_instance(home)
    env = {
        "DAGSTER_PG_HOST": PG_HOST,
        "DAGSTER_PG_PORT": str(PG_PORT),
        "DAGSTER_PG_USERNAME": PG_USER,
        "DAGSTER_PG_PASSWORD": "unused-with-trust-auth",
        "DAGSTER_PG_DB": database,
    }
    return home, env


def add_partitions(env: dict[str, str], lake: Lake) -> None:
    """Register the lake's crawls and units as dynamic partitions of the child's instance."""
    from dagster import DagsterInstance
    from tokenmill.data_assets.partitions import sync_partitions

    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        with DagsterInstance.get() as instance:
            sync_partitions(instance, lake)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def seed_lake(reference: Lake, lake: Lake, crawl: str = CRAWL) -> None:
    """Copy a crawl's landing files and manifests (no outputs) from the reference lake."""
    for key in reference.list(f"landing/{crawl}") + reference.list(f"manifests/{crawl}"):
        lake.write_bytes(key, reference.read_bytes(key))


# The per-unit stages before the crawl-wide clustering, one run each.
INGEST_STAGES = ("raw_crawl", "extracted", "cleaned", "dedup_signatures")
INGEST_JOBS = ",".join(f"run_{stage}" for stage in INGEST_STAGES)


def start_ingest_run(reference: Lake, lake: Lake, env: dict[str, str]) -> Child:
    """Seed `lake` from the reference lake, register its partitions on the child's instance and
    start the ingest runs of UNIT (raw_crawl to dedup_signatures) in a child process;
    returns once it executes."""
    seed_lake(reference, lake)
    add_partitions(env, lake)
    child = Child.start("jobs", UNIT.key, INGEST_JOBS, env=env)
    child.wait_for_go()
    return child


def ingest_outputs_match(reference: Lake, lake: Lake, unit: Unit = UNIT) -> bool:
    """The ingest runs' outputs (raw_crawl to dedup_signatures of a unit) are identical
    to the reference's, and committed consistently."""
    return all(
        snapshot(lake, unit.prefix(stage)) == snapshot(reference, unit.prefix(stage))
        and not commit_problems(lake, unit.prefix(stage))
        for stage in INGEST_STAGES
    )
