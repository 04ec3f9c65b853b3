"""The extraction ceiling: trafilatura alone over the corpus's HTML files, no network, no storage.

Same trafilatura call as the baseline's callback and Gleaner's content.md
(markdown, tables and formatting kept, no metadata). With --workers 2 the
files are shared out to two processes: the ceiling of the work on two cores.
"""

from __future__ import annotations

import argparse
import json
import time
from multiprocessing import get_context
from pathlib import Path

import trafilatura

OPTIONS = dict(output_format="markdown", include_tables=True, include_formatting=True, include_links=False,
               include_comments=False, with_metadata=False, deduplicate=False)


def extract_file(path: str) -> int:
    html = Path(path).read_bytes().decode("utf-8", errors="replace")
    return len(trafilatura.extract(html, **OPTIONS) or "")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    manifest = json.loads((args.root / "manifest.json").read_text())
    files = [str(args.root / p.lstrip("/")) for p in manifest["paths"]]
    t0 = time.monotonic()
    if args.workers <= 1:
        chars = sum(extract_file(f) for f in files)
    else:
        with get_context("fork").Pool(args.workers) as pool:
            chars = sum(pool.imap_unordered(extract_file, files, chunksize=8))
    seconds = time.monotonic() - t0
    args.out.write_text(json.dumps({"workers": args.workers, "pages": len(files), "seconds": seconds,
                                    "pages_per_second": len(files) / seconds, "markdown_chars": chars}))


if __name__ == "__main__":
    main()
