"""The ``gleaner`` command line.

``base`` holds the ``main`` group and what every command shares (settings, dependencies, one-line
errors); each other module registers the commands of one concern on ``main``. A new concern gets its
own module here and one import line below.
"""

import gleaner.cli.submit  # noqa: F401  (gleaner submit: a crawl to a deployed Gleaner)
from gleaner.cli import (  # noqa: F401  (each registers its commands)
    changes,
    crawl,
    database,
    operating,
    provenance,
    reading,
    references,
    versions,
)
from gleaner.cli.base import main

__all__ = ["main"]
