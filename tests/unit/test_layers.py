"""The rooms and their layers (docs/architecture.md) hold: an import that climbs a layer fails here.

The layers are import-linter contracts in pyproject.toml ([tool.importlinter]); this runs them with the
tool itself and checks that they name every room, so a new room cannot stand outside the layering.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "shared" / "gleaner"
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def _rooms(folder: Path, prefix: str) -> set[str]:
    """The packages and modules directly inside ``folder``, as dotted names."""
    rooms = {f"{prefix}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"}
    rooms |= {f"{prefix}.{p.name}" for p in folder.iterdir() if (p / "__init__.py").is_file()}
    return rooms


def _layered(contract: dict) -> set[str]:
    return {name.strip() for layer in contract["layers"] for name in layer.split(":")}


def test_no_import_climbs_a_layer_but_the_ones_listed_with_their_reason():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache", str(ROOT / "pyproject.toml")], cwd=ROOT / "shared",
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "BROKEN" not in done.stdout


def test_the_layers_name_every_room_of_the_package_and_of_the_store():
    gleaner, store = CONFIG["contracts"]
    assert _rooms(PACKAGE, "gleaner") - _layered(gleaner) == set()
    assert _rooms(PACKAGE / "store", "gleaner.store") - _layered(store) == set()


def test_at_most_ten_imports_climb_a_layer():
    assert sum(len(contract.get("ignore_imports", ())) for contract in CONFIG["contracts"]) <= 10


def test_the_package_root_keeps_at_most_eight_files_and_no_module_passes_400_lines():
    assert len(list(PACKAGE.glob("*.py"))) <= 8
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if "migrations" not in p.parts and (n := len(p.read_text().splitlines())) > 400}
    assert long == {}
