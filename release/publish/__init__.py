"""Publishing the manifest's wheels: PyPI (twine), GitHub Releases (githubkit), a pip index."""
