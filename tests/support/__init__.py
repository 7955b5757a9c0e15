"""Test support shared by tests and benchmarks (local stand-ins for outside services)."""
