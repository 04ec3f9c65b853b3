"""What every part of the metadata repository shares: the engine, one transaction a call, JSON parameters.

``MetadataStore`` (metadata.py) is composed of classes over this base, one module
per concern; each method opens its own short transaction through ``_tx``.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.engine import Engine


def json_value(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def json_rows(rows: list[dict[str, Any]]) -> str:
    """Rows for ``json_to_recordset``: one parameter however many rows, encoded in C."""
    return json.dumps(rows, separators=(",", ":"), ensure_ascii=False)


class SqlStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _tx(self) -> Any:
        return self.engine.begin()
