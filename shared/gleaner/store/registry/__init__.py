"""Sites and what operators set on them: the sites registry and per-host politeness, rules, schedules,
review decisions, and the request turns per host and scrape batches per site shared across processes."""
