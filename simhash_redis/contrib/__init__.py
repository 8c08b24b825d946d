"""Integrations with other frameworks, each behind an optional dependency (the `scrapy` extra)."""
