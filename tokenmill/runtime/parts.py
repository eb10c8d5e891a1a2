"""Running a stage: a unit's files as parts, in parallel worker processes, resumable per file.

A per-unit stage's `run` handles one file of the unit and commits it as a part
(`<stage>/<crawl>/<unit>/<part>/`, with its own marker). The unit counts as done only when its
own marker, listing every part, is written last; a re-run first removes that marker. Parts run
in worker processes, one file each at a time, as many as the CPUs this process may use. A part
committed by the same attempt (`resume` token: a retried step or a resumed run) is kept, so a
run killed midway resumes at file granularity; any other part is recomputed.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import multiprocessing
import os
import resource
import signal
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenmill.crawl.units import unit_files
from tokenmill.runtime.budget import (
    NOTES,
    RecordWatch,
    cpu_time,
    enable_watchdog,
    police,
    take_notes,
)
from tokenmill.runtime.stage import Scope, Stage, Work, digest
from tokenmill.runtime.worker_errors import WorkerDiedError, exit_description, portable
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, Unit, part_name
from tokenmill.storage.outputs import StageReport, combine

RESUME_FIELD = "resume"


def fed_stamp(resume: str, settings: Any) -> str:
    """The resume stamp of a part made by the run ``resume`` with ``settings``, in the pass of
    the stage that feeds the part's stage (`Stage.feeds`): the part's own stage keeps it in
    that run only if it has the same settings."""
    if dataclasses.is_dataclass(settings):
        settings = dataclasses.asdict(settings)
    return f"{resume}#fed:{digest(settings if isinstance(settings, dict) else repr(settings))}"


def available_cpus() -> int:
    """CPUs this process may use: its affinity, capped by a cgroup v2 CPU quota (a pod's
    limit)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cpus)


def run_stage_work(
    stage: Stage,
    lake: Lake,
    settings: Any = None,
    *,
    unit: Unit | None = None,
    crawl: str | None = None,
    workers: int | None = None,
    resume: str | None = None,
    memory_limit: int | None = None,
    on_part: Callable[[int, int], None] | None = None,
    fed_settings: Any = None,
) -> StageReport:
    """Run `stage` for one partition: a unit (its files in parallel), a crawl, or the lake.
    With ``fed_settings`` (a unit stage that feeds another: `Stage.feeds`), that stage's parts
    are made in the same pass over each file, with those settings and the same ``resume``
    stamp: its own run with that stamp keeps them."""
    if stage.scope is Scope.UNIT:
        if unit is None:
            raise ValueError(f"{stage.name} runs per unit")
        return run_unit(
            stage, lake, unit, settings, workers, resume, memory_limit, on_part, fed_settings
        )
    work = Work(lake, stage.name, settings, crawl=crawl)
    started = cpu_time()
    report = stage.run(work)
    report.cpu_s = cpu_time() - started
    return report


def run_unit(
    stage: Stage,
    lake: Lake,
    unit: Unit,
    settings: Any = None,
    workers: int | None = None,
    resume: str | None = None,
    memory_limit: int | None = None,
    on_part: Callable[[int, int], None] | None = None,
    fed_settings: Any = None,
) -> StageReport:
    # this process only: the parts' workers outlive the run and report their own CPU
    started = time.process_time()
    files = unit_files(lake, unit)
    prefix = unit.prefix(stage.name)
    lake.delete(f"{prefix}/{MARKER}")
    lake.remove_stray_temporaries(prefix)  # e.g. of a unit marker a killed run was writing
    stamp = {RESUME_FIELD: resume} if resume else None
    in_force = _in_force(stage, settings)
    reports, fed_parts = _resumed(lake, stage, unit, len(files), resume, in_force)
    todo = [
        Work(
            lake,
            stage.name,
            settings,
            unit=unit,
            part=part,
            file=files[part],
            stamp=stamp,
            then=Work(
                lake,
                stage.feeds,
                fed_settings,
                unit=unit,
                part=part,
                file=files[part],
                stamp={RESUME_FIELD: fed_stamp(resume, fed_settings)},
            )
            if fed_settings is not None and stage.feeds and resume
            else None,
        )
        for part in range(len(files))
        if part not in reports
    ]
    workers = max(1, min(workers or available_cpus(), len(todo) or 1))
    for part, report in _run_parts(todo, workers, memory_limit):
        reports[part] = report
        if on_part:
            on_part(len(reports), len(files))
    total = combine({part_name(part): reports[part] for part in sorted(reports)})
    own = time.process_time() - started  # parts run in this process are in it already
    if _in_process(workers, memory_limit):
        total.cpu_s, total.start_cpu_s = own, 0.0  # no workers: their start-up is this process's
    else:
        total.cpu_s += own
    total.fed_parts = fed_parts
    total.counts["files"] = len(files)
    total.counts["resumed_parts"] = len(files) - len(todo) - fed_parts
    lake.write_json(f"{prefix}/{MARKER}", total.summary())
    return total


