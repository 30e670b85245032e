"""Sharded indexes: a root of N complete indexes, ingested in parallel and searched as one, locally on threads
or on a Dask cluster."""
