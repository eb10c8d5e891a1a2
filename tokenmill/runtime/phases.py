"""Phases of tasks that steps share through the lake.

A job is a sequence of phases; a phase is a list of tasks, each committing its output (a marker
written last, see ``tokenmill.storage.spill``) from the outputs of the phases before it, and the
same bytes whoever runs it. Which phase comes next may depend on what the previous ones committed
(rounds until a fixpoint): the job is a generator yielding each phase once everything before it
is committed. Any number of steps (pods) may run the same job at once, sharing each phase's
tasks by leases: a step claims a task before computing it (a claim file it refreshes every
``HEARTBEAT_S``), skips tasks committed or freshly claimed by another step, and, once nothing
is left to claim, waits for the claimed ones, taking over any whose claim went stale (its step
died). Step i of n starts with tasks i, i + n, ...: steps run at once share a phase evenly,
steps run one after another never wait. Two steps computing one task commit the same bytes; a
step killed anywhere resumes from what is committed. A task whose inputs vanish under it (their
phase finished and cleaned up by another step) is fine if its own output was committed
meanwhile.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack, suppress
from dataclasses import dataclass

import pyarrow as pa

from tokenmill.runtime.worker_errors import WorkerDiedError
from tokenmill.storage.lake import Lake


@dataclass(frozen=True)
class Phase:
    name: str
    tasks: tuple[str, ...]
    run: Callable[[str], dict]  # commits one task (picklable: it may run in a worker process)
    done: Callable[[str], bool]
    claims: Claims


Job = Callable[[], Iterator[Phase]]
HEARTBEAT_S = 20.0
STALE_AFTER_S = 90.0  # a claim not refreshed for this long: its step is gone
POLL_S = 0.5


@dataclass(frozen=True)
class Claims:
    """Leases on a phase's tasks: ``<prefix>/<task>.json`` holding who and when."""

    lake: Lake
    prefix: str

    def key(self, task: str) -> str:
        return f"{self.prefix}/{task}.json"

    def held_by_other(self, task: str, me: str) -> bool:
        try:
            claim = self.lake.read_json(self.key(task))
        except (FileNotFoundError, OSError, ValueError):
            return False
        return claim["owner"] != me and time.time() - claim["time"] < STALE_AFTER_S

    def claim(self, task: str, me: str) -> None:
        self.lake.write_json(self.key(task), {"owner": me, "time": time.time()})


def run_task(phase: Phase, task: str) -> bool:
    """Commits ``task`` unless it is; True if this call computed it."""
    if phase.done(task):
        return False
    # The system's allocator hands freed buffers back at once; mimalloc, Arrow's default,
    # keeps them (a 1/16 bound's clustering peaked ~60 MiB higher with it, ~10 % faster).
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        phase.run(task)
    except Exception:
        if phase.done(task):  # committed by another step while its inputs were cleaned up
            return False
        raise
    finally:
        release_memory()
    return True


def release_memory() -> None:
    """Hands what Arrow's allocator keeps of a finished task back to the system: a task's
    memory bound counts the process's, and mimalloc would keep a task's peak for the next."""
    pa.default_memory_pool().release_unused()


