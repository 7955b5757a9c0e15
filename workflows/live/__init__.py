"""The workers' side of the live view: one compact Redis notice per commit (notices.py) and partial
llm replies, coalesced and never stored (partial.py). The web side is dashboard/live/.

May import: settings and Redis only (a leaf: stores and workers publish through it).
"""
