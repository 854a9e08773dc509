"""The engine wing: sending requests (concurrency, retries, the cache), batch APIs,
worker processes, run sessions and progress; it knows no audit kind."""
