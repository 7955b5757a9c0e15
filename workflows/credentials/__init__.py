"""Credentials: secrets and provider accounts encrypted at rest. crypto.py is the leaf that encrypts and
decrypts (settings and the engine's errors only, so model fields can use it); store.py validates,
rotates and looks credentials up for one step attempt; forms.py is the write-only editing form;
models.py holds the Credential rows (of the `workflows` app: workflows.models imports them).

May import: the engine, models (store.py and forms.py only) and triggers.models (rotation). Never the
runtime, workers or dashboard/.
"""
