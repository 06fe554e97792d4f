"""The files the stages hand on: dist/manifest.json and the dist directory beside it,
published.json, release-manifest.json; each format's record, writer and reader together.
"""
