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
