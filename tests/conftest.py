"""Test configuration: the shared fixtures live in tests/support (STYLE §11)."""

pytest_plugins = ["tests.support.fixtures"]
