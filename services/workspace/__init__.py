"""Workspace service: goals, associations, the bounded catalog, checkpoints and the lifecycle."""
