"""A service's status, HTTP to it as plain data, the OpenAI-compatible API, and its load tests (the
plan, pure; the generator)."""
