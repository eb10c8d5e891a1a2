"""The per-record post a worker keeps for its parent's watchdog (`tokenmill.budget`)."""

from __future__ import annotations

import json

import pytest

from tokenmill import budget


@pytest.fixture
def watch(monkeypatch, tmp_path):
    monkeypatch.setattr(budget, "NOTES", tmp_path)
    monkeypatch.setattr(budget.RecordWatch, "enabled", True)
    monkeypatch.setattr(budget.RecordWatch, "_posts", {})
    return budget.RecordWatch({"stage": "cleaned", "unit": "CC/u", "part": 0})


def test_the_record_is_posted_while_it_runs_and_no_record_after(watch):
    for offset, label in ((1234, "x" * 3000), (5, "")):  # a post longer than the padding first
        watch.label["note"] = label
        with watch.record(offset, 5.0):
            entry = json.loads(watch.post.read_text())
            assert (entry["offset"], entry["budget"], entry["note"]) == (offset, 5.0, label)
        with pytest.raises(ValueError):  # what police reads as "between records"
            json.loads(watch.post.read_text())


def test_nothing_is_posted_without_a_budget(watch):
    with watch.record(1234, None):
        assert not watch.post.exists()
