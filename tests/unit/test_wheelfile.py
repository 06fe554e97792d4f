"""release.wheelfile: the one RECORD hash, pinned to known digests."""

from __future__ import annotations

import pytest

from release.wheelfile import record_hash


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"),
        (b"PK", "sha256=_Kt_zCtM_9m7RQA7_C5GigTvb3fKggCnNB8CdjFYTSU"),
        (bytes(range(256)), "sha256=QK_y6dLYki5Hr9RkjmlnSXFYeF-9Hahw5xECZr-USIA"),
    ],
)
def test_the_record_hash_is_sha256_in_urlsafe_base64_without_padding(
    data: bytes, expected: str
) -> None:
    assert record_hash(data) == expected
