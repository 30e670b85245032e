"""Prefect flows over citeline's library functions."""
