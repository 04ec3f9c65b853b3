"""Gleaner: an auditable, always-current markdown copy of the web sources an organisation depends on."""

__version__ = "0.1.0"
