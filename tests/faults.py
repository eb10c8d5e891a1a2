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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tokenmill.lake import TEMP_MARKER, Lake
from tokenmill.outputs import MARKER
from tokenmill.shards import Shard, crawl_prefix

PROJECT_DIR = Path(__file__).resolve().parents[1]
CRAWL = "CC-MAIN-FAULTS-2026-01"
SHARD = f"{CRAWL}/00000"
PARTITION = f"{CRAWL}|00000"
DEMO = {"files": 4, "pages_per_file": 60, "seed": 8}

# (stage, zone, what it is partitioned by), in dependency order.
STAGES = [
    ("raw_crawl", "raw", "shard"),
    ("cleaned", "cleaned", "shard"),
    ("dedup_signatures", "signatures", "shard"),
    ("dedup_clusters", "clusters", "crawl"),
    ("deduplicated", "deduplicated", "shard"),
    ("tokenizer", "tokenizer", "none"),
    ("tokenized_shards", "tokenized", "shard"),
]


def stage_work(stage: str) -> Callable[[Lake, str], object]:
    """The processing core of a stage with the defaults its asset runs with; the target is a
    shard (`crawl/shard`), a crawl, or "" for the tokenizer."""
    from data_assets.config import CleanConfig, DedupConfig, TokenizeConfig, TokenizerConfig
    from tokenmill import clean, dedup, ingest, tokenize

    def shard(target: str) -> Shard:
        return Shard(*target.split("/"))

    tokenizer = TokenizerConfig()
    work = {
        "raw_crawl": lambda lake, t: ingest.land_shard(lake, shard(t)),
        "cleaned": lambda lake, t: clean.clean_shard(lake, shard(t), CleanConfig().settings()),
        "dedup_signatures": lambda lake, t: dedup.compute_signatures(
            lake, shard(t), DedupConfig().settings()
        ),
        "dedup_clusters": lambda lake, t: dedup.compute_clusters(lake, t, DedupConfig().settings()),
        "deduplicated": lambda lake, t: dedup.filter_shard(lake, shard(t)),
        "tokenizer": lambda lake, t: tokenize.build_tokenizer(
            lake, tokenizer.path, tokenizer.vocab_size, tokenizer.sample_mb << 20
        ),
        "tokenized_shards": lambda lake, t: tokenize.tokenize_shard(
            lake, shard(t), TokenizeConfig().append_eod
        ),
    }
    return work[stage]


def output_prefix(stage: str, target: str) -> str:
    zone, per = next((z, p) for s, z, p in STAGES if s == stage)
    if per == "shard":
        return Shard(*target.split("/")).prefix(zone)
    return crawl_prefix(zone, target) if per == "crawl" else zone


def targets(lake: Lake, crawl: str, stage: str) -> list[str]:
    from tokenmill.shards import registered_shards

    per = next(p for s, _, p in STAGES if s == stage)
    if per == "shard":
        return [str(s) for s in registered_shards(lake, crawl)]
    return [crawl] if per == "crawl" else [""]


def build_demo_lake(
    root: Path, crawl: str = CRAWL, demo: dict = DEMO
) -> tuple[Lake, dict[tuple[str, str], float]]:
    """A local lake with a registered demo crawl and every stage run once, undisturbed; also
    how long each stage's work took per target."""
    from tokenmill.cli import land_demo_crawl
    from tokenmill.shards import register_new_files

    lake = Lake.from_url(str(root))
    land_demo_crawl(lake, crawl, **demo)
    register_new_files(lake, crawl, files_per_shard=2)
    seconds = {}
    for stage, _, _ in STAGES:
        for target in targets(lake, crawl, stage):
            started = time.perf_counter()
            stage_work(stage)(lake, target)
            seconds[stage, target] = time.perf_counter() - started
    return lake, seconds


# What a partition looks like from outside


