"""Implementations, on the database and Redis, of ports the engine declares and of shared counters:
circuit breakers shared by every worker (breakers.py; decisions in engine/breaker.py), the llm
response cache's table (llm_cache.py; key and interface in engine/llm_cache.py), and fixed-window
rate-limit counters in Redis (ratelimit.py).

May import: the engine and models only (a leaf under the runtime, the scheduler and the web).
"""
