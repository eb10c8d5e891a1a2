"""A crawl's signature files, as their markers describe them, and reading them.

Document i of a crawl is row i of its signature files taken in (unit, file) order, as in every
dedup step."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import DEDUP_SIGNATURES, QUALITY_COLUMN, Unit, band_column, part_name
from tokenmill.storage.outputs import require_committed

READ_ROWS = 1 << 20


class SignatureFileError(ValueError):
    """A signature file that is missing, truncated or not the one its marker describes."""


class PartFileError(ValueError):
    """A part file that is missing or does not belong to the run."""


@dataclass(frozen=True)
class SignatureFiles:
    """The committed signature files of a crawl in (unit, file) order, as their markers
    describe them: document i is row ``i - starts[f]`` of file f."""

    keys: tuple[str, ...]
    rows: tuple[int, ...]
    sizes: tuple[int, ...]
    digests: tuple[str, ...]
    units: tuple[str, ...]
    parts: tuple[int, ...]
    params: dict = field(default_factory=dict)

    @property
    def columns(self) -> tuple[str, ...]:
        """The key columns: the exact-content hash, then every LSH band."""
        return ("exact_hash", *(band_column(b) for b in range(self.params.get("bands", 0))))

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum([0, *self.rows])

    @property
    def n_docs(self) -> int:
        return int(sum(self.rows))

    def fingerprint(self, *plan) -> str:
        """Names the work of one clustering (its ``plan``: JSON-able values) of exactly these
        files."""
        what = [*plan, self.columns, self.keys, self.rows, self.digests]
        return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:16]

    def _file_of(self, docs: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.starts, docs, side="right") - 1

    def unit_names(self, docs: np.ndarray) -> pa.Array:
        return pa.array(self.units, pa.string()).take(self._file_of(docs))

    def part_numbers(self, docs: np.ndarray) -> pa.Array:
        return pa.array(self.parts, pa.int32()).take(self._file_of(docs))


def crawl_signatures(lake: Lake, units: list[Unit]) -> SignatureFiles:
    """The signature files of a crawl's units; all must be signed with the same parameters."""
    keys, outputs, params, names, parts = [], [], [], [], []
    for unit in units:
        marker = require_committed(
            lake, unit.prefix(DEDUP_SIGNATURES), f"dedup_signatures of {unit}"
        )
        for part in range(marker["counts"]["files"]):
            name = f"{part_name(part)}/signatures.parquet"
            if name not in marker["outputs"]:
                raise SignatureFileError(
                    f"{lake.uri(unit.prefix(DEDUP_SIGNATURES))}: its marker lists no {name}; "
                    "rematerialize dedup_signatures for that unit"
                )
            keys.append(f"{unit.part_prefix(DEDUP_SIGNATURES, part)}/signatures.parquet")
            outputs.append(marker["outputs"][name])
            params.append(marker["counts"]["params"])
            names.append(unit.name)
            parts.append(part)
    for key, own in zip(keys, params, strict=True):
        if own != params[0]:
            raise ValueError(
                f"units of {units[0].crawl} have signatures with different parameters: "
                f"{lake.uri(key)} was signed with {own}, {lake.uri(keys[0])} with "
                f"{params[0]}; rematerialize dedup_signatures for the whole crawl"
            )
    return SignatureFiles(
        keys=tuple(keys),
        rows=tuple(o["rows"] for o in outputs),
        sizes=tuple(o["bytes"] for o in outputs),
        digests=tuple(o["sha256"] for o in outputs),
        units=tuple(names),
        parts=tuple(parts),
        params=params[0] if params else {},
    )


def check_files(lake: Lake, files: SignatureFiles) -> None:
    """Every signature file is there with the size its marker gives (before any work starts)."""
    for key, size in zip(files.keys, files.sizes, strict=True):
        check_file(lake, key, size)


def check_file(lake: Lake, key: str, size: int) -> None:
    if not lake.exists(key):
        raise SignatureFileError(f"signature file {lake.uri(key)} is missing")
    if lake.size(key) != size:
        raise SignatureFileError(
            f"signature file {lake.uri(key)} has {lake.size(key)} bytes, its marker says {size} "
            "(truncated or rewritten): rematerialize its signatures"
        )


def read_batches(
    lake: Lake, files: SignatureFiles, index: int, columns: list[str]
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(first row, batch) of one signature file, checked against its marker; a missing,
    truncated or unreadable file fails naming it."""
    key, uri = files.keys[index], lake.uri(files.keys[index])
    try:
        check_file(lake, key, files.sizes[index])
        with lake.open_input(key) as f:
            parquet = pq.ParquetFile(f)
            if parquet.metadata.num_rows != files.rows[index]:
                raise SignatureFileError(
                    f"signature file {uri} has {parquet.metadata.num_rows} rows, its marker "
                    f"says {files.rows[index]}"
                )
            row = 0
            for batch in parquet.iter_batches(batch_size=READ_ROWS, columns=columns):
                yield row, batch
                row += batch.num_rows
    except (pa.ArrowException, OSError) as error:
        raise SignatureFileError(f"signature file {uri} is unreadable: {error}") from error


def gather(lake: Lake, files: SignatureFiles, docs: np.ndarray, columns: list[str]) -> pa.Table:
    """The rows of ``docs`` (ascending document indices) in ``columns``, streaming the files."""
    pieces = []
    starts = files.starts
    bounds = np.searchsorted(docs, starts[: len(files.keys) + 1])  # each file's first doc
    for index in np.flatnonzero(np.diff(bounds)).tolist():  # the files holding some of them
        rows = docs[bounds[index] : bounds[index + 1]] - starts[index]
        for row, batch in read_batches(lake, files, index, columns):
            a, b = np.searchsorted(rows, [row, row + batch.num_rows])
            if a < b:
                pieces.append(pa.Table.from_batches([batch.take(rows[a:b] - row)]))
    if not pieces:
        return pa.table({c: pa.array([], _column_type(c)) for c in columns})
    return pa.concat_tables(pieces)


def _column_type(column: str) -> pa.DataType:
    return {"doc_id": pa.string(), "warc_date": pa.string(), QUALITY_COLUMN: pa.float64()}.get(
        column, pa.uint64()
    )
