"""Provenance: PEP 740 attestations and GitHub's build-provenance bundles of the files a
release publishes, and whether their Sigstore signatures hold for the signer the release
expects. `release publish` makes and checks them before an upload (release.publish), and
`release verify` fetches them from PyPI's integrity API or GitHub's attestations API and
holds each file to them (release.verify.provenance, the verify stage's checks, calls into
this package).

Its modules:

- `attestation`: PEP 740's records, read with pypi-attestations (this project's one user of it).
- `signature`: Whether an attestation's Sigstore signature holds, and whether the release's
  workflow made it.
"""
