"""``/v1/ingest`` and ``/v1/feedback``: uploads and feedback over HTTP (gleaner.origins).

Routes::

    POST /v1/ingest         multipart/form-data (``file``, ``site``, ``path``?, ``format``?) or JSON
                            ``{"site", "url"}`` | ``{"site", "text", "format"}`` (``path``? both) → 202 {"job_id"}
    GET  /v1/ingest/{job}   {"status", "document_id", "version", "error", "conflicts", …}
    POST /v1/feedback       {"site", "text", "about"?} → 201 {"document_id", "version", "conflicts"}
    GET  /v1/documents/{doc}/remarks   the document's comments and flags, oldest first, with who and when
    POST /v1/documents/{doc}/remarks   {"kind": "comment"|"flag", "text"} → 201 {"remark"}, as the caller's

A site token writes into its own site only (``site`` may be left out; another site is 404, as if
absent, and so is another site's document for a remark). A file past a ceiling is 413 naming the
limit; one its extractor cannot read is 422 with the reason; neither writes anything. An accepted
upload is landed on a thread of this process and its job says when it is searchable.
"""

from __future__ import annotations

import logging
import threading
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.backoffice.request import Answer, ApiRequest, HttpError, check_uuid, json_body, valid_site_domain
from gleaner.errors import InvalidInput
from gleaner.origins.feedback import About, give_feedback
from gleaner.origins.formats import MAX_UPLOAD_BYTES, TooLarge, UnreadableFile
from gleaner.origins.landing import ErasedContent
from gleaner.origins.remarks import NoDocument, add_remark, remarks_of
from gleaner.origins.store import OriginStore
from gleaner.origins.uploads import UploadRequest, accept, fetch_for_upload, job_answer, run_job

log = logging.getLogger(__name__)

UPLOAD_PATH = "/v1/ingest"
# What a multipart body may hold beyond the file itself (the boundary, the other fields).
MULTIPART_SLACK = 64 * 1024


def max_body(deps: Deps) -> int:
    """The body an upload may send: the upload ceiling and the multipart envelope around it."""
    return MAX_UPLOAD_BYTES + MULTIPART_SLACK


def _site(req: ApiRequest, given: Any) -> str:
    """The site written to: the token's own, or the one given (the operator must name it)."""
    if given is not None and (not isinstance(given, str) or not valid_site_domain(given)):
        raise HttpError(400, "site must be a site domain")
    own = req.access.site_domain
    if own is not None:
        if given is not None and given != own:
            raise HttpError(404, f"no site {given[:80]}")
        return own
    if given is None:
        raise HttpError(400, "name the site ('site')")
    return str(given)


def _form(req: ApiRequest) -> tuple[dict[str, str], tuple[str | None, str | None, bytes] | None]:
    """A multipart body's text fields, and its file (name, content type, bytes) if it has one."""
    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + req.content_type.encode("latin-1")
                                                  + b"\r\n\r\n" + req.body)
    if not message.is_multipart():
        raise HttpError(400, "the body must be multipart/form-data with a 'file' part")
    fields: dict[str, str] = {}
    upload = None
    for part in message.iter_parts():
        assert isinstance(part, EmailMessage)
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True)
        if not isinstance(name, str) or not isinstance(data, bytes):
            continue
        if name == "file":
            upload = (part.get_filename(), part.get_content_type(), data)
        else:
            fields[name] = data.decode("utf-8", "replace")[:4096]
    return fields, upload


