"""The per-record post a worker keeps for its parent's watchdog (`tokenmill.runtime.budget`)."""

from __future__ import annotations

import json

import pytest

from tokenmill.runtime import budget


@pytest.fixture
def watching(monkeypatch, tmp_path):
    monkeypatch.setattr(budget, "NOTES", tmp_path)
    monkeypatch.setattr(budget.RecordWatch, "enabled", True)
    monkeypatch.setattr(budget.RecordWatch, "_posts", {})


@pytest.fixture
def watch(watching):
    return budget.RecordWatch({"stage": "cleaned", "unit": "CC/u", "part": 0})


def test_the_record_is_posted_while_it_runs_and_no_record_after(watching):
    # a post longer than the file first, then shorter ones over what it left
    for offset, label in ((1234, "x" * 3000), (5, ""), (77, "y" * 10)):
        watch = budget.RecordWatch({"stage": "cleaned", "unit": "CC/u", "part": 0, "note": label})
        with watch.record(offset, 5):
            entry = json.loads(watch.post.read_text())
            assert (entry["offset"], entry["budget"], entry["note"]) == (offset, 5.0, label)
        with pytest.raises(ValueError):  # what police reads as "between records"
            json.loads(watch.post.read_text())


def test_nothing_is_posted_without_a_budget(watch):
    with watch.record(1234, None):
        assert not watch.post.exists()


def test_a_post_left_by_an_earlier_process_of_the_same_id_is_blanked(watching):
    watch = budget.RecordWatch({"stage": "cleaned", "unit": "CC/u", "part": 0})
    watch.post.write_text(json.dumps({"stage": "cleaned", "offset": 1}) + " " * 5000)
    with watch.record(9, 5):
        assert json.loads(watch.post.read_text())["offset"] == 9
    with pytest.raises(ValueError):
        json.loads(watch.post.read_text())
