"""Search finds a page by the words inside its code names, paths and links and by an acronym's plural,
and an older store is read again by the same words when it is migrated (migrations 0051, 0056).

Real components: the embedded PostgreSQL (with pgvector, or the server GLEANER_TEST_DATABASE_URL
names), alembic's own downgrade and upgrade, a loopback site.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command

from gleaner.demosite.testsite import Page, TestSite
from gleaner.retrieval import search
from gleaner.runtime.runner import crawl, new_request
from gleaner.store.backends import db
from tests.integration.paraphrase_site import TOPICS, topic_pages

SITE = "topics.test"


def _site_with_a_reference_page() -> dict[str, Page]:
    pages = topic_pages()
    links = "".join(f'<li><a href="{path}">{title}</a></li>' for path, (title, _a, _b) in TOPICS.items())
    pages["/"] = Page(f"<html><head><title>Topics</title></head><body><ul>{links}"
                      '<li><a href="/api">API notes</a></li></ul></body></html>')
    pages["/api"] = Page(
        "<html><head><title>API notes</title></head><body><main><article><h1>API notes</h1>"
        "<p>Call <code>fs.readFile()</code> with the path of the file and a callback; the port for mainframes"
        " is described at https://example.org/IBM/s390x-abi/releases and in z/Architecture.</p>"
        "<p>Large builds spread their work over every one of the machine's CPUs when asked to.</p>"
        "<p>Errors arrive as the callback's first argument, never thrown, so always test it first.</p>"
        "</article></main></body></html>")
    return pages


def test_the_words_inside_names_paths_links_and_versions_are_words(deps):
    with deps.engine.connect() as conn:
        lexemes = set(conn.execute(sa.text("SELECT unnest(tsvector_to_array(knowledge.search_words(:t)))"), {
            "t": "Call fs.readFile() from /usr/lib/valgrind; see https://github.com/IBM/s390x-abi/releases,"
                 " z/Architecture, sphinx.ext.autodoc, version 3.4.1, multi-core and the builds"}).scalars())
    assert {"fs", "readfil", "usr", "lib", "valgrind", "ibm", "s390x", "abi", "z", "architectur", "sphinx", "ext",
            "autodoc", "3", "4", "1", "multi", "core", "build"} <= lexemes
    assert not {"the", "and", "from", "fs.readfile", "github.com"} & lexemes


def test_an_acronyms_plural_is_its_singular_and_other_words_ending_in_s_keep_theirs(deps):
    with deps.engine.connect() as conn:
        lexemes = set(conn.execute(sa.text("SELECT unnest(tsvector_to_array(knowledge.search_words(:t)))"), {
            "t": "all CPUs and GPUs, their URLs and IDs; the status bus of Das Kapital, macOS, CSS, Ms Jones"})
            .scalars())
    assert {"cpu", "gpu", "url", "id", "status", "bus", "das", "maco", "css", "ms", "jone"} <= lexemes
    assert not {"cpus", "gpus", "urls", "ids"} & lexemes


def _first(deps, query):
    hits = search(deps, query, site_domain=SITE, limit=3)["results"]
    return hits[0]["url"] if hits else None


def _downgrade(deps, revision: str) -> None:
    """alembic's downgrade, as db.upgrade runs migrations (the login role, every tenant's rows)."""
    with deps.engine.connect().execution_options(**{db.ADMIN_OPTION: True}) as conn:
        conn.execute(sa.text("SELECT set_config('app.all_tenants', 'on', false)"))
        cfg = db.alembic_config(deps.engine)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
        conn.commit()


def test_a_page_is_found_by_a_word_inside_a_dotted_name_or_a_link_and_stays_found_across_0051(deps):
    with TestSite(_site_with_a_reference_page(), max_seconds=300) as site:
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
    api = site.url + "/api"
    assert _first(deps, "readFile") == api
    assert _first(deps, "IBM s390x") == api
    # The store as migration 0050 left it (PostgreSQL's parser, which reads fs.readFile and the link as
    # one token each): neither word is a word of the page there.
    _downgrade(deps, "0050")
    try:
        assert _first(deps, "readFile") != api
        assert _first(deps, "IBM s390x") != api
    finally:
        db.upgrade(deps.engine)
    # 0051 made every stored chunk's words again.
    assert _first(deps, "readFile") == api
    assert _first(deps, "IBM s390x") == api
    assert _first(deps, "molten magma from the crater") == site.url + "/volcanoes"


def test_a_page_saying_cpus_is_found_by_cpu_and_stays_found_across_0056(deps):
    with TestSite(_site_with_a_reference_page(), max_seconds=300) as site:
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
    api = site.url + "/api"
    assert _first(deps, "CPU") == api
    _downgrade(deps, "0055")  # the stemmer's "cpus" for "CPUs"
    try:
        assert _first(deps, "CPU") != api
    finally:
        db.upgrade(deps.engine)
    assert _first(deps, "CPU") == api
    assert _first(deps, "readFile") == api


def test_gleaner_crawl_ends_with_the_word_index_merged_and_its_words_counted(deps, database_url, tmp_path):
    # Searches read the GIN index's pending list whole until it is merged: right after a first crawl of
    # real documentation that made them five times slower (gleaner.retrieval.tidy).
    from click.testing import CliRunner

    from gleaner.cli import main
    from gleaner.retrieval.tidy import _CLEAN_PENDING

    env = {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "cli-home"),
           "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8", "GLEANER_HOST_DELAY": "0", "GLEANER_EXTRACT_WORKERS": "1"}
    with TestSite(_site_with_a_reference_page(), max_seconds=300) as site:
        result = CliRunner().invoke(main, ["crawl", site.url + "/", "--site-domain", SITE, "--json"], env=env)
    assert result.exit_code == 0, result.output
    with deps.engine.connect().execution_options(**{db.ADMIN_OPTION: True}) as conn:
        assert conn.execute(_CLEAN_PENDING).scalar() == 0  # nothing was left pending
        assert conn.execute(sa.text("SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables"
                                    " WHERE relid = CAST('knowledge.text_chunks' AS regclass)")).scalar()
        conn.rollback()
    assert _first(deps, "readFile") == site.url + "/api"
