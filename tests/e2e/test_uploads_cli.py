"""`gleaner ingest` as a user runs it: real files in, searchable, citable, versioned and erasable documents out."""

from __future__ import annotations

import json
import time

from tests.integration.test_uploads import make_docx, make_pdf

from .test_cli import cli_env, gleaner  # noqa: F401  (the fixture: the environment a user's shell would have)

SITE = "acme.test"


def test_gleaner_ingest_keeps_a_pdf_and_a_docx_that_search_show_cite_and_erase_then_find(cli_env, tmp_path):  # noqa: F811
    pdf = tmp_path / "audit.pdf"
    pdf.write_bytes(make_pdf(["The harbour audit counts forty-two brass lanterns.",
                              "Page two: the lanterns were polished in spring."]))
    docx = tmp_path / "travel.docx"
    docx.write_bytes(make_docx("Travel policy", ["Employees book rail travel through the intranet portal."]))
    first = gleaner(cli_env, "ingest", str(pdf), "--site-domain", SITE, "--path", "/reports/audit.pdf", "--json")
    assert first.returncode == 0, first.stderr
    job = json.loads(first.stdout)
    assert (job["status"], job["version"], job["outcome"], job["conflicts"]) == ("succeeded", 1, "new", [])
    again = json.loads(gleaner(cli_env, "ingest", str(pdf), "--site-domain", SITE, "--path", "/reports/audit.pdf",
                               "--json").stdout)
    assert (again["outcome"], again["version"], again["document_id"]) == ("unchanged", 1, job["document_id"])
    assert gleaner(cli_env, "ingest", str(docx), "--site-domain", SITE).returncode == 0
    found = json.loads(gleaner(cli_env, "search", "brass lanterns harbour audit", "--json").stdout)["results"]
    assert found[0]["url"] == f"upload://{SITE}/reports/audit.pdf"
    shown = json.loads(gleaner(cli_env, "show", f"upload://{SITE}/travel.docx", "--json").stdout)
    assert shown["version"] == 1 and "# Travel policy" in shown["body"]
    cited = gleaner(cli_env, "cite", f"upload://{SITE}/reports/audit.pdf", "counts forty-two brass lanterns", "--json")
    assert cited.returncode == 0, cited.stderr
    assert json.loads(cited.stdout)["quote"] == "counts forty-two brass lanterns"
    erased = gleaner(cli_env, "erase", f"upload://{SITE}/reports/audit.pdf", "--yes", "--json")
    assert erased.returncode == 0 and json.loads(erased.stdout)["versions_removed"] == 1
    refused = gleaner(cli_env, "ingest", str(pdf), "--site-domain", SITE, "--path", "/elsewhere.pdf", "--json")
    assert refused.returncode == 1 and "erased" in json.loads(refused.stdout)["error"]


def test_gleaner_ingest_refuses_an_unreadable_file_with_its_reason_and_no_wait_lands_in_the_background(
        cli_env, tmp_path):  # noqa: F811
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 not really")
    answer = gleaner(cli_env, "ingest", str(broken), "--site-domain", SITE)
    assert answer.returncode == 1 and "PDF" in answer.stderr and "Traceback" not in answer.stderr
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nThe kiosk opens at seven.\n")
    queued = json.loads(gleaner(cli_env, "ingest", str(note), "--site-domain", SITE, "--no-wait", "--json").stdout)
    assert queued["status"] == "queued" and queued["version"] is None
    deadline = time.monotonic() + 60
    while True:
        job = json.loads(gleaner(cli_env, "ingest", "--job", queued["job_id"], "--json").stdout)
        if job["status"] == "succeeded" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert (job["status"], job["version"]) == ("succeeded", 1)
