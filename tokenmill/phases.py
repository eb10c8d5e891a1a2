"""Phases of tasks that steps share through the lake, without waiting for each other.

A job is a sequence of phases; a phase is a list of tasks, each committing its output (a marker
written last, see ``tokenmill.spill``) from the outputs of the phases before it, and the same
bytes whoever runs it. Which phase comes next may depend on what the previous ones committed
(rounds until a fixpoint): the job is a generator yielding each phase once everything before it
is committed. Any number of steps (pods) may run the same job at once: each goes through every
phase's tasks starting at its own offset, skips the ones committed, and computes the rest, so a
step never waits for another. Where two steps meet on a task both compute it and commit the
same bytes; a step killed anywhere resumes from what is committed. A task whose inputs vanish
under it (their phase finished and cleaned up by another step) is fine if its own output was
committed meanwhile.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from dataclasses import dataclass

from tokenmill.worker_errors import WorkerDiedError


@dataclass(frozen=True)
class Phase:
    name: str
    tasks: tuple[str, ...]
    run: Callable[[str], dict]  # commits one task (picklable: it may run in a worker process)
    done: Callable[[str], bool]


Job = Callable[[], Iterator[Phase]]


def run_task(phase: Phase, task: str) -> bool:
    """Commits ``task`` unless it is; True if this call computed it."""
    if phase.done(task):
        return False
    try:
        phase.run(task)
    except Exception:
        if phase.done(task):  # committed by another step while its inputs were cleaned up
            return False
        raise
    return True


def rotated(tasks: tuple[str, ...], offset: float) -> list[str]:
    start = int(offset * len(tasks)) % max(len(tasks), 1)
    return [*tasks[start:], *tasks[:start]]


def run_job(job: Job, workers: int = 1, offset: float = 0.0, in_process: bool = False) -> dict:
    """Runs every phase of ``job`` to the end (computing what is not committed), in ``workers``
    processes, starting each phase at ``offset`` (0 <= offset < 1) of its tasks; returns how
    many tasks this call computed and how many it found committed."""
    computed = found = 0
    with ExitStack() as stack:
        pool: Executor | None = None
        for phase in job():
            todo = [t for t in rotated(phase.tasks, offset) if not phase.done(t)]
            found += len(phase.tasks) - len(todo)
            if in_process or workers <= 1 or len(todo) <= 1:
                computed += sum(run_task(phase, task) for task in todo)
                continue
            if pool is None:
                context = multiprocessing.get_context("spawn")
                pool = stack.enter_context(ProcessPoolExecutor(workers, mp_context=context))
            futures = [(task, pool.submit(run_task, phase, task)) for task in todo]
            for task, future in futures:
                try:
                    computed += future.result()
                except BrokenProcessPool as error:
                    raise WorkerDiedError(
                        f"a worker process died computing task {task} of phase {phase.name}, "
                        "killed (a signal: the pod's memory limit, an operator) or crashed; a "
                        "retry resumes from the committed tasks"
                    ) from error
    return {"tasks_computed": computed, "tasks_found": found}
