"""Policies drive a run: each takes the model input and returns the next tool call (finish included)."""
