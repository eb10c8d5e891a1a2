"""Worst real-size hostile records for benchmarks/hostile_cases.py: each between two good pages
in one WARC file, through raw_crawl and cleaned in a scratch lake. Each function returns ``ok``
(the hostile record dropped with a reason or cleaned, both good pages reached the filters) and
a ``detail``."""

from __future__ import annotations

import io
import tempfile
import zlib

from testkit.faults import page
from tokenmill.crawl.units import register_new_files
from tokenmill.demo.warc_writer import WarcWriter
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import cleaned, raw_crawl
from tokenmill.storage.lake import Lake

PROSE = "The committee met on Tuesday to review the budget for the new library. " * 20
MB = 1 << 20


def _stream_compress(compressor, total: int, flush) -> bytes:
    zeros, out = bytes(MB), []
    for _ in range(total // MB):
        out.append(compressor(zeros))
    out.append(flush())
    return b"".join(out)


def _through_stages(body: bytes, headers: dict[str, str]) -> dict:
    out = io.BytesIO()
    writer = WarcWriter(out, id_seed="worst")
    pages = [("before", page("ok", PROSE).encode(), None), ("hostile", body, headers)]
    pages.append(("after", page("ok", PROSE).encode(), None))
    for index, (name, data, extra) in enumerate(pages):
        writer.write_response(
            f"http://worst.example/{name}",
            data,
            date="2026-01-01T00:00:00Z",
            record_id=f"<urn:uuid:00000000-0000-0000-0002-{index:012d}>",
            extra_http_headers=extra,
        )
    with tempfile.TemporaryDirectory() as scratch:
        lake = Lake.from_url(f"{scratch}/lake")
        lake.write_bytes("landing/CC-MAIN-WORST/f.warc.gz", out.getvalue())
        (unit,) = register_new_files(lake, "CC-MAIN-WORST", files_per_unit=1).units
        run_stage_work(raw_crawl.STAGE, lake, unit=unit, workers=1)
        # as a Dagster run does: parts in worker processes under the default memory cap
        report = run_stage_work(cleaned.STAGE, lake, unit=unit, workers=1, memory_limit=4096 << 20)
        import pyarrow.parquet as pq

        with lake.open_input(f"{unit.part_prefix('cleaned', 0)}/rejected.parquet") as f:
            rejected = {r["url"]: r["filter"] for r in pq.read_table(f).to_pylist()}
        with lake.open_input(f"{unit.part_prefix('cleaned', 0)}/docs.parquet") as f:
            kept = {r["url"]: len(r["text"]) for r in pq.read_table(f).to_pylist()}
    hostile = "http://worst.example/hostile"
    good = [u for u in ("http://worst.example/before", "http://worst.example/after")]
    good_ok = all(u in kept or not rejected[u].startswith("extract:") for u in good)
    fate = rejected.get(hostile) or f"kept ({kept.get(hostile)} chars)"
    return {
        "ok": good_ok and report.records_in == 3 and len(kept) + len(rejected) == 3,
        "detail": f"hostile record: {fate}",
    }


def gzip_bomb() -> dict:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = _stream_compress(compressor.compress, 1 << 30, compressor.flush)
    return _through_stages(body, {"Content-Encoding": "gzip"})


def brotli_bomb() -> dict:
    import brotli

    compressor = brotli.Compressor(quality=5)
    body = _stream_compress(compressor.process, 1 << 30, compressor.finish)
    return _through_stages(body, {"Content-Encoding": "br"})


def nested_divs() -> dict:
    depth = 100_000
    body = ("<html><body>" + "<div>" * depth + PROSE + "</div>" * depth + "</body></html>").encode()
    return _through_stages(body, {})


def huge_document() -> dict:
    paragraphs = "".join(f"<p>{PROSE} Paragraph {i}.</p>" for i in range(4_000))
    hostile = "a" + "\u0301\u0316" * 500_000 + " " + "a." * 200_000 + "a@ " + "a-" * 100_000 + "a@"
    body = f"<html><body><article>{paragraphs}<p>{hostile}</p></article></body></html>".encode()
    return _through_stages(body, {})
