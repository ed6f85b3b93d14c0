"""The `dossier` command line: a thin client of the gateway's HTTP API."""
