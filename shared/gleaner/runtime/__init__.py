"""The local runtime: the engine that runs crawls in one process, the runner, run control, dead letters,
early start, and the fetchers a run's stages are given."""
