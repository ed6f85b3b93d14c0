"""Runhost: admitted runs, the research loop, the consumption ledger and the run's working files."""
