"""A stand-in GitHub REST server for the publisher's tests; see ``server.py``."""

from .faults import (
    Fault,
    FaultSet,
    primary_rate_limit,
    rate_limit_429_retry_after,
    secondary_403_message,
    secondary_403_retry_after,
    secondary_429_bare,
    server_errors,
)
from .records import Asset, Release, github_asset_name
from .server import DEFAULT_REPO, GitHubStandIn, LoggedRequest

__all__ = [
    "DEFAULT_REPO",
    "Asset",
    "Fault",
    "FaultSet",
    "GitHubStandIn",
    "LoggedRequest",
    "Release",
    "github_asset_name",
    "primary_rate_limit",
    "rate_limit_429_retry_after",
    "secondary_403_message",
    "secondary_403_retry_after",
    "secondary_429_bare",
    "server_errors",
]
