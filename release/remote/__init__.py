"""Talking to servers: the HTTP client, retries, the GitHub REST client and its model,
simple-index pages, and a pip index committed to a git repository.

Its modules:

- `gitindex`: A pip index committed to a directory of a git repository, beside other projects'
  pages: sgl-project/whl's layout (`cu129/`, `cu130/` on its gh-pages branch, each holding one
  folder per project and a root page listing them, served by GitHub Pages).

- `gitpages`: The pure core of a pip index committed to a git repository
  (release.remote.gitindex runs git): what a project's pages change on the branch, writing or
  deleting nothing that is not the project's own.
- `github`: The one GitHub REST client: githubkit with this program's retry policy, pagination,
  digests, and every call the publisher, the plan, the index and verify make.
- `github_model`: What GitHub's REST API returns, as this program reads it: releases, assets,
  names and URLs.
- `httpclient`: The one HTTP edge: the httpx client every stage uses, credentials scoped to the
  origins they belong to, and downloads that are hashed as they stream, with bounded retries.
- `lazywheel`: The METADATA of a wheel on a server, read with a few HTTP range requests (the
  zip's central directory and the one member) instead of downloading the wheel.
- `retry`: Retrying a remote call with backoff, under a bound on the total time an operation
  takes.
- `s3`: The one S3 edge: AWS S3, Cloudflare R2 and MinIO through boto3, the maintained client.
- `socket_deadline`: httpcore's network backend with a deadline: each socket operation
  (connect, TLS, each read and write) of a request has its timeout cut to the time the
  thread's deadline leaves (`retry.bounded_by`), and a timeout the cut caused says the deadline
  passed.
- `simple_index`: Reading a project page of any PEP 503 (HTML) / PEP 691 (JSON) simple index:
  PyPI, pypiserver, the index this tool writes, and the projects a root page lists.
"""
