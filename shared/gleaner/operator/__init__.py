"""Operator control: what an operator steers a site with, as plain functions over :class:`gleaner.app.Deps`.

One module per concern, each a set of functions that take and return plain values (frozen dataclasses
with ``to_dict``) and raise :class:`gleaner.errors.InvalidInput` for bad input, so the CLI, the HTTP
API and Cloud Scheduler call the same code:

- ``sites``: the registry of crawled sites and their schedules (``gleaner sites``);
- ``rules``: persistent skip (gate 1) / block (gate 2) glob rules and their materialisation onto
  documents, re-applied by every map and sample (``gleaner rules``);
- ``schedule``: due sites, ``tick`` and the adaptive interval (``gleaner tick`` / ``watch``);
- ``review``: settling ``needs_review`` with an operator decision (``gleaner review``);
- ``routing``: the ADR's routings and composites (``gleaner composite``), and ingest's default routing;
- ``hooks``: where gate-2 status changes are announced (change events).
"""