def _resumed(
    lake: Lake, stage: Stage, unit: Unit, parts: int, resume: str | None, settings: Any = None
) -> tuple[dict[int, StageReport], int]:
    """The parts committed with this ``resume`` stamp, and how many of them the stage feeding
    this one made in its pass (`Stage.feeds`), kept only if made with these ``settings``."""
    if not resume:
        return {}, 0
    done, fed = {}, 0
    committed = set(lake.list(unit.prefix(stage.name)))  # one listing, not a request per part
    ours = (resume, fed_stamp(resume, settings))
    for part in range(parts):
        marker = f"{unit.part_prefix(stage.name, part)}/{MARKER}"
        if marker in committed:
            summary = lake.read_json(marker)
            stamped = summary.get(RESUME_FIELD)
            if stamped in ours:
                done[part] = StageReport.from_summary(summary)
                fed += stamped != resume
    return done, fed


def _run_parts(todo: list[Work], workers: int, memory_limit: int | None):
    """Yield (part, report) as parts finish. A part that fails does not stop the others: the
    first failure is raised once every other part is committed, so a retry redoes only the
    failed files."""
    failures: list[Exception] = []
    yield from _parts_in_processes(todo, workers, memory_limit, failures)
    if failures:
        first = failures[0]
        if len(failures) > 1:
            first.add_note(
                f"{len(failures)} of {len(todo)} files failed; the others are committed: "
                + "; ".join(f"{type(f).__name__}: {f}" for f in failures[1:6])
            )
        raise first


def _parts_in_processes(
    todo: list[Work], workers: int, memory_limit: int | None, failures: list[Exception]
):
    # In the caller's process only when nothing needs a worker: the address-space cap and the
    # per-record watchdog apply to worker processes, so with a cap (every Dagster run has one)
    # even a unit of one file, or a pod of one CPU, runs in a worker.
    if _in_process(workers, memory_limit):
        for work in todo:
            try:
                report = run_part(work)
            except Exception as error:
                failures.append(error)
                continue
            yield work.part, report
        return
    pending_work = {work.part: work for work in todo}
    deaths: dict[int, list[str]] = {}  # part -> how each worker that was on it died
    while pending_work:
        pool = _pool(workers, memory_limit)
        pending = {pool.submit(run_part, work): part for part, work in pending_work.items()}
        processes: dict[int, Any] = dict(pool._processes or {})
        try:
            while pending:
                finished, _ = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                live = pool._processes or {}  # no public API lists a pool's workers
                processes.update(live)
                police(list(live))
                broken = None
                for future in finished:
                    error = future.exception()
                    if isinstance(error, BrokenProcessPool):
                        broken = error
                        continue
                    part = pending.pop(future)
                    del pending_work[part]
                    if error is not None:
                        failures.append(error)
                    else:
                        yield part, future.result()
                if broken is not None:
                    raise broken
        except BrokenProcessPool as broken:
            processes.update(pool._processes or {})
            _drop_pool(workers, memory_limit)
            blamed = _dead_workers_parts(processes, pending_work)
            # A worker that ended itself over a record's budget said which record: its part
            # starts again in a new worker that drops that record.
            notes = take_notes(todo[0].stage, {w.unit.key for w in pending_work.values()})
            if _skip_noted(pending_work, notes):
                continue
            # Any other death: the part its worker was on starts again in a new worker, and
            # the other parts go on. A part that kills a second worker is given up.
            if not blamed:
                raise WorkerDiedError(
                    "a worker process died while "
                    + _listed([_describe(w) for w in pending_work.values()])
                ) from broken
            for part, how in blamed.items():
                deaths.setdefault(part, []).append(how)
                if len(deaths[part]) >= 2:
                    failures.append(_given_up(pending_work.pop(part), deaths[part], memory_limit))
        except BaseException:
            _drop_pool(workers, memory_limit)
            raise


def _exit_code(process, wait_s: float = 2.0) -> int | None:
    """A pool worker's exit code. The pool's own thread reaps its dead workers: while it does,
    the code reads as None (our wait finds no child left), until that thread records it."""
    deadline = time.monotonic() + wait_s
    while process.exitcode is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return process.exitcode


def _in_process(workers: int, memory_limit: int | None) -> bool:
    return workers == 1 and not memory_limit


def _given_up(work: Work, deaths: list[str], memory_limit: int | None) -> WorkerDiedError:
    cap = f" (address-space cap per worker: {memory_limit >> 20} MiB)" if memory_limit else ""
    return WorkerDiedError(f"{'; then '.join(deaths)} while {_describe(work)}{cap}")


