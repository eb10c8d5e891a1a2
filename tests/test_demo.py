"""The demo crawl generator: determinism, WARC layout, ground truth and page kinds.

The WARC reading here is deliberately self-contained (zlib + a few lines of parsing) so the test
checks the files themselves rather than the project's own reader.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import py3langid
import pytest

from tokenmill.demo.crawl import FOREIGN_LOCALES, generate_demo_crawl, main, sample_articles

FILES, PAGES_PER_FILE = 2, 120
TOTAL = FILES * PAGES_PER_FILE
STOP_WORDS = {"the", "be", "to", "of", "and", "that", "have", "with"}
ARTICLE = re.compile(r"<article[^>]*>(.*?)</article>", re.S)
TEXT_ELEMENT = re.compile(r"<(h1|h2|p|li)>(.*?)</\1>", re.S)
TAG = re.compile(r"<[^>]+>")
META_CHARSET = re.compile(rb'<meta charset="([^"]+)">')


# --------------------------------------------------------------------------------------------
# A minimal gzip-member-per-record WARC reader


def read_member(data: bytes, offset: int, chunk: int = 1 << 16) -> tuple[bytes, int]:
    """Decompress the gzip member starting at ``offset``; returns (payload, end offset)."""
    inflater = zlib.decompressobj(wbits=31)
    parts, position = [], offset
    while not inflater.eof:
        if position >= len(data):
            raise zlib.error("member ends before its gzip trailer")
        piece = data[position : position + chunk]
        parts.append(inflater.decompress(piece))
        position += len(piece)
    return b"".join(parts), position - len(inflater.unused_data)


def next_member_start(data: bytes, start: int) -> int:
    """Resynchronize after a corrupt member: the next offset holding a decodable member."""
    position = data.find(b"\x1f\x8b\x08", start)
    while position != -1:
        try:
            read_member(data, position)
            return position
        except zlib.error:
            position = data.find(b"\x1f\x8b\x08", position + 1)
    return len(data)


def walk_members(data: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, payload) of every member in order; payload is None for undecodable members."""
    members, offset = [], 0
    while offset < len(data):
        try:
            payload, end = read_member(data, offset)
        except zlib.error:
            members.append((offset, None))
            offset = next_member_start(data, offset + 1)
            continue
        members.append((offset, payload))
        offset = end
    return members


def parse_record(payload: bytes) -> tuple[dict[str, str], bytes, bytes]:
    """(WARC headers, block as stored, bytes after the block) of one uncompressed record."""
    head, _, rest = payload.partition(b"\r\n\r\n")
    version, *lines = head.decode("utf-8").split("\r\n")
    assert version == "WARC/1.1"
    headers = dict(line.split(": ", 1) for line in lines)
    length = int(headers["Content-Length"])
    return headers, rest[:length], rest[length:]


