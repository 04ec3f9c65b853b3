"""Body decoding under caps (pure: byte chunks in, bytes or a refusal out)."""

from __future__ import annotations

import gzip
import zlib

import pytest

from gleaner.fetch.body import BodyRefused, coding_of, read_body
from gleaner.fetch.budget import RunBudget, Spent


def _chunks(data: bytes, size: int = 1000) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def test_a_gzip_body_exactly_at_the_decoded_cap_is_read_whole() -> None:
    plain = b"a" * 100_000
    body, wire = read_body(_chunks(gzip.compress(plain)), coding="gzip", max_wire=10**6, max_decoded=100_000)
    assert body == plain and wire < 1000


def test_one_byte_over_the_decoded_cap_is_refused() -> None:
    with pytest.raises(BodyRefused) as refused:
        read_body(_chunks(zlib.compress(b"a" * 100_001)), coding="deflate", max_wire=10**6, max_decoded=100_000)
    assert refused.value.kind == "size"


def test_a_bomb_in_a_single_wire_chunk_is_refused_at_the_cap() -> None:
    # 64 MiB of zeros compresses to about 64 KiB, one chunk; decoding must stop at the cap, not inflate it all.
    squeeze = zlib.compressobj(1)
    packed = b"".join(squeeze.compress(b"\0" * (1 << 20)) for _ in range(64)) + squeeze.flush()
    with pytest.raises(BodyRefused, match="decoded body exceeds"):
        read_body(_chunks(packed, 64 * 1024), coding="deflate", max_wire=10**8, max_decoded=1 << 20)


@pytest.mark.parametrize(("header", "coding"), [(None, "identity"), ("identity", "identity"), ("GZIP", "gzip"),
                                                 ("x-gzip", "gzip"), ("deflate", "deflate")])
def test_accepted_content_codings(header: str | None, coding: str) -> None:
    assert coding_of(header) == coding


@pytest.mark.parametrize("header", ["br", "zstd", "compress", "gzip, gzip", "gzip, br"])
def test_other_content_codings_are_refused(header: str) -> None:
    with pytest.raises(BodyRefused) as refused:
        coding_of(header)
    assert refused.value.kind == "content"


def test_the_byte_budget_is_charged_before_the_size_cap() -> None:
    budget = RunBudget(max_bytes=1500, spent=Spent(bytes=1000))

    def charge(n: int) -> None:
        reason = budget.add_bytes(n)
        if reason:
            raise BodyRefused("budget", reason)

    with pytest.raises(BodyRefused) as refused:
        read_body([b"x" * 600], coding="identity", max_wire=500, max_decoded=500, on_wire=charge)
    assert refused.value.kind == "budget"
    assert budget.claim_request() is not None
