"""The live view in the web process: WebSocket consumers (consumers.py) fed by one relay per process
(relay.py) that hears workers' commit notices on Redis and reads the committed events on the event
loop (events.py).

May import: workflows/ (models, engine, observability.live), dashboard.security.
"""
