"""What every benchmark script shares: timing, peak memory of a child process, a printed table
(kept, to be recorded: `benchmarks.results`)."""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import resource
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

# Every table this process printed, by title: its rows by column (a title printed again keeps
# the last version). A benchmark without a JSON object of its own records these.
TABLES: dict[str, list[dict[str, Any]]] = {}


def timed(work: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = work()
    return result, time.perf_counter() - started


def _child(work: Callable[[], Any], queue) -> None:
    result, seconds = timed(work)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put((result, seconds, peak_kib * 1024))


def in_fresh_process(work: Callable[[], Any]) -> tuple[Any, float, int]:
    """Run `work` in a new process: (result, seconds, peak RSS in bytes of that process)."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(work, queue))
    process.start()
    while True:  # a child that dies without reporting must not leave us waiting forever
        try:
            outcome = queue.get(timeout=1)
            break
        except queue_module.Empty:
            if not process.is_alive() and queue.empty():
                process.join()
                died = f"benchmark process died, exit code {process.exitcode}"
                raise RuntimeError(died) from None
    process.join()
    if process.exitcode:
        raise RuntimeError(f"benchmark process failed with exit code {process.exitcode}")
    return outcome


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    TABLES[title] = [dict(zip(header, row, strict=True)) for row in rows]
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    print(f"\n## {title}\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |")
    sys.stdout.flush()


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
