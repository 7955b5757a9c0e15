"""What the system tells about itself: Prometheus metrics (metrics.py, prometheus_dir.py), OpenTelemetry
spans (tracing.py), structured logs (logging_setup.py), and switching them on at start-up (setup.py).
Metrics and spans are commit observers of the runtime (workflows/runtime/observe.py).

May import: the engine, models and the runtime. Never workers, the scheduler, operators or dashboard/.
"""
