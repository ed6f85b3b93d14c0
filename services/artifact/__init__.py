"""Artifact service: retained HTML files (bytes in object storage), retention and expiry, downloads."""
