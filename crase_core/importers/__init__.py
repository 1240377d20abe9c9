"""Bringing a user's literature in: OpenAlex and Semantic Scholar dumps, JSONL, and their embeddings."""
