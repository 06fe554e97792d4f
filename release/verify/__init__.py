"""Proving a release: every published URL serves the bytes that were built, re-derived from the
destinations when there is no dist/.
"""
