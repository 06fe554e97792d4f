"""Publishing the manifest's wheels: PyPI (twine), GitHub Releases (githubkit), a pip index.
The nightly channel's S3 publisher is in release.nightly.

Its modules:

- `decide`: The publisher seam and the one decision of what publishing does with each file.
- `github`: GitHub Releases: one release per tag, assets uploaded to a draft, verified, then
  published.
- `growth`: How much each wheel grew since the previous release, for `release plan`.
- `index`: The pip index of the GitHub-hosted variants: PEP 503 HTML and PEP 691 JSON.
- `pages`: The index on a GitHub Pages branch: the rendered tree committed as the whole content
  of a branch, without touching the checkout's working tree or index, and optionally pushed.
- `plan`: `release plan`: every cell of the matrix, the wheel it makes, where that wheel goes,
  and what the destination already holds under its name.
- `pypi`: The PyPI publisher: refusal checks read from the wheel, existence by sha256, twine
  uploads.
- `run`: One `release publish`: plan every destination (read-only), then stage, commit, index.
"""
