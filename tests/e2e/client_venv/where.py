"""Prints where `dossier_client` is imported from, and that the server's packages are not there."""

import importlib.util

import dossier_client

assert importlib.util.find_spec("shared") is None and importlib.util.find_spec("services") is None
print(dossier_client.__file__)
