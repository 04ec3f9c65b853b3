"""``python -m gleaner.cli``."""

from gleaner.cli import main

main()
