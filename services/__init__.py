"""The Dossier services; each is a package runnable as `python -m services.<name>`."""
