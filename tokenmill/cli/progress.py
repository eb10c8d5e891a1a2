"""Progress of the long commands. On a terminal: a live bar (label, done/total, elapsed time, time
left) with only the lines that matter (failures, warnings) printed above it. Elsewhere (CI,
pipes, tests): one plain line per finished item, as the commands print without a terminal.

    with progress(len(partitions), "cleaned", unit="partitions") as bar:
        for partition in partitions:
            ...
            bar.advance(f"  cleaned  {partition}  ok", notable=failed)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

# The rate that estimates the time left, over the whole bar rather than rich's last 30 s: a
# partition may take longer than that.
RATE_WINDOW_S = 24 * 3600


class Lines:
    """Progress without a terminal: the lines, printed as they come."""

    def advance(self, line: str | None = None, notable: bool = False) -> None:
        """One more item done; `line` says how it went (on a terminal, shown if `notable`)."""
        if line is not None:
            print(line, flush=True)

    def note(self, line: str) -> None:
        """A line shown in any case (on a terminal, above the bar)."""
        print(line, flush=True)

    def update(self, done: int, total: int | None = None) -> None:
        """The count as the work keeps it itself (a run's finished steps): shown on a terminal."""

    def status(self, text: str) -> None:
        """What is under way (a phase, a count so far): shown beside the bar on a terminal."""


class Bar(Lines):
    """Progress on a terminal: a rich task."""

    def __init__(self, bars, task):
        self._bars, self._task = bars, task

    def advance(self, line: str | None = None, notable: bool = False) -> None:
        self._bars.advance(self._task)
        if line is not None and notable:
            self.note(line)

    def note(self, line: str) -> None:
        self._bars.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def update(self, done: int, total: int | None = None) -> None:
        self._bars.update(self._task, completed=done, total=total)

    def status(self, text: str) -> None:
        self._bars.update(self._task, status=text)


@contextmanager
def progress(total: int | None, label: str, unit: str = "items") -> Iterator[Lines]:
    """A bar over `total` items (None: not known yet) on a terminal, plain lines elsewhere."""
    if total == 0 or not sys.stdout.isatty():
        yield Lines()
        return
    from rich.console import Console

    console = Console()
    if not console.is_interactive:  # TERM=dumb: no cursor movement
        yield Lines()
        return
    with _bars(console) as bars:
        task = bars.add_task(label, total=total, unit=unit, status="")
        bars.advance(task, 0)  # the rate counts from here, not from the first item done
        yield Bar(bars, task)


def _bars(console):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}", markup=False),
        console=console,
        speed_estimate_period=RATE_WINDOW_S,
        # a stderr sent elsewhere (a file) stays there
        redirect_stderr=sys.stderr.isatty(),
    )
