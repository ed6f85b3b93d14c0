"""Pydantic models of every bus message and event, and the subject names. One module per service."""
