import random

import numpy as np
import pytest

from testkit.in_memory_clusters import (
    UnionFind,
    choose_survivors,
    cluster,
    jaccard,
    link_equal_keys,
    removals,
)
from tokenmill.dedup.minhash import MinHasher, band_hashes, content_hashes


def keys(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


# Six documents: 0~1 in band A, 1~2 in band B (chain), 4~5 exact duplicates, 3 alone.
EXACT = keys(100, 101, 102, 103, 200, 200)
BAND_A = keys(1, 1, 2, 3, 4, 5)
BAND_B = keys(10, 11, 11, 12, 13, 14)


def test_chain_joins_through_different_bands_and_singletons_stay():
    components = cluster(6, [EXACT, BAND_A, BAND_B])
    assert components.dtype == np.int64
    assert components.tolist() == [0, 0, 0, 3, 4, 4]


def test_result_independent_of_column_order():
    expected = cluster(6, [EXACT, BAND_A, BAND_B])
    assert cluster(6, [BAND_B, EXACT, BAND_A]).tolist() == expected.tolist()
    assert cluster(6, iter([BAND_A, BAND_B, EXACT])).tolist() == expected.tolist()


def test_no_columns_means_all_singletons():
    assert cluster(3, []).tolist() == [0, 1, 2]


def test_survivors_default_to_lowest_index():
    survivors = choose_survivors(cluster(6, [EXACT, BAND_A, BAND_B]))
    assert survivors.tolist() == [0, 0, 0, 3, 4, 4]


def test_survivors_follow_rank_with_index_tiebreak():
    components = np.array([7, 7, 7, 3, 9, 9])
    rank = np.array([5, 1, 1, 0, 2, 2])
    assert choose_survivors(components, rank).tolist() == [1, 1, 1, 3, 4, 4]


def test_removals_list_every_non_survivor():
    removed = removals(np.array([0, 0, 2, 2, 2, 5]))
    assert removed.doc_index.tolist() == [1, 3, 4]
    assert removed.survivor.tolist() == [0, 2, 2]
    assert removed.cluster_id.tolist() == [0, 2, 2]


def test_survivors_independent_of_input_order_when_ranked():
    rng = np.random.default_rng(3)
    n = 300
    columns = [rng.integers(0, 60, n).astype(np.uint64) for _ in range(4)]
    rank = rng.permutation(n)  # e.g. a quality score, unique per document
    survivors = choose_survivors(cluster(n, columns), rank)

    shuffled = rng.permutation(n)  # shuffled[new_position] = original index
    shuffled_survivors = choose_survivors(
        cluster(n, [column[shuffled] for column in columns]), rank[shuffled]
    )
    assert (shuffled[shuffled_survivors] == survivors[shuffled]).all()


def test_union_find_matches_naive_components():
    rng = np.random.default_rng(0)
    n = 500
    a, b = rng.integers(0, n, 300), rng.integers(0, n, 300)
    uf = UnionFind(n)
    uf.union_pairs(a[:150], b[:150])
    uf.union_pairs(a[150:], b[150:])

    label = list(range(n))  # naive relabelling to the smallest member
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        old, new = max(label[x], label[y]), min(label[x], label[y])
        label = [new if value == old else value for value in label]
    assert uf.roots().tolist() == label
    assert uf.find(np.array([int(a[0])])).tolist() == [label[a[0]]]


def test_union_find_long_chain():
    n = 100_000
    uf = UnionFind(n)
    uf.union_pairs(np.arange(1, n), np.arange(n - 1))
    assert (uf.roots() == 0).all()


def test_link_equal_keys_rejects_wrong_length():
    with pytest.raises(ValueError):
        link_equal_keys(UnionFind(3), keys(1, 2))


# --- near-duplicate recall / precision on documents with known word-5-gram Jaccard -------------

WORDS_PER_DOC = 300


def edited_pairs(rng: random.Random, vocab: list[str], count: int, edits: range):
    """(original, copy with `k` random word substitutions) for k drawn from `edits`."""
    for _ in range(count):
        words = rng.choices(vocab, k=WORDS_PER_DOC)
        copy = list(words)
        for position in rng.sample(range(WORDS_PER_DOC), rng.choice(edits)):
            copy[position] = rng.choice(vocab)
        yield " ".join(words), " ".join(copy)


def test_lsh_recall_and_false_merges_at_known_jaccard():
    rng = random.Random(1234)
    vocab = sorted({"".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=7)) for _ in range(20000)})
    pairs = list(edited_pairs(rng, vocab, 400, range(0, 6)))  # J about 0.84..1
    pairs += list(edited_pairs(rng, vocab, 1600, range(22, 90)))  # J about 0.1..0.5
    truth = np.array([jaccard(a, b) for a, b in pairs])

    texts = [text for pair in pairs for text in pair]
    signatures = MinHasher(num_perm=112, ngram=5).signatures(texts)
    bands = band_hashes(signatures, bands=14, rows=8)
    components = cluster(len(texts), [content_hashes(texts), *bands.T])
    merged = components[0::2] == components[1::2]

    similar, dissimilar = truth >= 0.85, truth <= 0.5
    assert similar.sum() >= 300 and dissimilar.sum() >= 1400
    assert merged[similar].mean() >= 0.95
    # The 14x8 S-curve merges a J=0.5 pair with probability 5.3% (J=0.4: 0.9%, J=0.3: 0.1%), so
    # "at most 1%" holds for pairs spread over J <= 0.5, not for pairs all sitting at 0.5.
    expected_rate = np.mean(1 - (1 - truth[dissimilar] ** 8) ** 14)
    assert expected_rate < 0.01
    assert merged[dissimilar].mean() <= 0.01
    # Unrelated documents never end up together.
    assert len(np.unique(components)) >= len(pairs)
