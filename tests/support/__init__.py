"""Helpers shared by the test suites (fixtures live in conftest.py files)."""
