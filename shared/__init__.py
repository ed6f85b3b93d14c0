"""Code shared by every Dossier service: contracts, bus, database, outbox, blobs, settings, stack."""
