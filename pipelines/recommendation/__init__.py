"""Recommendation: link prediction from users to items on a generated rating graph."""
