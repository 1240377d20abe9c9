"""Finding papers for a question: the planner, the text search and its parts, seeds, the 1.5-hop neighbourhood."""
