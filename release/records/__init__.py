"""The files the stages hand on: dist/manifest.json, the dist directory, published.json; each
format's writer and reader together.
"""
