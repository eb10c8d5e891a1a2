"""Real web pages nothing was tuned on, for `bench_pay_once.py --pages` and `bench_clean.py
stage-vs-bare --pages`: the HTML responses (status 200) of ../shared's WARC files (crawls of
2008 to 2024: Heritrix, Common Crawl, ClueWeb, wget, the UK Web Archive), one file each.

    uv run python benchmarks/warc_pages.py DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

from testkit.shared_data import shared_path
from tokenmill.crawl.extract import HTML_TYPES
from tokenmill.crawl.http_messages import Skip, parse_http_head
from tokenmill.crawl.warc import BadRecord, iter_records
from tokenmill.stages.extracted import ExtractSettings

WARCS = ("corpora", "warc")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    arguments = parser.parse_args()
    folder = shared_path(*WARCS)
    if folder is None:
        raise SystemExit("../shared is absent")
    arguments.dir.mkdir(parents=True, exist_ok=True)
    max_bytes = ExtractSettings().max_html_mb << 20  # what the extractor reads at most
    written = 0
    for path in sorted(folder.glob("*.warc.gz")):
        with open(path, "rb") as stream:
            for record in iter_records(stream, name=path.name):
                if isinstance(record, BadRecord) or record.type != "response":
                    continue
                try:
                    response = parse_http_head(record.block).decoded(max_bytes)
                except Skip:
                    continue
                if response.status != 200 or response.mime not in HTML_TYPES:
                    continue
                (arguments.dir / f"{written:05d}.html").write_bytes(response.body)
                written += 1
    print(f"{written} pages in {arguments.dir}")


if __name__ == "__main__":
    main()
