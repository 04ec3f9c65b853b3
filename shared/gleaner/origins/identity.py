"""Where uploads and feedback live in a site's tree, and the URL-like key every command finds them by.

An upload is ``upload://{site}{path}``: its path is the one given, else the file's name, under
``/``, normalised like a URL path (no ``.`` or ``..`` segments, no empty ones, no trailing slash).
A feedback is ``feedback://{site}/{id}`` at ``/feedback/{yyyy-mm-dd}/{id}``. Neither scheme is
fetchable: a crawl never takes them for pages.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import PurePosixPath

from gleaner.errors import InvalidInput

UPLOAD_SCHEME = "upload://"
FEEDBACK_SCHEME = "feedback://"
MAX_PATH_CHARS = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def is_origin_url(value: str) -> bool:
    """Whether a URL names an upload or a feedback (not an http(s) page)."""
    return value.startswith((UPLOAD_SCHEME, FEEDBACK_SCHEME))


def upload_path(path: str | None, file_name: str | None) -> str:
    """The tree path of an upload: ``path`` if given, else ``/`` + the file's base name."""
    chosen = path if path else ("/" + PurePosixPath(file_name.replace("\\", "/")).name if file_name else "")
    if not chosen or chosen == "/":
        raise InvalidInput("an upload needs a path (--path, 'path') or a file name")
    if len(chosen) > MAX_PATH_CHARS or _CONTROL.search(chosen):
        raise InvalidInput(f"the path must be at most {MAX_PATH_CHARS} printable characters")
    parts = [p for p in chosen.replace("\\", "/").split("/") if p and p != "."]
    if ".." in parts or not parts:
        raise InvalidInput(f"the path {chosen[:80]!r} must not climb out of the site ('..')")
    return "/" + "/".join(parts)


def upload_url(site: str, path: str) -> str:
    return f"{UPLOAD_SCHEME}{site}{path}"


def feedback_path(feedback_id: str, at: datetime) -> str:
    return f"/feedback/{at:%Y-%m-%d}/{feedback_id}"


def feedback_url(site: str, feedback_id: str) -> str:
    return f"{FEEDBACK_SCHEME}{site}/{feedback_id}"
