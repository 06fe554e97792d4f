"""Where a release goes: everything the stages ask of a destination, one module per kind.

Its modules:

- `decide`: The one decision of what publishing does with each file.
- `github_publisher`: GitHub Releases: one release per tag, assets uploaded to a draft,
  verified, then published.
- `index`: The pip index of the GitHub-hosted variants: PEP 503 HTML and PEP 691 JSON.
- `pypi_publisher`: The PyPI publisher: refusal checks read from the wheel, existence by sha256,
  twine uploads.
"""