def snapshot(lake: Lake, prefix: str) -> dict[str, str]:
    """sha256 of every committed object under a prefix."""
    return {key: hashlib.sha256(lake.read_bytes(key)).hexdigest() for key in lake.list(prefix)}


def commit_problems(lake: Lake, prefix: str) -> list[str]:
    """What is wrong with a partition as readers see it: a marker must describe exactly the
    objects present (names, sizes, sha256), and no temporary object may ever be listed."""
    keys = lake.list(prefix)
    problems = [f"temporary object listed: {k}" for k in keys if TEMP_MARKER in k]
    marker = f"{prefix}/{MARKER}"
    if marker not in keys:
        return problems  # not committed: readers refuse it (MissingInputError)
    outputs = lake.read_json(marker)["outputs"]
    present = {key[len(prefix) + 1 :] for key in keys} - {MARKER}
    if present != set(outputs):
        problems.append(f"marker lists {sorted(outputs)}, lake holds {sorted(present)}")
    for name in present & set(outputs):
        data = lake.read_bytes(f"{prefix}/{name}")
        if len(data) != outputs[name]["bytes"]:
            problems.append(f"{name}: {len(data)} bytes, marker says {outputs[name]['bytes']}")
        elif hashlib.sha256(data).hexdigest() != outputs[name]["sha256"]:
            problems.append(f"{name}: content differs from the marker's sha256")
    return problems


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


CHILD = "import sys, tests.faults as f; f.child_main(sys.argv[1:])"


def child_command(*args: str) -> list[str]:
    return [sys.executable, "-c", CHILD, *args]


def child_main(args: list[str]) -> None:
    """`stage <lake_url> <stage> <target>` runs a stage's core; `job <job> <partition>` runs a
    Dagster job with execute_in_process on the instance and lake the environment names."""
    kind, *rest = args
    if kind == "stage":
        url, stage, target = rest
        lake = Lake.from_url(url, endpoint_url=os.environ.get("TOKENMILL_S3_ENDPOINT"))
        work = stage_work(stage)
        print("go", flush=True)
        started = time.perf_counter()
        work(lake, target)
        print(json.dumps({"success": True, "seconds": time.perf_counter() - started}), flush=True)
    elif kind == "job":
        from dagster import DagsterInstance

        from data_assets.definitions import defs
        from data_assets.runner import QUIET_CONSOLE

        job_name, partition = rest
        job = defs.resolve_job_def(job_name)
        with DagsterInstance.get() as instance:
            print("go", flush=True)
            started = time.perf_counter()
            result = job.execute_in_process(
                run_config=QUIET_CONSOLE,
                instance=instance,
                partition_key=partition or None,
                raise_on_error=False,
            )
            retries = sum(event.is_step_up_for_retry for event in result.all_events)
            outcome = {
                "success": result.success,
                "run_id": result.run_id,
                "retries": retries,
                "seconds": time.perf_counter() - started,
            }
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
        """SIGKILL, as a node dies: no handler, no cleanup, no flush. True if the work had not
        finished (no result line printed) when the signal landed."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()
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


def crash_trial(
    reference: Lake, root: Path, stage: str, target: str, delay: float, fresh: bool
) -> CrashTrial:
    """Kill a stage `delay` s into its work, check what readers see, re-run it, compare with the
    undisturbed reference. `fresh`: the partition had no outputs yet (else it is a re-run)."""
    lake = Lake.from_url(str(root))
    prefix = output_prefix(stage, target)
    if fresh:
        lake.delete_prefix(prefix)
    child = Child.start("stage", str(root), stage, target)
    child.wait_for_go()
    time.sleep(delay)
    killed_while_running = child.kill()
    problems = commit_problems(lake, prefix)
    stage_work(stage)(lake, target)
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
    )


def stage_seconds(root: Path, stage: str, target: str) -> float:
    """How long the stage's work takes in a child, undisturbed (re-running it is harmless)."""
    return run_child("stage", str(root), stage, target)["seconds"]


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
    from tokenmill.warc import BadRecord, UnusableInputError, WarcRecord, iter_records

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
    from demo.warc_writer import WarcWriter, encode_record, gzip_member

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


