"""Registering a crawl's files as units (tokenmill/crawl/units.py): append-only batches, a
registration that collides with a concurrent one, and discovery in bounded listings."""

from __future__ import annotations

import os

import pytest

from tokenmill.crawl.units import (
    discover,
    register_new_files,
    registered_crawls,
    registered_units,
    unit_files,
    write_batch,
)
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import LANDING, MANIFESTS, Unit

CRAWL = "CC-MAIN-UNITS-2026-01"


def land(lake: Lake, names: list[str], crawl: str = CRAWL) -> list[str]:
    keys = [f"{LANDING}/{crawl}/{name}" for name in names]
    for key in keys:
        lake.write_bytes(key, b"")
    return keys


def test_registration_batches_are_append_only(lake):
    first_files = land(lake, ["a.warc.gz", "b.warc.gz", "c.warc.gz", "d.warc.gz", "e.warc.gz"])
    first = register_new_files(lake, CRAWL, files_per_unit=2)
    assert [u.name for u in first.units] == ["00000", "00001", "00002"]
    batch = f"{MANIFESTS}/{CRAWL}/00000-00002.json"
    assert lake.list(MANIFESTS) == [batch]
    written = lake.read_bytes(batch)
    assert lake.read_json(batch) == {
        "crawl": CRAWL,
        "units": {
            "00000": first_files[:2],
            "00001": first_files[2:4],
            "00002": first_files[4:],
        },
    }

    later = land(lake, ["0.warc.gz", "f.warc.gz", "g.warc.gz"])
    second = register_new_files(lake, CRAWL, files_per_unit=2)
    assert [u.name for u in second.units] == ["00003", "00004"]
    assert lake.list(MANIFESTS) == [batch, f"{MANIFESTS}/{CRAWL}/00003-00004.json"]
    assert lake.read_bytes(batch) == written  # never rewritten
    assert unit_files(lake, Unit(CRAWL, "00003")) == later[:2]
    assert unit_files(lake, Unit(CRAWL, "00004")) == later[2:]
    assert register_new_files(lake, CRAWL, files_per_unit=2).units == []
    assert registered_units(lake, CRAWL) == [Unit(CRAWL, f"{i:05d}") for i in range(5)]
    assert registered_crawls(lake) == [CRAWL]
    # A batch that overlaps registered units is refused, whatever it holds.
    assert write_batch(lake, CRAWL, 4, [["landing/x.warc.gz"], ["landing/y.warc.gz"]]) is None
    assert lake.list(MANIFESTS) == [batch, f"{MANIFESTS}/{CRAWL}/00003-00004.json"]


class RacingLake(Lake):
    """A lake on which another registration writes its batch right before ours."""

    rival = None

    def exists(self, key: str) -> bool:
        if key.startswith(f"{MANIFESTS}/") and self.rival is not None:
            rival, self.rival = self.rival, None
            rival()
        return super().exists(key)


def test_a_registration_that_collides_with_a_concurrent_one_resumes(tmp_path):
    lake = RacingLake.from_url(str(tmp_path / "lake"))
    files = land(lake, ["a.warc.gz", "b.warc.gz", "c.warc.gz", "d.warc.gz", "e.warc.gz"])
    # The other registration listed the landing zone before d and e arrived.
    lake.rival = lambda: write_batch(lake, CRAWL, 0, [files[:3]])
    registration = register_new_files(lake, CRAWL, files_per_unit=2)
    assert registration.units == [Unit(CRAWL, "00001")]
    assert unit_files(lake, Unit(CRAWL, "00000")) == files[:3]  # the rival's, untouched
    assert unit_files(lake, Unit(CRAWL, "00001")) == files[3:]
    assert lake.list(MANIFESTS) == [
        f"{MANIFESTS}/{CRAWL}/00000-00000.json",
        f"{MANIFESTS}/{CRAWL}/00001-00001.json",
    ]


