"""Proving a release: every published URL serves the bytes that were built (checks), read
from the publish record or re-derived from the destinations when there is no dist/
(rederive); `run.verify_release` is the stage's one entry point.
"""