class _Step:
    """One step's run of a job: its leases, kept fresh by a thread, and its worker pool."""

    def __init__(self, stack: ExitStack, workers: int, in_process: bool, shared: bool):
        self.me = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.workers = 1 if in_process else max(workers, 1)
        self.pool: Executor | None = None
        self.stack = stack
        self.held: dict[str, tuple[Claims, str]] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        thread = threading.Thread(target=self._refresh, daemon=True)
        thread.start()
        stack.callback(self.stopped.set)
        self.computed = 0
        self.shared = shared  # other steps may run the job: claim tasks

    def _refresh(self) -> None:
        while not self.stopped.wait(HEARTBEAT_S):
            with self.lock:
                held = list(self.held.values())
            for claims, task in held:
                with suppress(OSError):
                    claims.claim(task, self.me)

    def _start(self, phase: Phase, task: str):
        if self.shared:
            phase.claims.claim(task, self.me)
        with self.lock:
            self.held[f"{phase.name}/{task}"] = (phase.claims, task)
        if self.workers == 1:
            future: Future = Future()
            try:
                future.set_result(run_task(phase, task))
            except Exception as error:
                future.set_exception(error)
            return future
        if self.pool is None:
            context = multiprocessing.get_context("spawn")
            pool = ProcessPoolExecutor(self.workers, mp_context=context)
            self.pool = self.stack.enter_context(pool)
        return self.pool.submit(run_task, phase, task)

    def _finished(self, phase: Phase, task: str, future: Future) -> None:
        with self.lock:
            self.held.pop(f"{phase.name}/{task}", None)
        try:
            self.computed += future.result()
        except BrokenProcessPool as error:
            raise WorkerDiedError(
                f"a worker process died computing task {task} of phase {phase.name}, killed "
                "(a signal: the pod's memory limit, an operator) or crashed; a retry resumes "
                "from the committed tasks"
            ) from error

    def run_phase(self, phase: Phase, ordered: list[str]) -> None:
        """Every task of ``phase`` committed, by this step or another."""
        running: dict[Future, str] = {}
        pending = deque(ordered)
        others: list[str] = []  # claimed by another step when last looked at
        while pending or running or others:
            while pending and len(running) < self.workers:
                task = pending.popleft()
                if phase.done(task):
                    continue
                if phase.claims.held_by_other(task, self.me):
                    others.append(task)
                else:
                    running[self._start(phase, task)] = task
            if running:
                finished, _ = wait(list(running), timeout=POLL_S, return_when=FIRST_COMPLETED)
                for future in finished:
                    self._finished(phase, running.pop(future), future)
            elif others:  # every task left is another step's, still alive: look again
                time.sleep(POLL_S)
                pending.extend(others)
                others = []


SLOTS = 256  # at most this many parallel steps share a job's tasks


class PlanChangedError(ValueError):
    """The inputs changed between the plan step and a later one."""


def slots(fingerprint: str) -> list[str]:
    """What a fanned-out job's plan hands the steps: SLOTS names, each with the plan's
    fingerprint; step i of n gets slots i, i + n, ... and computes every n-th task of each
    phase from the i-th."""
    return [f"{fingerprint}/{slot:03d}" for slot in range(SLOTS)]


def step_of(fingerprint: str, handed: list[str], inputs: str) -> tuple[int, int]:
    """(step, steps) from the slots a step was handed; fails if they were planned for other
    ``inputs`` than the fingerprint's."""
    every = slots(fingerprint)
    if handed and handed[0] not in every:
        raise PlanChangedError(
            f"the job was planned for other {inputs} than there are now (plan "
            f"{handed[0].split('/')[0]}, now {fingerprint}): re-run the stage"
        )
    step = every.index(handed[0]) if handed else 0
    steps = every.index(handed[1]) - step if len(handed) > 1 else SLOTS
    return step, steps


def run_job(
    job: Job, workers: int = 1, step: int = 0, steps: int = 1, in_process: bool = False
) -> dict:
    """Runs every phase of ``job`` to the end as step ``step`` of ``steps`` (computing what is
    not committed), in ``workers`` processes (this one if ``in_process``); returns how many
    tasks this call computed and how many it found committed."""
    found = 0
    with ExitStack() as stack:
        runner = _Step(stack, workers, in_process, shared=steps > 1)
        for phase in job():
            found += sum(phase.done(task) for task in phase.tasks)
            own = list(phase.tasks[step::steps])
            ordered = own + [task for task in phase.tasks if task not in set(own)]
            runner.run_phase(phase, ordered)
    return {"tasks_computed": runner.computed, "tasks_found": found}
