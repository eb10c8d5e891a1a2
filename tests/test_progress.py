"""The long commands show progress: on a terminal a live bar (counts, elapsed time, time left)
with only the lines that matter above it; elsewhere the plain lines they always printed. Real
commands run on a pseudo-terminal."""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time

import pytest
from dagster import DagsterInstance, Definitions, DynamicOut, DynamicOutput, job, op

from tokenmill.cli.demo import land_demo_crawl
from tokenmill.cli.main import main as cli
from tokenmill.cli.progress import progress
from tokenmill.cli.runner import execute
from tokenmill.storage.lake import Lake

CRAWL = "CC-MAIN-PROGRESS-2026-01"
UNIT = f"{CRAWL}/00000"
# CSI sequences (colours, cursor moves, erasing) and the other escapes rich writes
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")
TIME = r"\d+:\d\d:\d\d"
SMALL_MODEL = ["--dim", "16", "--bucket", "100000", "--epoch", "25", "--lr", "1.0"]


def terminal(columns: int = 120) -> tuple[int, int]:
    """A pseudo-terminal (master, slave) of `columns` columns."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    return master, slave


def read_all(master: int, finished, timeout: float) -> str:
    """What was written to the terminal until `finished()` and nothing is left, or until every
    writer closed it."""
    out, deadline = bytearray(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.2)[0]:
            try:
                out += os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
        elif finished():
            break
    return out.decode()


def shown(text: str) -> list[str]:
    """The lines a terminal showed, escapes removed; each redraw of a bar is a line."""
    return [line for line in re.split(r"[\r\n]+", ESCAPES.sub("", text)) if line.strip()]


def test_off_a_terminal_each_finished_item_is_a_plain_line(capsys):
    with progress(3, "cleaned", unit="partitions") as bar:
        bar.advance("  cleaned  a  ok")
        bar.status("working on b")
        bar.advance("  cleaned  b  FAILED", notable=True)
        bar.note("    check failed: b")
        bar.update(3, 3)
        bar.advance()
    assert (
        capsys.readouterr().out == "  cleaned  a  ok\n  cleaned  b  FAILED\n    check failed: b\n"
    )


def test_on_a_terminal_a_bar_counts_and_only_the_notable_lines_are_printed(monkeypatch):
    master, slave = terminal()
    monkeypatch.setenv("TERM", "xterm-256color")
    with open(slave, "w", closefd=True) as screen:
        monkeypatch.setattr(sys, "stdout", screen)
        output: list[str] = []
        reader = threading.Thread(target=lambda: output.append(read_all(master, lambda: False, 30)))
        reader.start()
        with progress(3, "fineweb_en/cleaned", unit="partitions") as bar:
            for name, state in [("a", "ok"), ("b", "FAILED"), ("c", "ok")]:
                time.sleep(0.2)
                bar.status(f"after {name}")
                bar.advance(f"  fineweb_en/cleaned  {name}  {state}", notable=state != "ok")
        monkeypatch.undo()
    reader.join()
    os.close(master)
    lines = shown(output[0])
    assert "  fineweb_en/cleaned  b  FAILED" in lines
    assert not any(line.endswith("ok") for line in lines)
    bars = [line for line in lines if line.startswith("fineweb_en/cleaned ")]
    assert re.search(rf" 3/3 partitions {TIME} ETA {TIME} after c$", bars[-1]), bars[-1]
    # the time left is estimated once an item is done
    assert any(re.search(rf" 1/3 partitions {TIME} ETA {TIME}", line) for line in bars), bars


@op(out=DynamicOut())
def plan():
    for index in range(3):
        yield DynamicOutput(index, mapping_key=str(index))


@op
def part(index: int) -> int:
    return index


@op
def finish(parts: list[int]) -> int:
    return sum(parts)


@job
def fanned_out():
    finish(plan().map(part).collect())


def test_a_runs_steps_are_counted_as_they_finish_its_mapped_step_as_its_copies():
    counts = []
    with DagsterInstance.ephemeral() as instance:
        outcome = execute(
            "fanned_out",
            None,
            instance,
            Definitions(jobs=[fanned_out]),
            on_step=lambda done, planned: counts.append((done, planned)),
        )
    assert outcome.success
    assert counts[0] == (0, 3)  # plan, part[?], finish
    assert counts[-1] == (5, 5)  # part[0], part[1], part[2] in place of part[?]
    finished = [done for done, _ in counts]
    assert finished == sorted(finished) and all(done <= planned for done, planned in counts)


def on_a_terminal(env: dict, *args: str) -> list[str]:
    """The lines `tokenmill args` showed on a terminal."""
    master, slave = terminal()
    with tempfile.TemporaryFile() as errors:
        command = subprocess.Popen(
            [sys.executable, "-m", "tokenmill.cli.main", *args],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=errors,
            env=env,
        )
        os.close(slave)
        try:
            text = read_all(master, lambda: command.poll() is not None, timeout=300)
        finally:
            os.close(master)
            if command.poll() is None:
                command.kill()
        returncode = command.wait(timeout=30)
        errors.seek(0)
        assert returncode == 0, errors.read().decode()[-3000:]
    return shown(text)


def off_a_terminal(ran: dict, monkeypatch, capsys, *args: str) -> list[str]:
    """The lines `tokenmill args` printed, run in process, into pytest's capture."""
    for name in [k for k in os.environ if k.startswith("TOKENMILL_")]:
        monkeypatch.delenv(name)
    for name in ("TOKENMILL_LAKE_URL", "DAGSTER_HOME"):
        monkeypatch.setenv(name, ran["env"][name])
    capsys.readouterr()
    cli(list(args))
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out
    return out.splitlines()


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict:
    """A one-unit crawl taken through every stage by `tokenmill run` on a terminal: the
    commands' environment and what the terminal showed."""
    root = tmp_path_factory.mktemp("progress")
    land_demo_crawl(Lake.from_url(str(root / "lake")), CRAWL, files=1, pages_per_file=20, seed=0)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOKENMILL_") and k not in ("COLUMNS", "LINES", "NO_COLOR")
    }
    env |= {
        "TOKENMILL_LAKE_URL": str(root / "lake"),
        "DAGSTER_HOME": str(root / "home"),
        "TERM": "xterm-256color",
    }
    (root / "good.jsonl").write_text(
        "".join(
            json.dumps({"text": f"A fine article, number {i}, about trees."}) + "\n"
            for i in range(40)
        )
    )
    return {
        "env": env,
        "root": root,
        "run": on_a_terminal(env, "run", "--crawl", CRAWL, "--files-per-unit", "1"),
    }


