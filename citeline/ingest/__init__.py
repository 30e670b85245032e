"""Ingestion: the pipeline (discover, parse, plan, chunk, embed, commit) and what it needs: planning, freshness,
texts that are not files, removal, the run ledger rows and progress reports."""