def post_ingest(deps: Deps, req: ApiRequest) -> Answer:
    if req.content_type.startswith("multipart/form-data"):
        fields, upload = _form(req)
        if upload is None:
            raise HttpError(400, "the form has no 'file' part")
        name, content_type, data = upload
        site = _site(req, fields.get("site") or fields.get("site_domain"))
        request = UploadRequest(site, data, req.access.actor, file_name=name, path=fields.get("path") or None,
                                format_hint=fields.get("format") or None, content_type=content_type)
    else:
        body = json_body(req)
        site = _site(req, body.get("site", body.get("site_domain")))
        path = body.get("path")
        if path is not None and not isinstance(path, str):
            raise HttpError(400, "path must be a string")
        fmt = body.get("format")
        if fmt is not None and not isinstance(fmt, str):
            raise HttpError(400, "format must be a string")
        if isinstance(body.get("url"), str) and "text" not in body:
            try:
                data, content_type, final = fetch_for_upload(deps.settings, body["url"])
            except UnreadableFile as exc:
                raise HttpError(422, str(exc)) from None
            name = final.rstrip("/").rsplit("/", 1)[-1] or None
            request = UploadRequest(site, data, req.access.actor, file_name=name, path=path, format_hint=fmt,
                                    content_type=content_type, source_url=final)
        elif isinstance(body.get("text"), str) and "url" not in body:
            if fmt is None:
                raise HttpError(400, "inline text needs its format ('format': markdown, text or html)")
            request = UploadRequest(site, body["text"].encode("utf-8"), req.access.actor, path=path, format_hint=fmt)
        else:
            raise HttpError(400, "send a multipart 'file', or JSON with one of 'url' or 'text'")
        if path is None and request.file_name is None:
            raise HttpError(400, "inline text needs a 'path'")
    try:
        accepted = accept(deps, request)
    except TooLarge as exc:
        return 413, {"error": str(exc), "limit": exc.limit}
    except UnreadableFile as exc:
        return 422, {"error": str(exc)}
    except InvalidInput as exc:
        return 400, {"error": str(exc)}
    worker = threading.Thread(target=_land, args=(deps, accepted.job_id, accepted.site_domain, accepted.extracted),
                              name=f"gleaner-ingest-{accepted.job_id[:8]}", daemon=True)
    worker.start()
    return 202, {"job_id": accepted.job_id, "status": "queued"}


def _land(deps: Deps, job_id: str, site: str, extracted: Any) -> None:
    try:
        with tenancy.no_tenant():
            run_job(deps, job_id, site, extracted)
    except Exception:  # the job records that it failed; the traceback is for the operator's log
        log.exception("ingest job %s failed", job_id)


def get_ingest(deps: Deps, req: ApiRequest, job: str) -> dict[str, Any]:
    job_id = check_uuid(job, "ingest job")
    found = OriginStore(deps.engine).job(job_id)
    if found is None:
        raise HttpError(404, f"no ingest job {job_id}")
    return job_answer(found)


def post_feedback(deps: Deps, req: ApiRequest) -> Answer:
    body = json_body(req)
    site = _site(req, body.get("site", body.get("site_domain")))
    text = body.get("text")
    if not isinstance(text, str):
        raise HttpError(400, "text must be a string")
    try:
        landed = give_feedback(deps, site, text, req.access.actor, About.parse(body.get("about")))
    except ErasedContent as exc:
        return 409, {"error": str(exc)}
    except InvalidInput as exc:
        message = str(exc)
        return (404 if message.startswith("no ") else 400), {"error": message}
    return 201, {"document_id": landed.document_id, "version": landed.version, "conflicts": landed.conflicts}


def get_remarks(deps: Deps, req: ApiRequest, document: str) -> dict[str, Any]:
    document_id = check_uuid(document, "document")
    try:
        found = remarks_of(deps, document_id)
    except NoDocument as exc:
        raise HttpError(404, str(exc)) from None
    return {"document_id": document_id, "remarks": [r.to_dict() for r in found]}


def post_remark(deps: Deps, req: ApiRequest, document: str) -> Answer:
    document_id = check_uuid(document, "document")
    body = json_body(req)
    try:
        kept = add_remark(deps, document_id, body.get("kind", "comment"), body.get("text"), req.access.actor)
    except NoDocument as exc:
        return 404, {"error": str(exc)}
    except InvalidInput as exc:
        return 400, {"error": str(exc)}
    return 201, {"remark": kept.to_dict()}
