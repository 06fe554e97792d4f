"""Publishing the manifest's wheels to their destinations (release.destinations: PyPI,
GitHub Releases), the pip index of the GitHub-hosted variants on GitHub Pages, and `release
plan`. The nightly channel's S3 publisher is in release.nightly.

Its modules:

- `growth`: How much each wheel grew since the previous release, for `release plan`.
- `indexes`: The indexes one `release publish` writes: asked first, before the release's first
  upload, whether each index that lists a destination (a git index) can take its pages
  (`check_indexes`), then regenerated whole from every release its destinations hold
  (`regenerate_indexes`): to `--index-dir` (and a Pages branch), or one commit of a git index.
- `pages`: The index on a GitHub Pages branch: the rendered tree committed as the whole content
  of a branch, without touching the checkout's working tree or index, and optionally pushed.
- `plan`: `release plan`: every cell of the matrix, the wheel it makes, where that wheel goes,
  and what the destination already holds under its name.
- `run`: One `release publish`: plan every destination (read-only), then stage, commit, index.
"""
