"""The nightly channel: each commit's wheels on an S3 destination under `/<commit>/`, and
`/nightly/` moved to the newest complete, verified commit (docs/nightly.md). `release plan`,
`release publish` and `release verify` reach it with `--channel nightly`; it calls into
release.destinations (the publisher seam's decision, the index pages, the kinds' final
releases) and release.verify (the download and index checks) and owns the rest:

- `plan`: `release plan --channel nightly`, asked read-only and without credentials.
- `publish`: one `release publish --channel nightly`, from the dist to /nightly/ moved.
- `publisher`: the s3 publisher behind the `Publisher` seam: stage a commit, then commit it.
- `promotion`: the pure decisions: promotion, retention, the version order.
- `finals`: the latest final release on each destination, that a nightly must sort above.
- `pages`: the commit's and /nightly/'s PEP 503 and PEP 691 pages.
- `state`: `state.json`, the channel's state, its format, reader and writer.
- `layout`: where each object of the channel lives under the destination's prefix.
- `verify`: a commit's gate before /nightly/ moves, and the channel as it is.

The `nightly:` section of matrix.yaml stays in release.matrix.nightly: it is part of the
matrix model that release.matrix.load parses, and the build reads it too.
"""
