"""Publishing the manifest's wheels: PyPI (twine), GitHub Releases (githubkit), a pip index.
The nightly channel's S3 publisher is in release.nightly."""
