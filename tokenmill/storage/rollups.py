"""Running totals of a stage's output over its partitions (records, bytes and tokens so far in
a crawl and in every crawl), kept in the lake beside the output, so a partition's run reports
them without reading any other partition's output or marker.

Each partition's totals are the name of an empty object, so one listing reads a whole crawl:

    <zone>/_rollup/<crawl>/<part>/<records>-<bytes>-<tokens>     a partition's own
    <zone>/_rollup/_crawls/<crawl>/<records>-<bytes>-<tokens>-<parts>   the crawl's sum

A partition's run replaces its own entry, so running it again counts it once (a partition has
two entries only between a run's write of its new one and its removal of the old one). Runs of
one crawl never overwrite each other's entries, and each writes the crawl's sum again until the
crawl's entries stay as it listed them around its write: after concurrent runs, the last sum
written holds every entry. Crawl names never start with `_`, so `_crawls` is no crawl.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenmill.storage.lake import Lake

ROLLUP = "_rollup"
CRAWLS = "_crawls"
# Rewrites of the crawl's sum while other partitions of the crawl keep changing its entries:
# each round lists afresh, so a crawl whose entries settle is exact after its last round.
ROUNDS = 8


@dataclass(frozen=True)
class Totals:
    records: int = 0
    bytes: int = 0
    tokens: int = 0
    parts: int = 0  # the partitions counted

    def __add__(self, other: Totals) -> Totals:
        return Totals(
            self.records + other.records,
            self.bytes + other.bytes,
            self.tokens + other.tokens,
            self.parts + other.parts,
        )


@dataclass(frozen=True)
class Rollup:
    """The totals of the stage whose output is in `zone` (a recipe's through its lake view)."""

    lake: Lake
    zone: str

    def record(self, crawl: str, part: str, records: int, size: int, tokens: int = 0):
        """Set the totals of partition `part` of `crawl` (a unit, or the crawl itself for a
        stage of whole crawls), replacing what it had; the crawl's and every crawl's totals
        after it, as (crawl, every crawl)."""
        own = f"{self._crawl(crawl)}/{part}"
        entry = f"{own}/{records}-{size}-{tokens}"
        listed = self.lake.list(own)
        if entry not in listed:
            self.lake.write_bytes(entry, b"")
        for key in listed:
            if key != entry:
                self.lake.delete(key)
        return self._sum_crawl(crawl), self.every_crawl()

    def crawl(self, crawl: str) -> Totals:
        """The sum of the crawl's partitions' entries, as listed now."""
        return _sum_entries(self.lake.list(self._crawl(crawl)))

    def every_crawl(self) -> Totals:
        """The sum of every crawl's last written sum."""
        sums: dict[str, Totals] = {}
        for key in self.lake.list(f"{self.zone}/{ROLLUP}/{CRAWLS}"):
            crawl, name = key.rsplit("/", 2)[-2:]
            sums[crawl] = max(sums.get(crawl, Totals()), _totals(name), key=_order)
        return sum(sums.values(), Totals())

    def _crawl(self, crawl: str) -> str:
        return f"{self.zone}/{ROLLUP}/{crawl}"

    def _sum_crawl(self, crawl: str) -> Totals:
        sums = f"{self.zone}/{ROLLUP}/{CRAWLS}/{crawl}"
        listed = self.lake.list(self._crawl(crawl))
        for _ in range(ROUNDS):
            total = _sum_entries(listed)
            name = f"{total.records}-{total.bytes}-{total.tokens}-{total.parts}"
            written = self.lake.list(sums)
            if f"{sums}/{name}" not in written:
                self.lake.write_bytes(f"{sums}/{name}", b"")
            for key in written:
                if key != f"{sums}/{name}":
                    self.lake.delete(key)
            again = self.lake.list(self._crawl(crawl))
            if again == listed:
                return total
            listed = again
        return _sum_entries(listed)


def _sum_entries(keys: list[str]) -> Totals:
    """The sum of one entry per partition (`keys`: `<part>/<name>` under the crawl)."""
    entries: dict[str, Totals] = {}
    for key in keys:
        part, name = key.rsplit("/", 2)[-2:]
        entries[part] = max(entries.get(part, Totals()), _totals(f"{name}-1"), key=_order)
    return sum(entries.values(), Totals())


def _totals(name: str) -> Totals:
    return Totals(*(int(field) for field in name.split("-")))


def _order(totals: Totals) -> tuple[int, int, int, int]:
    """Of two sums or entries of one crawl or partition, only while a writer replaces one, the
    one of more partitions, then of more records: either way the next listing settles it."""
    return (totals.parts, totals.records, totals.bytes, totals.tokens)
