"""Publication service: publications and their immutable, hashed versions."""
