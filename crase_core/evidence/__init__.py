"""Claims and their support: extracted claims and the claim-level support scorers."""
