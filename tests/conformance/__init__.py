"""Tests of the MCP conformance fixture."""
