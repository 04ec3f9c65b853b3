"""The ``gleaner`` command line.

``base`` holds the ``main`` group and what every command shares (settings, dependencies, one-line
errors); each other module registers the commands of one concern on ``main``. A new concern gets its
own module here and one import line below.
"""

import sys

from gleaner.runtime.earlystart import end_quickly, is_gleaner, start_database

if is_gleaner(sys.argv[0]):  # first: the embedded database starts while the modules below are imported
    end_quickly()
    start_database(sys.argv[1:])

import gleaner.cli.submit  # noqa: F401  (gleaner submit: a crawl to a deployed Gleaner)

# Each registers its commands; runctl after reading, whose `runs` it wraps in the run-control group.
from gleaner.cli import (  # noqa: F401
    agents,
    changes,
    composites,
    crawl,
    database,
    info,
    oneshot,
    operating,
    origins,
    provenance,
    reading,
    references,
    runctl,
    search,
    tokens,
    versions,
)
from gleaner.cli.base import main

__all__ = ["main"]
