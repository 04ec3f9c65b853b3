"""The fresh scan's choice of vectors by sign bits (gleaner.retrieval.fresh_scan): a pure function."""

from __future__ import annotations

import numpy as np

from gleaner.retrieval.fresh_scan import nearest_rows, sign_bits


def _planes(vectors: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.frombuffer(sign_bits(vectors), dtype=np.uint64).reshape(len(vectors), -1).T)


def test_the_scan_picks_exactly_the_vectors_nearest_by_hamming_distance_ties_included():
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((3000, 384)).astype(np.float32)
    query = rng.standard_normal(384).astype(np.float32)
    distance = ((vectors > 0) != (query > 0)).sum(axis=1)
    for count in (1, 37, 500):
        picked = nearest_rows(_planes(vectors), query, count)
        assert len(picked) == len(set(picked.tolist())) == count
        assert sorted(distance[picked].tolist()) == sorted(distance.tolist())[:count]


def test_a_vector_s_own_bits_put_it_first_and_a_count_past_the_set_takes_all():
    rng = np.random.default_rng(6)
    vectors = rng.standard_normal((200, 384)).astype(np.float32)
    assert nearest_rows(_planes(vectors), vectors[123], 1).tolist() == [123]
    assert sorted(nearest_rows(_planes(vectors), vectors[0], 500).tolist()) == list(range(200))


def test_two_stores_holding_the_same_vectors_in_another_order_pick_the_same_ones():
    # Rows come in the order pages were ingested, which differs between two crawls of the same site;
    # the vectors tied at the cut-off are taken by their keys, so both crawls compare the same ones.
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((2000, 384)).astype(np.float32)
    query = rng.standard_normal(384).astype(np.float32)
    keys = np.arange(10_000, 12_000, dtype=np.uint64)  # each vector's tie-break value
    distance = ((vectors > 0) != (query > 0)).sum(axis=1)
    count = int(np.searchsorted(np.sort(distance), np.sort(distance)[300])) + 5  # the cut-off falls in a tie
    assert (np.sort(distance)[count - 1] == np.sort(distance)[count])
    picked = []
    for order in (np.arange(2000), rng.permutation(2000)):
        rows = nearest_rows(_planes(vectors[order]), query, count, lambda tied, o=order: keys[o][tied])
        picked.append(sorted(keys[order][rows].tolist()))
    assert picked[0] == picked[1]
    shuffled = rng.permutation(2000)  # without the keys, ties go by row order: another choice
    assert sorted(keys[shuffled][nearest_rows(_planes(vectors[shuffled]), query, count)].tolist()) != picked[0]
