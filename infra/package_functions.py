"""Build one deployable archive per function: functions/<stage>.zip with the common package vendored.

Each archive holds what Cloud Functions (2nd gen, Python) builds from:

    main.py            functions/<stage>/main.py, unchanged
    gleaner/…          the common package (shared/gleaner), so the function imports the same code
    requirements.txt   the runtime dependencies from pyproject.toml (base + the `cloud` extra)

Archives are reproducible (sorted entries, fixed timestamps): the same source gives the same bytes,
so an unchanged function keeps its object hash across builds.

    python infra/package_functions.py --out dist/functions
"""

from __future__ import annotations

import argparse
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The embedded database is for laptops: its wheel carries PostgreSQL binaries no function needs
# (functions reach Cloud SQL; pgserver is only imported when no database is configured).
NOT_IN_FUNCTIONS = {"pgserver"}
FIXED_TIME = (2020, 1, 1, 0, 0, 0)


def _name(requirement: str) -> str:
    for sep in "<>=!~[; ":
        requirement = requirement.split(sep, 1)[0]
    return requirement.strip().lower()


def requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["cloud"]]
    return [r for r in wanted if _name(r) not in NOT_IN_FUNCTIONS]


def _files(package: Path) -> list[Path]:
    return sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix not in (".pyc", ".pyo"))


def _add(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    archive.writestr(info, data)


def package(stage_dir: Path, out: Path) -> Path:
    """Write out/<stage>.zip for functions/<stage>/."""
    target = out / f"{stage_dir.name}.zip"
    package_dir = ROOT / "shared" / "gleaner"
    with zipfile.ZipFile(target, "w") as archive:
        _add(archive, "main.py", (stage_dir / "main.py").read_bytes())
        _add(archive, "requirements.txt", ("\n".join(requirements()) + "\n").encode())
        for path in _files(package_dir):
            _add(archive, "gleaner/" + path.relative_to(package_dir).as_posix(), path.read_bytes())
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Package each function with the gleaner package vendored in.")
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "functions")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for stage_dir in sorted(p.parent for p in (ROOT / "functions").glob("*/main.py")):
        print(package(stage_dir, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
