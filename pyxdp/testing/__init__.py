"""Test support: conformance vectors, kernel runners, strategies, pytest fixtures."""
