import random
import unicodedata

import datasketch
import numpy as np
import pytest

from tokenmill.dedup.minhash import (
    _MAPPED_RANGES,
    FINEWEB_NORM,
    PLAIN_NORM,
    MinHasher,
    TextNorm,
    _code_point_table,
    _table_entry,
    band_hashes,
    content_hashes,
    normalize,
    normalize_batch,
    optimal_bands_rows,
    shingle_hash32,
    shingle_hash64,
    shingles,
)

EDGE_CASES = [
    "",
    "   \n\t ",
    "!!! ... ???",
    "one",
    "two words",
    "a b c d",
    "a b c d e",
    "a b c d e f",
    "the cat the cat the cat the cat the cat the cat",  # repeated shingles
    "Ünïcödé ＦＵＬＬＷＩＤＴＨ ΟΔΟΣ Σίσυφος ﬁne İstanbul",
    "日本語のテキスト、句読点。한국어 텍스트 ㅎㅎ",
    "Русский текст — с тире «и кавычками»",
    "soft\xadhyphen zero\u200bwidth \ufeffbom",
    "no\xa0break\u2009thin…ellipsis",
    "lone \ud800 surrogate",
    "e\u0301 cafe\u0301\n\u0301leading mark",
    "emoji 🙂🙂 and symbols $5 + 3 = 8 ©",
    "tab\tnew\nline\r\n  trailing. ",
    "Page 1 of 3,000,000: 3.14 or 1.2.3, v2 x1,y2 ٣٫١٤ ١٢٣ ５ ² ①",
    "Crème brûlée à la façon de Ñandú; Tamil இராதாநரசிம்மபுரம், 한국어",
]
NORMS = [FINEWEB_NORM, PLAIN_NORM, TextNorm(norm_numbers=False), TextNorm(norm_diacritics=False)]


