"""Evaluation sets a deployment declares: files it provides (JSONL, Parquet or plain text), read
in batches of items, each item's text taken from the named fields. Nothing is downloaded: a set is
a lake key, or a path or URI under a prefix in ``TOKENMILL_EVAL_PATHS`` (or inside the lake)."""

from __future__ import annotations

import gzip
import hashlib
import io
import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from tokenmill.runtime.stage import declared_mapping
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import check_name
from tokenmill.storage.locations import open_location

EVAL_PATHS_ENV = "TOKENMILL_EVAL_PATHS"
FORMATS = ("jsonl", "parquet", "text")
ITEMS_PER_BATCH = 4096
READ_CHUNK = 8 << 20


class EvalSetError(ValueError):
    """A set that cannot be read: the message names its file and the reason."""


@dataclass(frozen=True)
class EvalSet:
    """A declared evaluation set: ``path`` (a lake key, or a path or URI under an allowed
    prefix), ``fields`` holding an item's text (joined by a new line; a list's values too),
    ``id_field`` naming an item (default: its number in the file), ``format`` (default: by the
    file's suffix) and, optionally, the file's SHA-256, pinned."""

    name: str
    path: str
    fields: tuple[str, ...] = ("text",)
    id_field: str | None = None
    format: str | None = None
    sha256: str | None = None

    KEYS = ("name", "path", "fields", "id_field", "format", "sha256")

    @classmethod
    def parse(cls, value: Any, where: str) -> EvalSet:
        if isinstance(value, EvalSet):
            return value
        value = declared_mapping(value, cls.KEYS, where, "{name, path, fields}")
        for key in ("name", "path"):
            if not isinstance(value.get(key), str) or not value[key]:
                raise ValueError(f"{where}: {key} is required (a string)")
        check_name(value["name"], f"{where}.name")
        fields = value.get("fields", ["text"])
        if isinstance(fields, str):
            fields = [fields]
        if not fields or not all(isinstance(f, str) and f for f in fields):
            raise ValueError(f"{where}.fields: a list of field names, got {fields!r}")
        kind = value.get("format") or _format_of(value["path"])
        if kind is None:
            raise ValueError(
                f"{where}.format: not given, and the suffix of {value['path']!r} is none of "
                f".jsonl, .json, .parquet, .txt (or .gz after them); say one of {list(FORMATS)}"
            )
        if kind not in FORMATS:
            raise ValueError(f"{where}.format: {kind!r} is not one of {list(FORMATS)}")
        pin = value.get("sha256")
        if pin is not None and (not isinstance(pin, str) or len(pin) != 64):
            raise ValueError(f"{where}.sha256: a SHA-256 in hex (64 characters), got {pin!r}")
        return cls(value["name"], value["path"], tuple(fields), value.get("id_field"), kind, pin)

    def record(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(self).items() if v}


def _format_of(path: str) -> str | None:
    name = path.lower().removesuffix(".gz")
    for suffix, kind in ((".jsonl", "jsonl"), (".json", "jsonl"), (".parquet", "parquet")):
        if name.endswith(suffix):
            return kind
    return "text" if name.endswith(".txt") else None


@contextmanager
def opened(lake: Lake, evalset: EvalSet) -> Iterator:
    """A binary stream of the set's file."""
    try:
        if "://" not in evalset.path and not evalset.path.startswith("/"):
            if not lake.exists(evalset.path):
                raise FileNotFoundError(f"no such file in the lake {lake.url}")
            with lake.open_input(evalset.path) as f:
                yield f
        else:
            with open_location(lake, evalset.path, EVAL_PATHS_ENV, "evaluation set") as f:
                yield f
    except OSError as error:
        raise EvalSetError(
            f"evaluation set {evalset.name}: {evalset.path!r} cannot be read: {error}"
        ) from None


def sha256_of(lake: Lake, evalset: EvalSet) -> str:
    """The set file's SHA-256 (read once, in chunks), checked against its pin."""
    digest = hashlib.sha256()
    with opened(lake, evalset) as f:
        while chunk := f.read(READ_CHUNK):
            digest.update(chunk)
    found = digest.hexdigest()
    if evalset.sha256 and evalset.sha256 != found:
        raise EvalSetError(
            f"evaluation set {evalset.name}: {evalset.path!r} has SHA-256 {found}, not the "
            f"pinned {evalset.sha256}"
        )
    return found


def read_items(lake: Lake, evalset: EvalSet) -> Iterator[tuple[list[str], list[str]]]:
    """The set's items in batches: (ids, texts). An item whose fields are all missing or empty
    has the text ""; a file none of whose items has one of the fields fails, naming them."""
    seen = {field: False for field in evalset.fields}
    read = {"jsonl": _jsonl_rows, "parquet": _parquet_rows, "text": _text_rows}[evalset.format]
    number = 0
    with opened(lake, evalset) as f:
        for rows in read(f, evalset):
            ids, texts = [], []
            for row in rows:
                parts = []
                for field in evalset.fields:
                    value = row.get(field)
                    if value not in (None, "", []):
                        seen[field] = True
                        parts.append(_text_of(value))
                ident = row.get(evalset.id_field) if evalset.id_field else None
                ids.append(str(number) if ident is None else str(ident))
                texts.append("\n".join(parts))
                number += 1
            yield ids, texts
    if number and not any(seen.values()):
        raise EvalSetError(
            f"evaluation set {evalset.name}: no item of {evalset.path!r} has the fields "
            f"{list(evalset.fields)}"
        )


def _text_of(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "\n".join(_text_of(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(_text_of(v) for v in value.values())
    return str(value)


def _lines(f, evalset: EvalSet) -> Iterator[str]:
    stream = io.BufferedReader(_Raw(f), READ_CHUNK)
    if evalset.path.lower().endswith(".gz"):
        stream = gzip.GzipFile(fileobj=stream)
    try:
        yield from io.TextIOWrapper(stream, encoding="utf-8")
    except (UnicodeDecodeError, OSError, EOFError) as error:
        raise EvalSetError(f"evaluation set {evalset.name}: {evalset.path!r}: {error}") from None


def _batched(rows: Iterator[dict]) -> Iterator[list[dict]]:
    while batch := list(itertools.islice(rows, ITEMS_PER_BATCH)):
        yield batch


def _jsonl_rows(f, evalset: EvalSet) -> Iterator[list[dict]]:
    def rows() -> Iterator[dict]:
        for number, line in enumerate(_lines(f, evalset), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise EvalSetError(
                    f"evaluation set {evalset.name}: {evalset.path!r} line {number} is not "
                    f"JSON: {error}"
                ) from None
            yield row if isinstance(row, dict) else {"text": row}

    return _batched(rows())


def _text_rows(f, evalset: EvalSet) -> Iterator[list[dict]]:
    rows = ({evalset.fields[0]: line.rstrip("\n")} for line in _lines(f, evalset) if line.strip())
    return _batched(rows)


def _parquet_rows(f, evalset: EvalSet) -> Iterator[list[dict]]:
    try:
        parquet = pq.ParquetFile(f)
        names = set(parquet.schema_arrow.names)
        columns = [c for c in (*evalset.fields, evalset.id_field) if c and c in names]
        for batch in parquet.iter_batches(batch_size=ITEMS_PER_BATCH, columns=columns):
            yield batch.to_pylist()
    except (OSError, ValueError) as error:
        raise EvalSetError(f"evaluation set {evalset.name}: {evalset.path!r}: {error}") from None


class _Raw(io.RawIOBase):
    """An Arrow input stream as a raw Python stream."""

    def __init__(self, f):
        self.f = f

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.f.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
