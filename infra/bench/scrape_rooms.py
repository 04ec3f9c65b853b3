"""The rooms a scrape message passes through, counted two ways over one real scrape.

Crawls the loopback single-page-application site of the rendering tests (tests/render_site.py) with
``render = auto`` on the embedded defaults and Debian's chromium, so a scrape batch holds pages read
plainly, pages the sample's rendering stands for and pages rendered now. While the scrape stage's
``handle`` runs, every call and return in its thread is followed (``sys.setprofile``); a module is
named by its room (``gleaner.stages.scrapebatch`` -> ``stages``; a module at the package root is its
own room); code outside Gleaner is not counted. The fetch loop's and the extraction processes' work
happens in other threads and processes and is not followed.

- **trace**: the rooms the thread runs in, in order. A *stay* is a run of events in one room; a
  *return* is a stay in a room the message had left before. Grows with the batch's pages.
- **path**: the calls that enter another room, each distinct one once (a call is known by the path of
  functions that entered rooms before it, so the loop over a batch's pages counts once), walked depth
  first with the returns to the caller's room: the path of one page through the rooms, as one would
  follow it in the source. Calls into the shared values every room uses (``messages``, ``logs``,
  ``tenancy``, ``urls``, ``errors``) are left out.

Printed per scrape message, for both: stays, rooms, returns, the stays in ``render`` and how often the
message crossed between ``stages`` and ``render``; for the path also the sequence itself.

    PYTHONPATH=shared .venv/bin/python infra/bench/scrape_rooms.py [--json OUT]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ENTRY = ("stages/scrape.py", "handle")
# The bottom layers (docs/architecture.md): every room uses them, as it uses the standard library.
SHARED_VALUES = frozenset({"messages", "logs", "tenancy", "urls", "errors"})


def room_of(frame: FrameType | None) -> str | None:
    """The room of the module ``frame`` runs in: ``gleaner.<room>`` collapsed to ``<room>``; None outside Gleaner."""
    if frame is None:
        return None
    name = frame.f_globals.get("__name__", "")
    if not name.startswith("gleaner.") and name != "gleaner":
        return None
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "gleaner"


class Node:
    """A call that entered a room, and the distinct calls into other rooms made from it."""

    __slots__ = ("children", "room")

    def __init__(self, room: str) -> None:
        self.room = room
        self.children: dict[object, Node] = {}

    def walk(self, seq: list[str]) -> None:
        for child in self.children.values():
            seq.append(child.room)
            child.walk(seq)
            seq.append(self.room)


class Message:
    """One scrape message being followed in its thread."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.trace = ["stages"]
        self.root = Node("stages")
        self.active: dict[int, Node] = {}  # id(frame) -> the node its calls hang under


class Rooms:
    """Per thread: the scrape message being followed; each finished one kept."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.messages: list[Message] = []
        self.lock = threading.Lock()

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event not in ("call", "return"):
            return
        code = frame.f_code
        entry = code.co_name == ENTRY[1] and code.co_filename.endswith(ENTRY[0])
        message: Message | None = getattr(self.local, "message", None)
        if message is None:
            if entry and event == "call":
                message = self.local.message = Message(len(frame.f_locals["message"].document_ids))
                message.active[id(frame)] = message.root
            return
        if entry and event == "return":
            with self.lock:
                self.messages.append(message)
            self.local.message = None
            return
        room = room_of(frame if event == "call" else frame.f_back)
        if room is not None and room != message.trace[-1]:
            message.trace.append(room)
        if event == "return":
            message.active.pop(id(frame), None)
            return
        own = room_of(frame)
        if own is None:
            return
        caller = frame.f_back
        while caller is not None and id(caller) not in message.active:
            caller = caller.f_back
        if caller is None:
            return
        parent = message.active[id(caller)]
        if own == parent.room or own in SHARED_VALUES:
            message.active[id(frame)] = parent
        else:
            key = (code.co_filename, code.co_firstlineno)
            message.active[id(frame)] = parent.children.setdefault(key, Node(own))


def collapsed(seq: list[str]) -> list[str]:
    return [room for i, room in enumerate(seq) if i == 0 or room != seq[i - 1]]


def summary(seq: list[str], pages: int) -> dict[str, Any]:
    seen: set[str] = set()
    returns = 0
    for room in seq:
        returns += room in seen
        seen.add(room)
    pairs = Counter(itertools.pairwise(seq))
    return {"pages": pages, "stays": len(seq), "rooms": len(seen), "returns": returns,
            "render_stays": seq.count("render"),
            "stages_render_crossings": pairs[("stages", "render")] + pairs[("render", "stages")]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="gleaner-rooms."))
    os.environ.update({"GLEANER_HOME": str(home), "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8", "GLEANER_HOST_DELAY": "0"})

    from tests.render_site import render_site

    from gleaner import tenancy
    from gleaner.app import Deps
    from gleaner.runtime.runner import crawl, new_request
    from gleaner.settings.config import Settings

    deps = Deps(Settings.from_env(os.environ))
    rooms = Rooms()
    with tenancy.all_tenants(), render_site() as site:
        deps.metadata  # noqa: B018 -- the embedded PostgreSQL starts here, outside the trace
        threading.setprofile(rooms)
        sys.setprofile(rooms)
        try:
            result = crawl(deps, new_request(site.url + "/", site_domain="spa.test", render="auto"))
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    deps.close()
    assert result["status"] == "finished", result
    report = []
    for m in rooms.messages:
        path: list[str] = ["stages"]
        m.root.walk(path)
        path = collapsed(path)
        one = {"trace": summary(m.trace, m.pages), "path": summary(path, m.pages), "path_rooms": path}
        report.append(one)
        print("scrape message of", m.pages, "pages")
        print("  trace:", json.dumps(one["trace"]))
        print("  path: ", json.dumps(one["path"]))
        print("  path: ", " > ".join(path))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
