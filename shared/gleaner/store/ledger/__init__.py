"""Runs and their ledger: a run, its statuses and control, its robots.txt decisions, and one ledger row per
URL with what each stage decided and fetched (discovery, sample decisions, prefetched answers, fetch
outcomes, 304s, rendering, lastmod), the run's counters, and replays."""
