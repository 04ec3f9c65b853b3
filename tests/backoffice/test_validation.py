"""A client's validation (seed 003): comments and flags on a document, and edits of a composite, kept with
who (the credential) and when, over the API, the back office's pages and the CLI, on a real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any
from urllib.parse import urlencode

import pytest
import sqlalchemy as sa

from gleaner import tenancy
from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.cli.operating import drain_local
from gleaner.operator.routing import create_composite
from gleaner.origins.landing import land
from gleaner.origins.store import DocumentIdentity
from gleaner.retrieval import search
from gleaner.store.access.tokens import TokenStore
from tests.backoffice.conftest import call

SITE = "acme.test"
OTHER = "rival.test"
OPERATOR = "operator-secret"
PRICING = "# Pricing\n\nThe Pro plan price is 22 euros per month, billed yearly.\n"
EDITED = ("# Plans\n\nThe Pro plan costs 22 euros a month billed yearly; the Team plan adds shared "
          "workspaces for pelicans.\n")


def _upload(deps: Any, site: str, path: str, markdown: str) -> str:
    ident = DocumentIdentity(site, f"upload://{site}{path}", path, "upload", title=path)
    return land(deps, ident, markdown, extractor="test").document_id


def _rows(deps: Any, sql: str, **params: Any) -> list[Any]:
    with deps.engine.connect() as conn:
        return list(conn.execute(sa.text(sql), params).all())


def _tokens(deps: Any) -> tuple[str, str]:
    store = TokenStore(deps.engine)
    return store.add_site(SITE)["token"], store.add_site(OTHER)["token"]


def test_a_site_tokens_comment_and_flag_are_kept_with_who_when_and_version_and_another_tenant_sees_none(deps):
    app = BackofficeApp(deps, bearer=OPERATOR)
    page = _upload(deps, SITE, "/pricing.md", PRICING)
    mine, intruder = _tokens(deps)
    commented = call(app, "POST", f"/v1/documents/{page}/remarks", token=mine,
                     json_body={"kind": "comment", "text": "Checked against the contract: right."})
    assert commented.status == 201, commented.body
    flagged = call(app, "POST", f"/v1/documents/{page}/remarks", token=OPERATOR,
                   json_body={"kind": "flag", "text": "The yearly discount is gone since March."})
    assert flagged.status == 201
    listed = call(app, "GET", f"/v1/documents/{page}/remarks", token=mine).json()["remarks"]
    assert [(r["kind"], r["by"], r["version"], r["text"]) for r in listed] == [
        ("comment", f"site token for {SITE}", 1, "Checked against the contract: right."),
        ("flag", "operator", 1, "The yearly discount is gone since March.")]
    assert all(r["at"] and r["document_id"] == page for r in listed)
    # Another tenant: the document is absent to it, for reading and writing alike, and nothing is written.
    assert call(app, "GET", f"/v1/documents/{page}/remarks", token=intruder).status == 404
    refused = call(app, "POST", f"/v1/documents/{page}/remarks", token=intruder,
                   json_body={"kind": "flag", "text": "Spam."})
    assert refused.status == 404 and "no document" in refused.json()["error"]
    assert _rows(deps, "SELECT count(*) FROM knowledge.document_remarks")[0][0] == 2
    # Bad input is a 400 naming it.
    for body in ({"kind": "praise", "text": "x"}, {"kind": "comment", "text": "  "}, {"kind": "flag"}):
        answer = call(app, "POST", f"/v1/documents/{page}/remarks", token=mine, json_body=body)
        assert answer.status == 400 and answer.json()["error"], body


def test_the_document_page_offers_comment_and_flag_and_shows_them_with_who_made_them(deps):
    app = BackofficeApp(deps)  # no credential on loopback: the operator
    page = _upload(deps, SITE, "/pricing.md", PRICING)
    shown = call(app, "GET", f"/ui/documents/{page}").body.decode()
    assert f'action="/ui/documents/{page}/remarks"' in shown and "No comment or flag yet." in shown
    sent = call(app, "POST", f"/ui/documents/{page}/remarks",
                form=urlencode({"kind": "flag", "text": "The price changed to 24 euros."}).encode())
    assert sent.status == 303 and sent.headers["Location"].endswith("?done=flag-kept")
    again = call(app, "GET", f"/ui/documents/{page}", query={"done": "flag-kept"}).body.decode()
    assert "Flag kept" in again and 'class="remark remark-flag"' in again
    assert "The price changed to 24 euros." in again and "<td>operator</td>" in again


def test_a_client_edit_is_the_composites_next_version_edited_until_validated_and_searchable(deps):
    app = BackofficeApp(deps, bearer=OPERATOR)
    _upload(deps, SITE, "/pricing.md", PRICING)
    made = create_composite(deps, SITE, "Pricing", [f"upload://{SITE}/pricing.md"], actor="cli:alice")
    drain_local(deps)
    mine, intruder = _tokens(deps)
    assert call(app, "POST", f"/v1/composites/{made.id}/edit", token=intruder,
                json_body={"markdown": EDITED}).status == 404  # another tenant's composite is absent
    edited = call(app, "POST", f"/v1/composites/{made.id}/edit", token=mine,
                  json_body={"markdown": EDITED, "note": "merged the Team plan"})
    assert edited.status == 201, edited.body
    answer = edited.json()
    assert answer["composite"]["status"] == "edited"
    assert answer["composite"]["next"] == [{"status": "validated", "verb": "Validate"}]
    assert [(v["version"], v["generator"] == "edit", v["by"], v["current"]) for v in answer["versions"]] == [
        (1, False, "cli:alice", False), (2, True, f"site token for {SITE}", True)]
    assert answer["versions"][1]["at"] and answer["versions"][1]["note"] == "merged the Team plan"
    assert [(h["from_status"], h["to_status"], h["actor"], h["note"]) for h in answer["history"]][-1] == (
        "generated", "edited", f"site token for {SITE}", "version 2: merged the Team plan")
    with tenancy.scope(SITE):  # the edited text answers search (the composite's new version was ingested)
        hits = search(deps, "shared workspaces for pelicans", site_domain=SITE)["results"]
    assert hits and hits[0]["composite_id"] == made.id and hits[0]["version"] == 2
    # The same text again writes nothing.
    same = call(app, "POST", f"/v1/composites/{made.id}/edit", token=mine, json_body={"markdown": EDITED})
    assert same.status == 200 and len(same.json()["versions"]) == 2
    # It moves on through the existing statuses: validated by the client, then staged and promoted.
    validated = call(app, "POST", f"/v1/composites/{made.id}", token=mine, json_body={"status": "validated"})
    assert validated.status == 200 and validated.json()["composite"]["validated_by"] == f"site token for {SITE}"
    for status in ("staged", "prod"):
        moved = call(app, "POST", f"/v1/composites/{made.id}", token=OPERATOR, json_body={"status": status})
        assert moved.status == 200
    # An edit of the composite in production is a new version to validate again: production's validation is gone.
    reedit = call(app, "POST", f"/v1/composites/{made.id}/edit", token=mine, json_body={"markdown": PRICING})
    assert reedit.status == 201 and reedit.json()["composite"]["status"] == "edited"
    assert reedit.json()["composite"]["validated_by"] is None
    assert call(app, "POST", f"/v1/composites/{made.id}/edit", token=mine, json_body={"markdown": ""}).status == 400
    # Back to an earlier version's very text: refused, naming that version (a version is its content).
    back = call(app, "POST", f"/v1/composites/{made.id}/edit", token=mine, json_body={"markdown": EDITED})
    assert back.status == 409 and "version 2" in back.json()["error"]


def test_the_composites_page_edits_the_text_as_a_new_version_and_lists_the_versions(deps):
    app = BackofficeApp(deps)
    _upload(deps, SITE, "/pricing.md", PRICING)
    made = create_composite(deps, SITE, "Pricing", [f"upload://{SITE}/pricing.md"])
    drain_local(deps)
    page = call(app, "GET", f"/ui/sites/{SITE}/composites").body.decode()
    assert f'action="/ui/composites/{made.id}/edit"' in page and "The Pro plan price is 22 euros" in page
    sent = call(app, "POST", f"/ui/composites/{made.id}/edit",
                form=urlencode({"markdown": EDITED, "note": "clearer"}).encode())
    assert sent.status == 303 and sent.headers["Location"].endswith("?done=composite-edited")
    page = call(app, "GET", f"/ui/sites/{SITE}/composites", query={"done": "composite-edited"}).body.decode()
    assert "Composite edited" in page and "badge st-edited" in page and "shared workspaces for pelicans" in page
    assert "<td>edited (clearer)</td>" in page and "<td>operator</td>" in page


def gleaner(deps: Any, database_url: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it, on this test's database and data directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env.update(GLEANER_DATABASE_URL=database_url, GLEANER_HOME=str(deps.settings.data_dir),
               GLEANER_EXTRACT_WORKERS="1", USER="carol", LOGNAME="carol")
    return subprocess.run([sys.executable, "-m", "gleaner.cli", *args], env=env, capture_output=True, text=True,
                          input=stdin, timeout=120, check=False)


def test_the_cli_comments_flags_lists_remarks_and_edits_a_composite_as_its_user(deps, database_url, tmp_path):
    page = _upload(deps, SITE, "/pricing.md", PRICING)
    assert gleaner(deps, database_url, "comment", page[:8], "Looks right.").returncode == 0
    flagged = gleaner(deps, database_url, "flag", page, "Out of date since March.", "--json")
    assert flagged.returncode == 0, flagged.stderr
    assert json.loads(flagged.stdout)["by"] == "cli:carol"
    listed = gleaner(deps, database_url, "remarks", page, "--json")
    assert [(r["kind"], r["text"], r["by"]) for r in json.loads(listed.stdout)] == [
        ("comment", "Looks right.", "cli:carol"), ("flag", "Out of date since March.", "cli:carol")]
    human = gleaner(deps, database_url, "remarks", page).stdout
    assert "flag    by cli:carol on v1: Out of date since March." in human
    missing = gleaner(deps, database_url, "comment", "00000000-0000-0000-0000-000000000000", "Hello.")
    assert missing.returncode != 0 and "no document" in missing.stderr

    made = create_composite(deps, SITE, "Pricing", [f"upload://{SITE}/pricing.md"])
    drain_local(deps)
    text = tmp_path / "plans.md"
    text.write_text(EDITED, encoding="utf-8")
    edited = gleaner(deps, database_url, "composite", "edit", made.id, str(text), "--note", "clearer")
    assert edited.returncode == 0, edited.stderr
    assert edited.stdout.strip() == f"{made.id}: edited, v2"
    unchanged = gleaner(deps, database_url, "composite", "edit", made.id, "-", stdin=EDITED)
    assert "unchanged: nothing written" in unchanged.stdout
    versions = json.loads(gleaner(deps, database_url, "composite", "versions", made.id, "--json").stdout)
    assert [(v["version"], v["generator"], v["by"]) for v in versions][1:] == [(2, "edit", "cli:carol")]
    history = gleaner(deps, database_url, "composite", "history", made.id).stdout
    assert "-> edited" in history and "by cli:carol  (version 2: clearer)" in history


def test_erasing_a_document_deletes_its_comments_and_flags(deps):
    from gleaner.origins.remarks import NoDocument, add_remark, remarks_of
    from gleaner.store.documents.erasure import erase_document

    page = _upload(deps, SITE, "/pricing.md", PRICING)
    add_remark(deps, page, "flag", "Quotes the old price of 22 euros.", "operator")
    erase_document(deps.provenance, deps.blobs, deps.blocklist, page, "request 9", "tester")
    assert _rows(deps, "SELECT count(*) FROM knowledge.document_remarks")[0][0] == 0
    with pytest.raises(NoDocument):  # the erased document is absent, its remarks with it
        remarks_of(deps, page)
