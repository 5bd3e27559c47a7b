"""Model builders written with hetbed's own graph API."""
