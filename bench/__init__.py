"""Benchmarks for Steadyflow (`make bench`, or `python -m bench`).

Each workload runs against a throwaway database (a `<name>_bench` PostgreSQL database when
DATABASE_URL points to PostgreSQL, otherwise a SQLite file in a temporary directory), a private Redis
and real worker processes, and prints one JSON line on stdout. See docs/BENCHMARKS.md.

This package must not import Django at module level: __main__ points DATABASE_URL at the throwaway
database before Django reads its settings.
"""
