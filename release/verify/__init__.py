"""Proving a release: every published URL serves the bytes that were built (checks), read
from the publish record or re-derived from the destinations when there is no dist/
(rederive); `run.verify_release` is the stage's one entry point.

Its modules:

- `checks`: `release verify`: every published URL resolves to the exact bytes that were built.
- `provenance`: Provenance: each published file has an attestation of its sha256, signed through
  Sigstore by this repository's release workflow at the release's tag.
- `rederive`: What a release published, re-derived from the destinations alone, for `release
  verify --tag` and `--latest` (the scheduled URL watch).
- `run`: One `release verify`: find what was published, then check it (release.verify.checks).
- `served`: Every wheel of the release inspected again from the bytes served, every index page
  of it read whole, the matrix's variants all there.
"""
