"""A failed transaction leaves nothing behind: the pooled connection is clean for the next caller."""

from __future__ import annotations

import pytest

from gleaner.store.dberrors import DatabaseRefused, is_permanent, sqlstate
from gleaner.store.references import ArticleRow


def row(title: str, url: str) -> ArticleRow:
    return ArticleRow(workspace_id="w", external_url=url, normalised_url=url, title=title, summary=None,
                      published_at=None, feed_source=None)


def test_a_value_the_driver_cannot_encode_does_not_poison_the_pool(make_deps):
    deps = make_deps()
    refs = deps.references
    with pytest.raises(UnicodeEncodeError):
        refs.record_articles([row("\ud800", "https://n.test/bad")])
    for i in range(8):  # more than the pool holds: every pooled connection is tried
        (new,) = refs.record_articles([row("fine", f"https://n.test/{i}")])
        assert new is not None
    assert refs.counts()["feed_articles"] == 8


def test_a_value_the_server_refuses_is_a_permanent_error_and_rolls_back(make_deps):
    deps = make_deps()
    refs = deps.references
    with pytest.raises(DatabaseRefused) as refused:  # translated at the engine, the driver's error its cause
        refs.record_articles([row("fine", "https://n.test/a"), row("a\x00b", "https://n.test/nul")])
    assert sqlstate(refused.value) == "22021" and is_permanent(refused.value)
    assert refs.record_articles([row("fine", "https://n.test/a")]) != [None]  # the batch left no row
    assert refs.counts()["feed_articles"] == 1