def split_http(block: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = block.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    return status, dict(line.split(": ", 1) for line in lines), body


# --------------------------------------------------------------------------------------------
# Fixtures


def _generate(root: Path, seed: int) -> tuple[Path, dict]:
    generate_demo_crawl(
        root / "warc", root / "truth.json", files=FILES, pages_per_file=PAGES_PER_FILE, seed=seed
    )
    return root, json.loads((root / "truth.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def crawl(tmp_path_factory) -> tuple[Path, dict]:
    return _generate(tmp_path_factory.mktemp("crawl"), seed=0)


@pytest.fixture(scope="module")
def records(crawl) -> dict[str, tuple[dict[str, str], bytes]]:
    """Truth URL -> (WARC headers, HTTP block) for every decodable response record."""
    root, truth = crawl
    found = {}
    for name in truth["files"]:
        for _, payload in walk_members((root / "warc" / name).read_bytes()):
            if payload is not None:
                headers, block, _ = parse_record(payload)
                if headers["WARC-Type"] == "response":
                    found[headers["WARC-Target-URI"]] = (headers, block)
    return found


def pages_of(truth: dict, kind: str) -> list[dict]:
    """Pages of ``kind`` exactly, or of any subtype when ``kind`` is a family like "spam"."""
    return [p for p in truth["pages"] if p["kind"] == kind or p["kind"].startswith(kind + ":")]


def body_of(records, page: dict) -> bytes:
    return split_http(records[page["url"]][1])[2]


def article_text(document: str) -> str:
    match = ARTICLE.search(document)
    assert match, "page has no <article>"
    return "\n".join(html.unescape(text) for _, text in TEXT_ELEMENT.findall(match[1]))


def words(text: str) -> list[str]:
    return re.sub(r"[^\w\s]", "", text.lower()).split()


def jaccard(first: str, second: str, n: int = 5) -> float:
    def shingles(text: str) -> set[tuple[str, ...]]:
        tokens = words(text)
        return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}

    a, b = shingles(first), shingles(second)
    return len(a & b) / len(a | b)


# --------------------------------------------------------------------------------------------
# Determinism


def test_same_seed_gives_identical_bytes_even_in_another_process(crawl, tmp_path):
    root, truth = crawl
    # A different PYTHONHASHSEED catches any dependence on set or str-hash ordering.
    command = [sys.executable, "-m", "tokenmill.demo.crawl", "--out", str(tmp_path / "warc")]
    command += ["--truth", str(tmp_path / "truth.json"), "--files", str(FILES)]
    command += ["--pages-per-file", str(PAGES_PER_FILE), "--seed", "0"]
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run(command, check=True, env=env, capture_output=True)
    assert (tmp_path / "truth.json").read_bytes() == (root / "truth.json").read_bytes()
    for name in truth["files"]:
        assert (tmp_path / "warc" / name).read_bytes() == (root / "warc" / name).read_bytes()


def test_different_seed_gives_different_crawl(crawl, tmp_path):
    root, truth = crawl
    other, other_truth = _generate(tmp_path, seed=1)
    assert other_truth["files"] == truth["files"]
    for name in truth["files"]:
        assert (other / "warc" / name).read_bytes() != (root / "warc" / name).read_bytes()


# --------------------------------------------------------------------------------------------
# WARC layout and truth offsets


def test_files_are_sequences_of_single_record_members(crawl):
    root, truth = crawl
    assert truth["files"] == [f"CC-MAIN-DEMO-2026-01-{i:05d}.warc.gz" for i in range(FILES)]
    for name in truth["files"]:
        members = walk_members((root / "warc" / name).read_bytes())
        corrupt = [offset for offset, payload in members if payload is None]
        expected = [
            p["offset"] for p in pages_of(truth, "broken:corrupt_gzip") if p["file"] == name
        ]
        assert corrupt == expected
        types = []
        for _, payload in filter(lambda member: member[1] is not None, members):
            headers, block, tail = parse_record(payload)
            types.append(headers["WARC-Type"])
            assert re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", headers["WARC-Record-ID"])
            assert headers["WARC-Date"].startswith("2026-01-")
            if len(block) == int(headers["Content-Length"]):
                assert tail == b"\r\n\r\n"  # exactly one record per member
        assert types[0] == "warcinfo"
        assert set(types[1:]) == {"request", "response"}


def test_truth_offsets_point_at_their_records(crawl):
    root, truth = crawl
    data = {name: (root / "warc" / name).read_bytes() for name in truth["files"]}
    assert len(truth["pages"]) == TOTAL
    for page in truth["pages"]:
        if page["kind"] == "broken:corrupt_gzip":
            with pytest.raises(zlib.error):
                read_member(data[page["file"]], page["offset"])
            continue
        headers, _, _ = parse_record(read_member(data[page["file"]], page["offset"])[0])
        assert headers["WARC-Type"] == "response"
        assert headers["WARC-Record-ID"] == page["record_id"]
        assert headers["WARC-Target-URI"] == page["url"]


def test_every_response_record_is_in_the_truth_once(crawl, records):
    _, truth = crawl
    urls = [page["url"] for page in truth["pages"]]
    assert len(set(urls)) == len(urls)
    decodable = {page["url"] for page in truth["pages"] if page["kind"] != "broken:corrupt_gzip"}
    assert set(records) == decodable
    assert len({page["record_id"] for page in truth["pages"]}) == TOTAL


# --------------------------------------------------------------------------------------------
# Kinds


def test_kind_counts(crawl):
    _, truth = crawl
    counts = Counter(page["kind"].split(":")[0] for page in truth["pages"])
    expected_shares = {
        "good": (0.50, 0.70),
        "foreign": (0.07, 0.13),
        "exact_dup": (0.05, 0.11),
        "near_dup": (0.05, 0.11),
        "spam": (0.05, 0.11),
        "non_html": (0.01, 0.04),
    }
    for family, (low, high) in expected_shares.items():
        assert low <= counts[family] / TOTAL <= high, (family, counts[family])
    assert counts["broken"] >= 5
    kinds = {page["kind"] for page in truth["pages"]}
    spam = {"keyword_stuffing", "too_short", "lorem_ipsum", "symbols", "link_list"}
    broken = {"binary_as_html", "truncated_record", "corrupt_gzip", "mislabeled_charset"}
    assert {f"spam:{name}" for name in spam} <= kinds
    assert {f"broken:{name}" for name in broken | {"empty_body"}} <= kinds
    assert {page["file"] for page in truth["pages"] if page["kind"].startswith("broken:")} == set(
        truth["files"]
    )


def test_exact_duplicates_repeat_the_article_verbatim(crawl, records):
    _, truth = crawl
    dups = pages_of(truth, "exact_dup")
    assert dups
    for page in dups:
        copy = article_text(body_of(records, page).decode("utf-8"))
        original = article_text(body_of(records, {"url": page["group"]}).decode("utf-8"))
        assert copy == original
        assert page["url"] != page["group"]


def test_near_duplicates_are_close_but_not_equal(crawl, records):
    _, truth = crawl
    by_url = {page["url"]: page for page in truth["pages"]}
    near = pages_of(truth, "near_dup")
    assert near
    for page in near:
        assert by_url[page["group"]]["kind"] == "good"
        copy = article_text(body_of(records, page).decode("utf-8"))
        original = article_text(body_of(records, {"url": page["group"]}).decode("utf-8"))
        assert copy != original
        assert page["jaccard"] >= 0.85
        assert jaccard(copy, original) == pytest.approx(page["jaccard"], abs=1e-3)


def test_good_articles_pass_basic_quality_rules(crawl, records):
    _, truth = crawl
    for page in pages_of(truth, "good"):
        text = article_text(body_of(records, page).decode("utf-8"))
        tokens = text.split()
        assert 150 <= len(tokens) <= 1100
        assert 3 <= sum(map(len, tokens)) / len(tokens) <= 10
        assert len(STOP_WORDS & set(words(text))) >= 2
        lines = text.splitlines()
        assert len(set(lines)) == len(lines)
        assert sum(line.endswith((".", "!", "?")) for line in lines) / len(lines) >= 0.5
        lowered = text.lower()
        assert "lorem ipsum" not in lowered and "javascript" not in lowered and "{" not in text


def test_spam_pages_fail_their_filter(crawl, records):
    _, truth = crawl
    for page in pages_of(truth, "spam"):
        document = body_of(records, page).decode("utf-8")
        visible = html.unescape(TAG.sub(" ", document.split("<body>", 1)[1]))
        lines = [line.strip() for line in TAG.sub("\n", document).splitlines() if line.strip()]
        spam_type = page["kind"].split(":")[1]
        if spam_type == "keyword_stuffing":
            assert len(set(lines)) / len(lines) < 0.3
        elif spam_type == "too_short":
            assert len(visible.split()) < 30
        elif spam_type == "lorem_ipsum":
            assert "lorem ipsum" in visible.lower()
        elif spam_type == "symbols":
            tokens = visible.split()
            assert sum(token.startswith("#") for token in tokens) / len(tokens) > 0.1
        else:
            assert len(lines) >= 200
            assert sum(line.endswith((".", "!", "?")) for line in lines) / len(lines) < 0.12


def test_non_html_and_broken_payloads(crawl, records):
    _, truth = crawl
    for page in pages_of(truth, "non_html"):
        _, http_headers, body = split_http(records[page["url"]][1])
        assert not http_headers["Content-Type"].startswith("text/html")
        magic = {"application/pdf": b"%PDF-", "image/png": b"\x89PNG", "application/json": b"{"}
        assert body.startswith(magic[http_headers["Content-Type"]])
    for page in pages_of(truth, "broken:empty_body"):
        status, http_headers, body = split_http(records[page["url"]][1])
        assert status == "HTTP/1.1 200 OK" and http_headers["Content-Length"] == "0"
        assert body == b""
    for page in pages_of(truth, "broken:binary_as_html"):
        _, http_headers, body = split_http(records[page["url"]][1])
        assert http_headers["Content-Type"].startswith("text/html")
        with pytest.raises(UnicodeDecodeError):
            body.decode("utf-8")
    for page in pages_of(truth, "broken:truncated_record"):
        headers, block = records[page["url"]]
        assert len(block) < int(headers["Content-Length"])


def test_charsets_are_declared_truthfully_except_when_mislabeled(crawl, records):
    _, truth = crawl
    legacy = [p for p in truth["pages"] if p["kind"].startswith("foreign:")]
    assert {page["charset"] for page in legacy} >= {"utf-8", "iso-8859-1", "windows-1251"}
    for page in legacy:
        _, http_headers, body = split_http(records[page["url"]][1])
        assert http_headers["Content-Type"] == f"text/html; charset={page['charset']}"
        assert META_CHARSET.search(body)[1].decode() == page["charset"]
        body.decode(page["charset"])
    for page in pages_of(truth, "broken:mislabeled_charset"):
        _, http_headers, body = split_http(records[page["url"]][1])
        assert http_headers["Content-Type"] == "text/html; charset=utf-8"
        assert META_CHARSET.search(body)[1] == b"utf-8"
        assert page["charset"] != "utf-8"
        with pytest.raises(UnicodeDecodeError):
            body.decode("utf-8")


# --------------------------------------------------------------------------------------------
# Language


@pytest.mark.parametrize("language", sorted(FOREIGN_LOCALES))
def test_generated_foreign_articles_are_identified(language):
    texts = sample_articles(language, 40, seed=3)
    hits = sum(py3langid.classify(text)[0] == language for text in texts)
    assert hits / len(texts) >= 0.95


def test_foreign_pages_in_the_crawl_are_identified(crawl, records):
    _, truth = crawl
    foreign = [p for p in truth["pages"] if p["kind"].startswith("foreign:")]
    hits = 0
    for page in foreign:
        text = article_text(body_of(records, page).decode(page["charset"]))
        hits += py3langid.classify(text)[0] == page["language"]
    assert hits / len(foreign) >= 0.95


def test_cli_writes_crawl_and_truth(tmp_path, capsys):
    args = ["--out", str(tmp_path / "w"), "--truth", str(tmp_path / "t.json")]
    assert main([*args, "--files", "1", "--pages-per-file", "30", "--seed", "7"]) == 0
    summary = json.loads(capsys.readouterr().out)
    truth = json.loads((tmp_path / "t.json").read_text("utf-8"))
    assert summary["pages"] == len(truth["pages"]) == 30
    assert (tmp_path / "w" / truth["files"][0]).stat().st_size == summary["bytes"]


# --------------------------------------------------------------------------------------------
# Without faker (not in the production image)

WITHOUT_FAKER = """
import sys
sys.modules["faker"] = None  # import faker now raises ModuleNotFoundError
from tokenmill.cli.main import main
main(["demo"])
"""


def test_demo_without_faker_says_what_to_install(tmp_path):
    env = {**os.environ, "TOKENMILL_LAKE_URL": str(tmp_path / "lake")}
    command = [sys.executable, "-c", WITHOUT_FAKER]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "'faker' package" in done.stderr and "pip install faker" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "lake" / "landing").exists()
