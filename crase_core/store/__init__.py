"""The storage engine: a corpus on disk (JSONL, memory-mapped columns, text index, segments, embeddings)."""
