"""Running totals of a stage's output over its partitions (tokenmill.storage.rollups): each
partition counted once however often it runs, exact after writers of one crawl race, and read
from listings alone."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tokenmill.storage.lake import Lake
from tokenmill.storage.rollups import Rollup, Totals


class InterleavedLake(Lake):
    """A lake on which, just before the first write of a crawl's sum, another run of the crawl
    records its unit in full: the first run then writes a sum it listed without it."""

    def __init__(self, root: str, race):
        plain = Lake.from_url(root)
        super().__init__(plain.fs, plain.root, plain.url)
        self.race = race

    def write_bytes(self, key: str, data: bytes) -> None:
        race, self.race = (self.race, None) if "/_crawls/" in key else (None, self.race)
        if race:
            race()
        super().write_bytes(key, data)


def test_a_partition_run_again_is_counted_once(lake):
    rollup = Rollup(lake, "cleaned")
    assert rollup.record("A", "00000", 10, 100) == (Totals(10, 100, 0, 1), Totals(10, 100, 0, 1))
    assert rollup.record("A", "00001", 5, 50)[1] == Totals(15, 150, 0, 2)
    assert rollup.record("A", "00000", 10, 100) == (Totals(15, 150, 0, 2), Totals(15, 150, 0, 2))
    # a run that made something else replaces what the partition had
    assert rollup.record("A", "00000", 7, 70) == (Totals(12, 120, 0, 2), Totals(12, 120, 0, 2))
    in_b, everywhere = rollup.record("B", "00000", 1, 2, tokens=30)
    assert in_b == Totals(1, 2, 30, 1) and everywhere == Totals(13, 122, 30, 3)
    assert rollup.crawl("A") == Totals(12, 120, 0, 2)
    # one entry per partition and one sum per crawl are left, nothing else
    assert len(lake.list("cleaned/_rollup")) == 3 + 2


def test_stage_of_whole_crawls_counts_each_crawl_once(lake):
    rollup = Rollup(lake, "dedup_clusters")
    for crawl, records in [("A", 4), ("B", 6), ("A", 5)]:
        everywhere = rollup.record(crawl, crawl, records, records * 10)[1]
    assert everywhere == Totals(11, 110, 0, 2)


def test_recipe_views_keep_their_own_totals(lake):
    first = Rollup(lake.with_zones({"cleaned": "recipes/one/cleaned"}), "cleaned")
    second = Rollup(lake.with_zones({"cleaned": "recipes/two/cleaned"}), "cleaned")
    first.record("A", "00000", 3, 30)
    assert second.record("A", "00000", 4, 40)[1] == Totals(4, 40, 0, 1)
    assert lake.list("recipes/one/cleaned/_rollup/_crawls") == [
        "recipes/one/cleaned/_rollup/_crawls/A/3-30-0-1"
    ]


def test_a_sum_written_from_a_stale_listing_is_written_again(tmp_path):
    root = str(tmp_path / "lake")
    other = Rollup(Lake.from_url(root), "cleaned")
    other.record("A", "00001", 50, 500)
    # unit 00001 runs again, making less, while 00000 is between listing and writing
    lake = InterleavedLake(root, lambda: other.record("A", "00001", 5, 50))
    in_crawl, _ = Rollup(lake, "cleaned").record("A", "00000", 10, 100)
    assert in_crawl == Totals(15, 150, 0, 2)
    assert other.every_crawl() == Totals(15, 150, 0, 2)
    assert len(lake.list("cleaned/_rollup/_crawls")) == 1


def test_concurrent_runs_of_a_crawl_leave_exact_sums(tmp_path):
    root = str(tmp_path / "lake")
    units = [(crawl, f"{n:05d}", n + 1) for crawl in ("A", "B") for n in range(24)]

    def run(unit):
        crawl, name, records = unit
        Rollup(Lake.from_url(root), "cleaned").record(crawl, name, records, records * 3, 1)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(run, units))
    rollup = Rollup(Lake.from_url(root), "cleaned")
    per_crawl = sum(n + 1 for n in range(24))
    assert rollup.crawl("A") == Totals(per_crawl, per_crawl * 3, 24, 24)
    assert rollup.every_crawl() == Totals(2 * per_crawl, 6 * per_crawl, 48, 48)
