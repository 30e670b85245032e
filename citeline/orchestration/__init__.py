"""Prefect: the ingestion flow with each pipeline step a task, its parameters, its reports in the UI, and the
scheduled deployment. ``flows/`` at the repository root holds the entry points Prefect loads."""
