"""Retrieval quality: ``citeline eval`` on a BEIR-format collection and the baseline rows it compares with."""