def _listed(items: list[str], limit: int = 5) -> str:
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return " or ".join(items[:limit]) + more


def _skip_noted(pending: dict[int, Work], notes: list[dict]) -> bool:
    skipped = False
    for entry in notes:
        work = pending.get(entry["part"])
        if work is not None and work.unit.key == entry["unit"]:
            pending[work.part] = replace(work, skip=work.skip | {entry["offset"]})
            skipped = True
    return skipped


def _pool_key(workers: int, memory_limit: int | None) -> tuple:
    return workers, memory_limit, hash(frozenset(os.environ.items()))


def _drop_pool(workers: int, memory_limit: int | None) -> None:
    pool = _pools.pop(_pool_key(workers, memory_limit), None)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


# Worker processes outlive a run within one process (`tokenmill run` executes every run in
# its own process): each pays its imports once. They inherit the environment they were started
# in (credentials among it), so a changed environment gets new ones.
_pools: dict[tuple, ProcessPoolExecutor] = {}


def _pool(workers: int, memory_limit: int | None) -> ProcessPoolExecutor:
    key = _pool_key(workers, memory_limit)
    if key not in _pools:
        for stale in list(_pools):
            _pools.pop(stale).shutdown(wait=False, cancel_futures=True)
        _pools[key] = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(memory_limit,),
        )
    return _pools[key]


def run_part(work: Work) -> StageReport:
    # The worker's start-up, once per process and not the part's CPU: only this stage's module
    # (and the one it feeds in this pass: a worker of one stage does not import the others'
    # libraries), and what they prepare (`Stage.prepare`).
    begun, post = time.process_time(), None
    try:
        module = importlib.import_module(f"tokenmill.stages.{work.stage}")
        _prepare(module.STAGE, work)  # a model that cannot be loaded fails the part
        if work.then is not None:
            fed_stage = importlib.import_module(f"tokenmill.stages.{work.then.stage}").STAGE
            _prepare(fed_stage, work.then)
        post = _post_part(work)
        started = time.process_time()
        if work.then is None:
            report = module.STAGE.run(work)
            report.cpu_s = time.process_time() - started
        else:
            then = replace(work.then, skip=work.skip)  # records that ended a worker: in both
            made = []
            report = module.STAGE.run(
                work, consume=lambda feed: made.append(fed_stage.fed(then, feed))
            )
            report.cpu_s = time.process_time() - started  # the whole pass
            report.fed_cpu_s = sum(r.cpu_s for r in made)  # of it, the fed stage's part
        report.start_cpu_s = started - begun
        return report
    except Exception as error:
        error.add_note(f"while {_describe(work)}")
        crossing = portable(error)
        if crossing is error:
            raise
        raise crossing from error
    finally:
        if post is not None:
            post.unlink(missing_ok=True)


def _in_force(stage: Stage, settings: Any) -> Any:
    """The settings a part of ``stage`` runs with: ``settings``, or (None) the defaults."""
    return settings if settings is not None or not stage.settings else stage.settings()


def _prepare(stage: Stage, work: Work) -> None:
    if stage.prepare is not None:
        stage.prepare(_in_force(stage, work.settings), work.lake)


def _describe(work: Work) -> str:
    return f"{work.stage} worked on {work.file} (file {work.part} of unit {work.unit})"


def _post_part(work: Work) -> Path | None:
    """Post which part this worker process is on, for a parent whose worker dies (workers
    only: the caller's own process needs none)."""
    if not RecordWatch.enabled:
        return None
    post = NOTES / f"{os.getpid()}.part"
    NOTES.mkdir(parents=True, exist_ok=True)
    post.write_text(json.dumps(work.piece))
    return post


def _dead_workers_parts(processes: dict[int, Any], pending: dict[int, Work]) -> dict[int, str]:
    """The pending parts dead workers were on, and how each died. The pool terminates its other
    workers once one dies: those (SIGTERM) are not blamed."""
    blamed = {}
    for pid, process in processes.items():
        post = NOTES / f"{pid}.part"
        try:
            entry = json.loads(post.read_text())
        except (OSError, ValueError):
            continue  # between parts
        post.unlink(missing_ok=True)
        code = _exit_code(process)
        work = pending.get(entry["part"])
        if code in (None, 0, -signal.SIGTERM) or work is None or work.unit.key != entry["unit"]:
            continue
        blamed[work.part] = f"worker {pid} {exit_description(code)}"
    return blamed


def _start_worker(limit: int | None) -> None:
    """A worker's address-space cap (a runaway record fails with MemoryError in its worker, not
    the node) and its per-record watchdog."""
    enable_watchdog()
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
