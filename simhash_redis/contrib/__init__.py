"""Integrations with other frameworks, each behind an optional dependency (`simhash-redis[scrapy]`)."""
