"""release/remote/s3.py without a server: what the store refuses before any request."""

from __future__ import annotations

import pytest

from release.credentials import S3Credentials, Secret
from release.errors import PublishError
from release.remote.s3 import Bucket, S3Store

KEYS = S3Credentials(access_key=Secret("AKIAUNITTEST0000"), secret_key=Secret("unit-s3cret-77"))


@pytest.mark.parametrize(
    ("endpoint", "region", "why"),
    [
        ("http://[::1", "auto", "Invalid IPv6 URL"),
        ("not a url", "auto", "Invalid endpoint"),
        (None, "-x", "InvalidRegionError"),
        ("http://127.0.0.1:9000", "eu west", "InvalidRegionError"),
    ],
)
def test_a_bucket_no_client_can_be_made_for_is_one_line_not_a_traceback(
    endpoint: str | None, region: str, why: str
) -> None:
    """An endpoint botocore cannot read as a URL, a region it takes for none: making the
    client raised ValueError, and the command ended as "a bug in release" with its
    traceback (the values came from a dist's manifest.json, or passed matrix.yaml's
    checks: `http://[::1`, `-x`)."""
    with pytest.raises(PublishError) as refused:
        S3Store(Bucket(name="k3-wheels", endpoint=endpoint, region=region), KEYS)
    message = refused.value.message
    assert message.startswith("s3://k3-wheels")
    assert "no S3 client can be made for it" in message
    assert why in message
    assert "\n" not in message
    assert "AKIAUNITTEST0000" not in message
    assert refused.value.exit_code == 5
