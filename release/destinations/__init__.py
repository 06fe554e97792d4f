"""Where a release goes: everything the stages ask of a destination, one module per kind
(as backends/ is for build systems), and one Reach per command that builds their clients
and credentials from its environment.

Its modules:

- `base`: The `DestinationKind` protocol each kind implements (plan, stage, commit, what
  verify checks and where, a release re-derived from it, growth, the nightly channel's
  finals) and the `Publisher` a kind makes for one destination.
- `buildtag`: A rebuilt wheel published as the next build of its name, beside the bytes a
  destination holds under that name (`--build-tag`).
- `companions`: What is published beside the wheels: `.metadata`, `.provenance`, the NCCL
  files, release-manifest.json.
- `decide`: The one decision of what publishing does with each file.
- `git_index`: The git-index kind: a directory of a git repository listing a github
  destination's wheels beside other projects' pages, written as one commit.
- `github`: The GitHub Releases kind.
- `github_publisher`: GitHub Releases: one release per tag, assets uploaded to a draft,
  verified, then published.
- `index`: The pip index of the GitHub-hosted variants: PEP 503 HTML and PEP 691 JSON.
- `pypi`: The PyPI kind.
- `pypi_publisher`: The PyPI publisher: refusal checks read from the wheel, existence by sha256,
  twine uploads.
- `reach`: How one command reaches its destinations: every client and credential, built once
  from its environment.
- `registry`: The destination kinds by name.
- `s3`: The s3 kind: the nightly channel's storage, never a release.
"""
