"""Talking to servers: the HTTP client, retries, the GitHub REST client and its model, and
simple-index pages.
"""
