from tests.cloud_fixtures import *  # noqa: F403  (emulator fixtures shared with tests/e2e)
