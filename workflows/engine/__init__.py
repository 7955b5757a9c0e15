"""The workflow engine: plain Python, no HTTP framework, Channels, RQ or database imports.

Time is passed in; everything here is unit-testable without a database.
"""
