"""The benchmarks' record: benchmarks/RESULTS.md is what benchmarks/report.py writes from
benchmarks/results.jsonl, and a recorded run says what it measured, on what, where and how."""

from __future__ import annotations

import os
import sys
from datetime import datetime

from benchmarks import report, results


def test_results_md_is_what_the_report_writes_from_the_recorded_lines():
    expected = report.render(report.read(results.RESULTS))
    assert report.RESULTS_MD.read_text(encoding="utf-8") == expected, (
        "benchmarks/RESULTS.md is stale: run `uv run python benchmarks/report.py`"
    )


def test_every_recorded_line_names_its_figures_input_and_command():
    for line in report.read(results.RESULTS):
        assert line["benchmark"] and line["figures"] and line["input"] and line["command"]
        # lines recorded before this format say where they come from instead of the machine
        assert line["machine"] or line["source"]


def test_a_run_is_recorded_and_its_latest_line_is_reported(tmp_path, monkeypatch):
    path = tmp_path / "results.jsonl"
    monkeypatch.setenv(results.RESULTS_ENV, str(path))
    monkeypatch.setenv("BENCH_ROUNDS", "2")
    script = results.CHECKOUT / "benchmarks" / "bench_example.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--objects", "10"])

    results.record("bench_example", {"seconds": 1.25}, {"data": "nothing", "objects": 10})
    table = [{"run": "a", "value": "x|y"}, {"run": "b", "value": 2}]
    results.record("bench_example", {"seconds": 2.5, "runs": table}, {"data": "nothing"})
    assert results.record("bench_example", {}, {"data": "nothing"}) is None

    lines = report.read(path)
    assert len(lines) == 2
    latest = lines[-1]
    assert latest["command"] == (
        "BENCH_ROUNDS=2 uv run python benchmarks/bench_example.py --objects 10"
    )
    assert latest["machine"]["cores"] == os.cpu_count()
    assert latest["machine"]["python"] and latest["machine"]["cpu"]
    assert datetime.fromisoformat(latest["utc"]).utcoffset().total_seconds() == 0
    text = report.render(lines)
    assert "| seconds | 2.5 |" in text and "| seconds | 1.25 |" not in text
    assert "| run | value |" in text and "| a | x\\|y |" in text
    assert "`BENCH_ROUNDS=2 uv run python benchmarks/bench_example.py --objects 10`" in text
