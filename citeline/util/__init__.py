"""Leaf helpers with no citeline imports of their own: arrays, chunk ids, output formats and timestamps."""