def random_texts(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzéßøçΣσαβЖжж日本ㅎ한"
    vocab = ["".join(rng.choices(alphabet, k=rng.randint(1, 9))) for _ in range(300)]
    punctuation = [" ", " ", " ", ", ", ". ", "\n", " - ", "  ", "\xa0", "! "]
    texts = []
    for _ in range(count):
        words = rng.choices(vocab, k=rng.randint(0, 120))
        pieces = [w.upper() if rng.random() < 0.1 else w for w in words]
        texts.append("".join(p + rng.choice(punctuation) for p in pieces))
    return texts


def reference_normalize(text: str, norm: TextNorm = FINEWEB_NORM) -> str:
    """Character-by-character statement of the normalization contract."""
    from datatrove.utils.text import NUMBERS_PATTERN

    def without_marks(char: str) -> str:
        kept = [c for c in unicodedata.normalize("NFD", char) if unicodedata.category(c) != "Mn"]
        return "".join(kept) if len(kept) <= 1 else char

    def mapped(char: str) -> str:
        if norm.norm_diacritics:
            char = without_marks(char)
        category = unicodedata.category(char) if char else "Cf"
        if category[0] in "PSZ" or category in ("Cc", "Cs") or char.isspace():
            return " "
        return "" if category == "Cf" else char

    text = unicodedata.normalize("NFKC", text)
    if norm.norm_numbers:
        text = NUMBERS_PATTERN.sub("0", text)
    lowered = text.lower()
    return " ".join(word for word in "".join(map(mapped, lowered)).split(" ") if word)


def datasketch_signature(hasher: MinHasher, text: str) -> np.ndarray:
    minhash = datasketch.MinHash(
        num_perm=hasher.num_perm, seed=hasher.seed, scheme=hasher.scheme, hashfunc=hasher.hashfunc
    )
    grams = shingles(text, hasher.ngram, hasher.norm)
    minhash.update_batch([shingle.encode("utf-8") for shingle in grams])
    return minhash.hashvalues


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("text", EDGE_CASES + random_texts(50))
def test_normalize_matches_character_reference(text, norm):
    assert normalize(text, norm) == reference_normalize(text, norm)


def test_numbers_and_marks_match_reference_on_random_strings():
    """Digit runs, decimal separators, format characters and marks in every arrangement, also
    across document boundaries of a batch."""
    rng = random.Random(3)
    pieces = ["1", "23", "٣", "５", ".", ",", "٫", "-", " ", "\u200b", "\u0301", "a", "é", "\n"]
    texts = ["".join(rng.choices(pieces, k=rng.randint(0, 30))) for _ in range(500)]
    for norm in NORMS:
        assert normalize_batch(texts, norm) == [reference_normalize(t, norm) for t in texts]


def test_normalize_examples():
    assert normalize("  Hello,World!  It's\tFINE…\n") == "hello world it s fine"
    assert normalize("ＡＢＣ ﬁ") == "abc fi"
    assert normalize("ΟΔΟΣ") == "οδος"
    assert normalize("soft\xadhyphen") == "softhyphen"
    assert normalize("") == normalize(" . ") == ""
    assert normalize("Café 1,000,000 3.14 v2 2019-06-19") == "cafe 0 0 0 v0 0 0 0"
    assert normalize("Café 1,000 v2", PLAIN_NORM) == "café 1 000 v2"


def test_fineweb_norm_gives_datatrove_words_on_plain_text():
    """Where datatrove's punctuation list covers the text's punctuation and spaCy splits
    nothing further, our words are those of datatrove's simplify_text + English tokenizer."""
    from datatrove.utils.text import simplify_text
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    tokenizer = load_word_tokenizer("en")
    texts = [
        "Posted on June 3, 2019 by Mr. Smith: the café's 2nd-floor room (No. 12) costs $4.50!",
        "Crème brûlée à la façon de Ñandú; tamil இராதாநரசிம்மபுரம் ΣΟΦΟΣ\n\nPage 2 of 10 » next",
        "1.2.3 and 1,000,000 and ٣٫١٤ and ５ — “quoted” [brackets] {braces} <tags> a|b",
    ]
    for text in texts:
        assert normalize(text).split(" ") == tokenizer.word_tokenize(simplify_text(text))


def test_normalize_batch_equals_single():
    texts = EDGE_CASES + random_texts(30, seed=1)
    for norm in NORMS:
        assert normalize_batch(texts, norm) == [normalize(text, norm) for text in texts]
    assert normalize_batch([None]) == [""]


def test_shingles_edge_cases():
    assert shingles("") == []
    assert shingles(" ,. ") == []
    assert shingles("One") == ["one"]
    assert shingles("a b c", ngram=5) == ["a b c"]
    assert shingles("a b c d e f", ngram=5) == ["a b c d e", "b c d e f"]
    assert shingles("x x x x x x", ngram=5) == ["x x x x x", "x x x x x"]


def test_shingle_hashes_are_functions_of_bytes():
    assert shingle_hash32(b"abc") == shingle_hash64(b"abc") >> 32
    assert shingle_hash64(b"a") != shingle_hash64(b"\x00a")
    assert 0 <= shingle_hash32("été".encode()) < 2**32


@pytest.mark.parametrize(
    ("num_perm", "ngram", "seed", "scheme"),
    [
        (112, 5, 1, "affine32"),
        (64, 3, 42, "affine32"),
        (128, 1, 7, "affine32"),
        (112, 5, 1, "affine64"),
        (48, 2, 3, "affine64"),
        (112, 5, 1, "legacy"),
        (32, 4, 99, "legacy"),
    ],
)
@pytest.mark.parametrize("norm", [FINEWEB_NORM, PLAIN_NORM])
def test_signatures_equal_datasketch(num_perm, ngram, seed, scheme, norm):
    hasher = MinHasher(num_perm=num_perm, ngram=ngram, seed=seed, scheme=scheme, norm=norm)
    texts = EDGE_CASES + random_texts(40, seed=seed)
    signatures = hasher.signatures(texts)
    assert signatures.shape == (len(texts), num_perm)
    for text, signature in zip(texts, signatures, strict=True):
        expected = datasketch_signature(hasher, text)
        assert signature.dtype == expected.dtype
        np.testing.assert_array_equal(signature, expected, err_msg=repr(text))


def datatrove_signer(num_perm: int, ngram: int, seed: int):
    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature
    from datatrove.utils.hashing import HashConfig

    config = MinhashConfig(n_grams=ngram, num_buckets=num_perm // 8, hashes_per_bucket=8,
                           seed=seed, hash_config=HashConfig(64, "sha1"))  # fmt: skip
    return MinhashDedupSignature(output_folder="unused", config=config)


@pytest.mark.parametrize(("num_perm", "ngram", "seed"), [(112, 5, 1), (64, 3, 42), (16, 1, 7)])
def test_datatrove_scheme_equals_datatrove_signature_step(num_perm, ngram, seed):
    """Scheme "datatrove" over our n-grams == datatrove's get_signature over the same n-grams
    hashed by its own sha1 shingle hash."""
    signer = datatrove_signer(num_perm, ngram, seed)
    hasher = MinHasher(num_perm=num_perm, ngram=ngram, seed=seed, scheme="datatrove")
    texts = [t for t in EDGE_CASES + random_texts(40, seed=seed) if shingles(t, ngram)]
    for text, signature in zip(texts, hasher.signatures(texts), strict=True):
        grams = np.array([signer._hash_func(g) for g in shingles(text, ngram)], dtype=np.uint64)
        expected = np.concatenate(signer.get_signature(grams.reshape(-1, 1)))
        assert signature.dtype == np.uint64
        np.testing.assert_array_equal(signature, expected, err_msg=repr(text))


def test_datatrove_scheme_end_to_end_where_words_agree():
    """On text whose words datatrove's simplify_text + spaCy split as we do, the signatures
    are datatrove's own, from the raw text."""
    signer = datatrove_signer(112, 5, 1)
    texts = [
        "Posted on June 3, 2019 by Mr. Smith: the café's 2nd-floor room (No. 12) costs $4.50!",
        "Crème brûlée à la façon de Ñandú; ΣΟΦΟΣ\n\nPage 2 of 10 » next page of the story",
    ]
    signatures = MinHasher(scheme="datatrove").signatures(texts)
    for text, signature in zip(texts, signatures, strict=True):
        expected = np.concatenate(signer.get_signature(signer.get_shingles(text)))
        np.testing.assert_array_equal(signature, expected)


def test_signatures_independent_of_batching():
    texts = random_texts(60, seed=5) + EDGE_CASES
    expected = MinHasher().signatures(texts)
    small = MinHasher()
    small.docs_per_batch = 7
    small.permutation_block = 112 * 13  # 13 shingles per block: documents straddle blocks
    np.testing.assert_array_equal(small.signatures(texts), expected)


def test_empty_document_has_all_max_signature():
    for scheme, maximum in [
        ("affine32", 2**32 - 1),
        ("affine64", 2**64 - 1),
        ("legacy", 2**32 - 1),
        ("datatrove", 2**64 - 1),
    ]:
        signature = MinHasher(scheme=scheme).signatures(["", "text"])[0]
        assert (signature == maximum).all()


def test_signatures_accept_arrow_arrays():
    pa = pytest.importorskip("pyarrow")
    texts = ["some text here", None, "more words"]
    hasher = MinHasher()
    np.testing.assert_array_equal(
        hasher.signatures(pa.array(texts)), hasher.signatures(["some text here", "", "more words"])
    )


def test_band_hashes_equal_iff_band_rows_equal():
    rng = np.random.default_rng(0)
    signatures = rng.integers(0, 2**32, size=(4, 112), dtype=np.uint64).astype(np.uint32)
    signatures[1] = signatures[0]
    signatures[2] = signatures[0]
    signatures[2, 8 * 3 + 5] ^= 1  # differs from doc 0 only in band 3
    bands = band_hashes(signatures, bands=14, rows=8)
    assert bands.shape == (4, 14) and bands.dtype == np.uint64
    assert (bands[0] == bands[1]).all()
    assert (bands[0] == bands[2]).sum() == 13 and bands[0, 3] != bands[2, 3]
    assert not (bands[0] == bands[3]).any()


def test_band_hashes_ignore_band_position_and_validate_shape():
    signatures = np.zeros((1, 16), dtype=np.uint32)
    bands = band_hashes(signatures, bands=2, rows=8)
    assert bands[0, 0] == bands[0, 1]  # same rows in different bands: same key (columns apart)
    with pytest.raises(ValueError):
        band_hashes(signatures, bands=3, rows=8)


@pytest.mark.parametrize(
    ("threshold", "num_perm"), [(0.5, 128), (0.7, 112), (0.85, 112), (0.9, 64)]
)
def test_optimal_bands_rows_matches_datasketch(threshold, num_perm):
    lsh = datasketch.MinHashLSH(threshold=threshold, num_perm=num_perm)
    assert optimal_bands_rows(threshold, num_perm) == (lsh.b, lsh.r)


@pytest.mark.parametrize("num_perm", [8, 16, 32, 50, 64, 100, 112, 128, 200, 256])
def test_optimal_bands_rows_matches_datasketch_over_a_grid(num_perm):
    from datasketch.lsh import _optimal_param  # the reference: private, so only in the test

    thresholds = [t / 100 for t in range(5, 100, 5)] + [0.01, 0.33, 0.77, 0.81, 0.83, 0.87, 0.99]
    for threshold in thresholds:
        expected = _optimal_param(threshold, num_perm, 0.5, 0.5)
        assert optimal_bands_rows(threshold, num_perm) == expected, threshold


def test_content_hashes_equal_after_normalization_only_differences():
    hashes = content_hashes(
        [
            "Hello, World! This is   a test.",
            "hello world this is a test",
            "HELLO\nWORLD — this is a TEST!!!",
            "Ｈｅｌｌｏ ｗｏｒｌｄ: this\xa0is a test…",
            "hello world this is a best",
            "",
            " ... ",
        ]
    )
    assert hashes.dtype == np.uint64
    assert len(set(hashes[:4].tolist())) == 1
    assert hashes[4] != hashes[0]
    assert hashes[5] == hashes[6]


def test_signatures_and_content_hashes_match_separate_calls():
    texts = random_texts(20, seed=9) + EDGE_CASES
    hasher = MinHasher()
    hasher.docs_per_batch = 8
    signatures, hashes = hasher.signatures_and_content_hashes(texts)
    np.testing.assert_array_equal(signatures, hasher.signatures(texts))
    np.testing.assert_array_equal(hashes, content_hashes(texts))


@pytest.mark.parametrize("norm", [PLAIN_NORM, FINEWEB_NORM])
def test_code_point_table_skips_only_identity_planes(norm):
    table = _code_point_table(norm)
    skipped = np.ones(len(table), dtype=bool)
    for code_points in _MAPPED_RANGES:
        skipped[code_points.start : code_points.stop] = False
    skipped_code_points = np.flatnonzero(skipped).tolist()
    assert [_table_entry(c, norm) for c in skipped_code_points] == skipped_code_points
    np.testing.assert_array_equal(table[skipped_code_points], skipped_code_points)
