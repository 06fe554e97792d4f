"""The s3 kind (AWS S3, Cloudflare R2, MinIO): it holds the nightly channel, never a release
(the matrix refuses it as a CUDA version's destination). The channel's publisher, pages and
checks are release.nightly's; here it answers what every stage asks of a kind: it takes no
release, its index is one of links (checked link by link), its files carry no attestations,
and it has no final releases.
"""

from __future__ import annotations

from release.destinations.base import KindBase


class S3Kind(KindBase):
    name = "s3"


S3 = S3Kind()
