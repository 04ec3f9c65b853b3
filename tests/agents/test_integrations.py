"""The RAG frameworks' loaders against a running `gleaner serve`: documents whose text is the stored
canonical text and whose metadata says where it came from, so the user can cite it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import OPERATOR_SECRET, SITE, Served

ROOT = Path(__file__).resolve().parents[2]
PROVENANCE = {"url", "title", "site_domain", "document_id", "version", "text_hash", "start", "end"}


def _slice_cli(served: Served, text_hash: str, start: int, end: int) -> bytes:
    import os

    env = {**os.environ, "GLEANER_DATABASE_URL": served.database_url, "PYTHONPATH": str(ROOT / "shared")}
    done = subprocess.run([sys.executable, "-m", "gleaner.cli", "slice", text_hash, str(start), str(end)],
                          env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_langchain_loader_yields_every_active_page_as_its_citable_canonical_text(served):
    from gleaner.integrations.langchain import GleanerLoader

    docs = GleanerLoader(served.url, site=SITE, token=OPERATOR_SECRET).load()
    listed = served.deps.browse.documents(SITE, status="active", limit=1000, offset=0)[0]
    assert len(docs) == len(listed) > 5
    by_url = {d.metadata["url"]: d for d in docs}
    install = by_url[served.site.url + "/docs/install"]
    assert set(install.metadata) >= PROVENANCE and install.metadata["site_domain"] == SITE
    text = served.current_text("/docs/install")
    assert install.metadata["text_hash"] == text.text_hash and install.metadata["version"] == text.version
    meta = install.metadata
    assert install.page_content.encode("utf-8") == text.body == _slice_cli(served, meta["text_hash"], meta["start"],
                                                                           meta["end"])


def test_the_llamaindex_reader_yields_the_same_citable_texts(served):
    from gleaner.integrations.llamaindex import GleanerReader

    docs = GleanerReader(served.url, token=OPERATOR_SECRET).load_data(site=SITE)
    install = next(d for d in docs if d.metadata["url"] == served.site.url + "/docs/install")
    text = served.current_text("/docs/install")
    assert set(install.metadata) >= PROVENANCE
    assert install.text.encode("utf-8") == text.body and install.metadata["text_hash"] == text.text_hash
    assert install.id_ == f"{text.text_hash}:0:{len(text.body)}"


def test_the_langchain_retriever_returns_search_hits_as_their_verbatim_slices(served):
    from gleaner.integrations.langchain import GleanerRetriever

    hits = GleanerRetriever(base_url=served.url, token=OPERATOR_SECRET, site=SITE, k=3).invoke("install")
    assert hits and all(set(h.metadata) >= PROVENANCE | {"score"} for h in hits)
    top = hits[0].metadata
    stored = served.deps.provenance.text_bytes(top["text_hash"])
    assert hits[0].page_content.encode("utf-8") == stored[top["start"]:top["end"]]
    assert hits[0].page_content.encode("utf-8") == _slice_cli(served, top["text_hash"], top["start"], top["end"])


def test_a_site_token_loads_only_its_own_site(served):
    from gleaner import tenancy
    from gleaner.integrations.client import GleanerApiError
    from gleaner.integrations.langchain import GleanerLoader

    with tenancy.all_tenants():
        other = served.deps.tokens.add_site("elsewhere.test")["token"]
    try:
        GleanerLoader(served.url, site=SITE, token=other).load()
    except GleanerApiError as exc:
        assert exc.status == 404
    else:
        raise AssertionError("another site's token loaded this site")