@pytest.mark.integration
def test_run_draws_a_bar_per_stage_and_prints_only_the_runs_that_matter(ran):
    lines = ran["run"]
    # raw_crawl and extracted: one run, one pass over the files
    stages = ("raw_crawl + extracted", "fineweb_en/cleaned", "fineweb_en/tokenized_shards")
    for asset in stages:
        bars = [line for line in lines if line.startswith(f"{asset} ━")]
        assert bars and re.search(rf" 1/1 partitions {TIME} ETA {TIME}", bars[-1]), asset
    # a run with a warning is printed above the bars, with the warning; the others are not
    said = [line for line in lines if "━" not in line]
    assert not any(UNIT in line for line in said)
    tokenizer = next(i for i, line in enumerate(said) if line.startswith("  fineweb_en/tokenizer "))
    assert said[tokenizer].endswith(" ok")
    assert "warning: fineweb_en/tokenizer vocabulary_reaches_target" in said[tokenizer + 1]
    assert any(line.startswith("10 runs succeeded on the instance") for line in said), said


@pytest.mark.integration
def test_release_counts_its_steps_on_a_terminal_and_prints_as_before_elsewhere(
    ran, monkeypatch, capsys
):
    lines = on_a_terminal(ran["env"], "release")
    bars = [line for line in lines if line.startswith("fineweb_en/release ━")]
    # the plan step, the step writing the shards, the finish step
    assert re.search(rf" 3/3 steps {TIME} ETA {TIME}", bars[-1]), bars
    said = [line for line in lines if "━" not in line]
    assert re.fullmatch(r"fineweb_en/release: run [0-9a-f-]{36}", said[0])
    assert said[1].startswith("release fineweb_en: ")
    assert all(line.startswith("warning: ") for line in said[2:]), said
    plain = off_a_terminal(ran, monkeypatch, capsys, "release")
    assert re.fullmatch(r"fineweb_en/release: run [0-9a-f-]{36}", plain[0])
    assert plain[1:] == said[1:]


@pytest.mark.integration
def test_train_classifier_counts_its_phases_on_a_terminal(ran, monkeypatch, capsys):
    positives = str(ran["root"] / "good.jsonl")
    args = ["train-classifier", "good", "--positives", positives, *SMALL_MODEL]
    lines = on_a_terminal(ran["env"], *args)
    bars = [line for line in lines if line.startswith("classifier good ━")]
    assert re.search(rf" 4/4 phases {TIME} ETA {TIME}", bars[-1]), bars
    said = [line for line in lines if "━" not in line]
    plain = off_a_terminal(ran, monkeypatch, capsys, *args)
    assert said == plain and plain[0].startswith("settings: ")
    assert plain[1].startswith("classifier good: 40 positives, ")
