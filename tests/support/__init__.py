"""Test support: real infrastructure processes, an in-process service runner, the whole stack."""
