import pytest

from gleaner.errors import InvalidInput
from gleaner.urls import canonicalize, glob_matches, normalise_url, path_allowed, path_of, url_hash, validate_glob


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTP://Example.COM/", "http://example.com/"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("https://example.com/a/#section", "https://example.com/a"),
        ("https://example.com/a/?utm_source=x&utm_medium=y&id=3", "https://example.com/a?id=3"),
        ("https://example.com/?ref=hn&source=tw&fbclid=1&gclid=2", "https://example.com/"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com/docs/", "https://example.com/docs"),
        ("https://example.com/%7Euser/", "https://example.com/~user"),
        ("https://example.com/a b", None),
        ("https://bücher.example/", "https://xn--bcher-kva.example/"),
        ("https://example.com./x", "https://example.com/x"),
    ],
)
def test_canonical_form_follows_the_design_contract(raw, expected):
    if expected is None:
        with pytest.raises(InvalidInput):
            canonicalize(raw)
    else:
        assert canonicalize(raw) == expected


@pytest.mark.parametrize("raw", ["https://Example.com/A/?utm_x=1&b=2#f", "http://a.test:80//x/", "https://a.test/%41"])
def test_normalising_twice_changes_nothing(raw):
    once = canonicalize(raw)
    assert canonicalize(once) == once


@pytest.mark.parametrize(
    "raw",
    ["ftp://example.com/", "javascript:alert(1)", "https://user:pw@example.com/", "http://", "", "http://a\\b.test/",
     "https://example.com:0/", "https://example.com:99999/"],
)
def test_unusable_urls_are_refused_with_a_clear_error(raw):
    with pytest.raises(InvalidInput):
        canonicalize(raw)


def test_the_feed_normaliser_returns_unparseable_input_unchanged():
    assert normalise_url("not a url") == "not a url"
    assert normalise_url("HTTPS://Example.com/x/?utm_campaign=z") == "https://example.com/x"


def test_page_id_is_sha1_of_the_canonical_url():
    import hashlib

    assert url_hash("https://example.com/") == hashlib.sha1(b"https://example.com/").hexdigest()


def test_globs_match_paths_and_a_folder_glob_covers_the_folder_page():
    assert glob_matches("/blog/2026/x", "/blog/*")
    assert glob_matches("/blog", "/blog/*")
    assert not glob_matches("/blogger", "/blog/*")
    assert path_allowed("/docs/a", ("/docs/*",), ())
    assert not path_allowed("/docs/a", ("/docs/*",), ("/docs/a",))
    assert not path_allowed("/about", ("/docs/*",), ())
    assert path_of("https://example.com/a%20b") == "/a b"


@pytest.mark.parametrize("bad", ["", "  ", "blog/*", "/a[b"])
def test_invalid_globs_are_refused(bad):
    with pytest.raises(InvalidInput):
        validate_glob(bad)


def test_the_fetch_url_keeps_the_sites_spelling_of_path_and_query():
    from gleaner.urls import fetchable

    assert fetchable("HTTP://Example.COM./Docs/?b=2&utm_source=x#top") == "http://example.com/Docs/?b=2&utm_source=x"
    assert fetchable("http://[::1]:8080/a/") == "http://[::1]:8080/a/"
    assert fetchable("https://a.test") == "https://a.test/"
