"""Real documentation pages for `bench_clean.py stage-vs-bare --pages`: the HTML manuals Debian
ships (Python 3.11, PostgreSQL 15, Rust 1.63), downloaded with apt-get and unpacked here.

    uv run python benchmarks/doc_pages.py DIR [--pages 5001]
    uv run python benchmarks/doc_pages.py DIR --package python-django-doc

DIR/pages/ then holds ``--pages`` links: every Python and PostgreSQL page and a random sample
(seed 7) of the Rust pages (the standard library's API reference and the books) for the rest.
With ``--package``, that Debian package's pages instead, unpacked in DIR/unpacked (pass it as
``--pages``): another site's manual, to measure on pages nothing was tuned on.
Debian only (apt-get download, dpkg -x); nothing is installed.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
from pathlib import Path

PACKAGES = ("python3.11-doc", "postgresql-doc-15", "rust-doc")
MANUALS = ("python3.11/html", "postgresql-doc-15/html", "rust-doc/html")


def html_files(folder: Path) -> list[Path]:
    found = (Path(d, n) for d, _, names in os.walk(folder) for n in names if n.endswith(".html"))
    return [Path(p) for p in sorted(map(str, found))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--pages", type=int, default=5001)
    parser.add_argument("--package", help="a Debian package of HTML pages, unpacked alone")
    arguments = parser.parse_args()
    root = arguments.dir.resolve()
    debs, unpacked, pages = root / "debs", root / "unpacked", root / "pages"
    debs.mkdir(parents=True, exist_ok=True)
    packages = [arguments.package] if arguments.package else PACKAGES
    subprocess.run(["apt-get", "download", *packages], cwd=debs, check=True)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg", "-x", str(deb), str(unpacked)], check=True)
    if arguments.package:
        print(f"{len(html_files(unpacked))} pages in {unpacked}")
        return
    python, postgres, rust = (html_files(unpacked / "usr/share/doc" / m) for m in MANUALS)
    chosen = python + postgres
    chosen += random.Random(7).sample(rust, max(0, arguments.pages - len(chosen)))
    pages.mkdir(exist_ok=True)
    for index, path in enumerate(chosen[: arguments.pages]):
        link = pages / f"{index:05d}.html"
        link.unlink(missing_ok=True)
        link.symlink_to(path.resolve())
    size = sum(p.stat().st_size for p in chosen[: arguments.pages])
    print(f"{min(len(chosen), arguments.pages)} pages, {size / 1e6:.1f} MB of HTML in {pages}")


if __name__ == "__main__":
    main()
