"""The HTTP client of a test process for the suite's own servers on 127.0.0.1 (the GitHub
stand-in, moto, pypiserver): httpx's top-level functions make a client, and load the CA
bundle, on each call (some 25 ms of CPU, hundreds of times a run). As with those functions,
no connection is kept between requests: a test that stops a server finds it stopped."""

from __future__ import annotations

from typing import Final

import httpx

from release.remote.httpclient import tls_context

LOCAL: Final = httpx.Client(verify=tls_context(), limits=httpx.Limits(max_keepalive_connections=0))
