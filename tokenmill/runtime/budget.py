"""CPU-time budgets for one piece of work (one record).

Two layers. `cpu_budget` is a profiling timer (`ITIMER_PROF`: CPU time, so a loaded machine does
not trip it) that raises `OverBudget` in the main thread when the interpreter next gets control:
it stops pure-Python loops. Code that stays in C for minutes holding the GIL (an HTML tree
100,000 levels deep) never gives control back, so in a worker process `RecordWatch` also posts
which record it is on and the process's CPU time when it started; the parent (`police`, called
by `tokenmill.runtime.parts` while it waits) kills a worker still on the same record at twice its
budget and notes which record it was. The part then starts again in a new worker that drops that
record with the reason `over_budget`.
"""

from __future__ import annotations

import json
import mmap
import os
import resource
import signal
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

NOTES = Path(tempfile.gettempdir()) / "tokenmill-over-budget"


def cpu_time() -> float:
    """CPU seconds of this process (all its threads) and of its children that ended."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


class OverBudget(Exception):
    pass


class cpu_budget:  # noqa: N801 - used as a function: `with cpu_budget(seconds):`
    """Raises `OverBudget` in the block once it has spent `seconds` of CPU (main thread only).

    The handler is installed once per process (forked workers inherit it) and raises only while
    a budget is armed (a record at a time: installing and restoring it around every record cost
    more than the timer, and so did asking `signal.getsignal`, which builds an enum member each
    time); a signal that arrives as the block ends finds nothing armed."""

    armed = False
    installed = False

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.timing = bool(seconds) and threading.current_thread() is threading.main_thread()

    def __enter__(self) -> None:
        if self.timing:
            if not cpu_budget.installed:
                signal.signal(signal.SIGPROF, _raise)
                cpu_budget.installed = True
            cpu_budget.armed = True
            signal.setitimer(signal.ITIMER_PROF, self.seconds)

    def __exit__(self, *exc) -> bool:
        if self.timing:
            cpu_budget.armed = False
            signal.setitimer(signal.ITIMER_PROF, 0)
        return False


def _raise(signum, frame):
    if cpu_budget.armed:
        cpu_budget.armed = False
        raise OverBudget


POST_BYTES = 1024  # a post's file is this long, or the longest post's length if longer


class RecordWatch:
    """Posts the record a worker process is on, for its parent's `police` (workers only).

    The post is one file per process, mapped into memory and overwritten in place, blank
    between records (creating and removing a file per record cost more than language ID, and a
    `json.dumps` and two writes per record a third of that): a post that is not JSON, blank or
    caught mid-write, means no record. Its label is the same for every record of a part."""

    enabled = False
    _posts: dict[int, mmap.mmap] = {}  # process id -> its post, mapped

    def __init__(self, label: dict):
        self.post = NOTES / f"{os.getpid()}.current"
        head = json.dumps(label)[:-1]  # the label's object, left open for the record's fields
        self._head = f"{head}, " if label else head

    def _mapped(self, size: int) -> mmap.mmap:
        pid = os.getpid()
        post = RecordWatch._posts.get(pid)
        if post is None or len(post) < size:
            NOTES.mkdir(parents=True, exist_ok=True)
            if post is not None:
                post.close()
            descriptor = os.open(self.post, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                os.ftruncate(descriptor, max(size, POST_BYTES))
                post = RecordWatch._posts[pid] = mmap.mmap(descriptor, 0)
            finally:
                os.close(descriptor)
            post[:] = b" " * len(post)
        return post

    @contextmanager
    def record(self, offset: int, seconds: float | None) -> Iterator[None]:
        if not (RecordWatch.enabled and seconds):
            yield
            return
        payload = (
            f'{self._head}"offset": {offset}, "cpu": {time.process_time()!r}, '
            f'"budget": {float(seconds)!r}}}'
        ).encode()
        post = self._mapped(len(payload))
        post[: len(payload)] = payload
        try:
            yield
        finally:
            post[: len(payload)] = b" " * len(payload)


def enable_watchdog() -> None:
    RecordWatch.enabled = True


def police(pids: Iterable[int]) -> None:
    """Kill each worker among `pids` that has spent twice its record's budget on one record,
    noting the record for `take_notes`."""
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        post = NOTES / f"{pid}.current"
        try:
            entry = json.loads(post.read_text())
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, ValueError):
            continue  # between records, or gone
        cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        if cpu - entry["cpu"] > 2 * entry["budget"]:
            note(entry, pid)
            post.unlink(missing_ok=True)
            os.kill(pid, signal.SIGKILL)


def note(entry: dict, pid: int) -> None:
    NOTES.mkdir(parents=True, exist_ok=True)
    (NOTES / f"{pid}.json").write_text(json.dumps(entry))


def take_notes(stage: str, units: set[str]) -> list[dict]:
    """The records workers of `stage` on `units` ended themselves over, since the last call
    (other runs' notes are left to them)."""
    entries = []
    for path in NOTES.glob("*.json") if NOTES.is_dir() else []:
        entry = json.loads(path.read_text())
        if entry.get("stage") == stage and entry.get("unit") in units:
            entries.append(entry)
            path.unlink(missing_ok=True)
    return entries
