"""Settings: every setting with its default and reason, read from the environment and from gleaner.toml or
pyproject.toml."""