def test_discovery_lists_a_bounded_number_of_keys_and_goes_on(lake):
    files = land(lake, ["a.warc.gz", "b.warc.gz", "c.warc.gz", "d.warc.gz", "e.warc.gz"])
    land(lake, ["notes.txt"])  # listed, never registered

    units, positions, problems = discover(lake, {}, files_per_unit=2, max_keys=4)
    assert units == [Unit(CRAWL, "00000"), Unit(CRAWL, "00001")]
    assert positions == {CRAWL: {"after": files[3], "next": 2}}
    assert problems == []

    # The rest of the listing: the last, smaller unit is registered since the listing ended.
    more, later, _ = discover(lake, positions, files_per_unit=2, max_keys=4)
    assert more == [Unit(CRAWL, "00002")]
    assert unit_files(lake, more[0]) == [files[4]]
    assert later[CRAWL]["next"] == 3
    assert discover(lake, later, files_per_unit=2, max_keys=4)[0] == []

    # A tick repeated from its old positions (it crashed after writing) doubles nothing.
    discover(lake, positions, files_per_unit=2, max_keys=4)
    assert registered_units(lake, CRAWL) == [Unit(CRAWL, f"{i:05d}") for i in range(3)]
    # Without positions discovery goes on after the last registered file.
    assert discover(lake, {}, files_per_unit=2, max_keys=4)[0] == []
    with pytest.raises(ValueError, match="max_keys"):
        discover(lake, {}, files_per_unit=3, max_keys=5)


def test_discovery_waits_for_a_full_unit_while_the_listing_goes_on(lake):
    files = land(lake, [f"{name}.warc.gz" for name in "abcdefg"])
    units, positions, _ = discover(lake, {}, files_per_unit=3, max_keys=7)
    # The budget ran out at the last key: the trailing group of 1 may still grow.
    assert units == [Unit(CRAWL, "00000"), Unit(CRAWL, "00001")]
    assert positions[CRAWL] == {"after": files[5], "next": 2}


def test_discovery_names_bad_folders_and_skips_declared_crawls(lake):
    from tokenmill.crawl.sources import CrawlSource

    land(lake, ["a.warc.gz", "b.warc.gz"])
    land(lake, ["x.warc.gz"], crawl="-bad")
    land(lake, ["y.warc.gz", "z.warc.gz"], crawl="DECLARED")
    CrawlSource("DECLARED", prefix=str(lake.path(f"{LANDING}/DECLARED"))).save(lake)
    units, _, problems = discover(lake, {}, files_per_unit=2, max_keys=100)
    assert units == [Unit(CRAWL, "00000")]
    assert problems == ["landing folder '-bad' is not a valid crawl name; its files are ignored"]


def test_hostile_crawl_and_file_names_are_reported_and_the_rest_registered(lake):
    """A "|", control or bidi character in a landing folder (which could make every landing
    tick fail) or an over-long file name (which could fail its shard for good) is one named
    problem; the rest is registered."""
    land(lake, ["a.warc.gz"])
    root = lake.path(LANDING)
    for crawl in ("A|B", "A\x1bB", "A\u202eB"):
        os.makedirs(f"{root}/{crawl}")
        open(f"{root}/{crawl}/f.warc.gz", "wb").close()
    long_name = "z" * 200 + ".warc.gz"
    open(f"{root}/{CRAWL}/{long_name}", "wb").close()
    units, _, problems = discover(lake, {}, files_per_unit=10, max_keys=100)
    assert [unit_files(lake, unit) for unit in units] == [[f"{LANDING}/{CRAWL}/a.warc.gz"]]
    for crawl in ("A|B", "A\x1bB", "A\u202eB"):
        assert f"landing folder {crawl!r} is not a valid crawl name; its files are ignored" in (
            problems
        )
    assert any(long_name in problem for problem in problems), problems


def test_same_base_names_and_tmp_in_names_are_distinct_registered_files(lake):
    """Two landed files with one base name in different folders once overwrote each other in
    the raw zone; a name containing ".tmp-" (the lake's own temporaries start with it) was
    never registered."""
    keys = land(lake, ["a/f.warc.gz", "b/f.warc.gz", "part.tmp-1.warc.gz"])
    (unit,) = register_new_files(lake, CRAWL, files_per_unit=3).units
    assert unit_files(lake, unit) == sorted(keys)


def test_a_landing_folder_linked_out_of_the_lake_is_reported_and_skipped(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.warc.gz").write_bytes(b"")
    lake = Lake.from_url(str(tmp_path / "lake"))
    lake.write_bytes("landing/GOOD/a.warc.gz", b"")
    (tmp_path / "lake" / "landing" / "LINKED").symlink_to(outside)
    units, _, problems = discover(lake, {}, files_per_unit=1, max_keys=10)
    assert [u.key for u in units] == ["GOOD/00000"]
    assert any("LINKED" in p and "symlink" in p for p in problems), problems
