"""The read side: the query plan (filters, ranking, passages, highlights, collapse), its ranking stages and the
results it returns."""
