"""The files the stages hand on: dist/manifest.json and the dist directory beside it,
published.json, release-manifest.json; each format's record, writer and reader together
(attestations and their signatures are release.provenance's).

Its modules:

- `dist`: The release artifact: the manifest(s) in a dist directory and the wheels beside them.
- `manifest`: dist/manifest.json: what was built, the single input of publish and verify.
- `published`: `published.json`: where every built file went and where it is downloadable,
  written by `release publish` after each destination and read by `release verify` and `release
  pins`.
- `release_manifest`: `release-manifest.json`: the sha256 of every built file, published as a
  release asset by `release publish` and read back by `release verify --tag` when no dist/ is at
  hand.
- `sdistfile`: What the release's sdist must be (a gzip'd tar of files under one base directory,
  its PKG-INFO naming the release), checked alike after `release build --sdist` and wherever
  plan, publish and verify read it.
"""