# Peak RSS from VmHWM: ru_maxrss would carry the parent's peak over fork and exec.
BIG_RECORD_CHILD = """
import json, re, sys
from tokenmill.ingest import land_shard
from tokenmill.lake import Lake
from tokenmill.shards import Shard
def peak_kib():
    return int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
lake = Lake.from_url(sys.argv[1])
before = peak_kib()
report = land_shard(lake, Shard(sys.argv[2], "00000"))
growth = peak_kib() - before
outcome = {"growth_mb": growth / 1024, "dropped": report.dropped, "out": report.records_out}
print(json.dumps(outcome))
"""


def big_record_trial(lake_root: Path, size: int, compressed: bool) -> dict:
    """Land a WARC file holding one `size`-byte record between two small ones, in a child
    process: how much its peak RSS grew while landing it, and what was kept aside."""
    import zlib

    from tokenmill.shards import register_new_files

    def record(n: int, body: bytes) -> bytes:
        block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body
        head = (
            f"WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{n:08d}>\r\n"
            f"WARC-Target-URI: http://big.example/{n}\r\nContent-Length: {len(block)}\r\n\r\n"
        ).encode()
        return head + block + b"\r\n\r\n"

    crawl = "CC-MAIN-BIG"
    name = "big.warc.gz" if compressed else "big.warc"
    path = lake_root / "landing" / crawl / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for n, body in enumerate([b"<p>small</p>", b"<p>" + b"a long page " * (size // 12), b""]):
            part = record(n, body or b"<p>small too</p>")
            f.write(zlib.compress(part, 1, wbits=31) if compressed else part)
    register_new_files(Lake.from_url(str(lake_root)), crawl, files_per_shard=1)
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
    copy = lake_root / "raw" / crawl / "00000" / name
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
    """Take the SeaweedFS server of `tests.servers.start_seaweedfs` away for `seconds`: frozen
    (SIGSTOP: connections hang) or killed (SIGKILL: connections refused) and restarted on the
    same ports and data directory. Returns how long it was unavailable."""
    from tests.servers import wait_for_port

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
    from tests.servers import postgres_available

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
    from tests.servers import PG_HOST, PG_PORT, PG_USER

    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_DIR / "helm" / "dagster-instance.yaml", home / "dagster.yaml")
    env = {
        "DAGSTER_PG_HOST": PG_HOST,
        "DAGSTER_PG_PORT": str(PG_PORT),
        "DAGSTER_PG_USERNAME": PG_USER,
        "DAGSTER_PG_PASSWORD": "unused-with-trust-auth",
        "DAGSTER_PG_DB": database,
    }
    return home, env


def add_partitions(env: dict[str, str], lake: Lake) -> None:
    """Register the lake's crawls and shards as dynamic partitions of the child's instance."""
    from dagster import DagsterInstance

    from data_assets.partitions import sync_partitions

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


def start_ingest_run(reference: Lake, lake: Lake, env: dict[str, str]) -> Child:
    """Seed `lake` from the reference lake, register its partitions on the child's instance and
    start the ingest_shard run of PARTITION in a child process; returns once it executes."""
    seed_lake(reference, lake)
    add_partitions(env, lake)
    child = Child.start("job", "ingest_shard", PARTITION, env=env)
    child.wait_for_go()
    return child


INGEST_PREFIXES = ("raw", "cleaned", "signatures")


def ingest_outputs_match(reference: Lake, lake: Lake, shard: str) -> bool:
    """The ingest_shard job's outputs (raw, cleaned, signatures of a shard) are byte-identical."""
    return all(
        snapshot(lake, f"{zone}/{shard}") == snapshot(reference, f"{zone}/{shard}")
        and not commit_problems(lake, f"{zone}/{shard}")
        for zone in INGEST_PREFIXES
    )
