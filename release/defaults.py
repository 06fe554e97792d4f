"""The defaults that a command's `--help` shows and its stage applies, held here and
importing nothing, so that `release COMMAND --help` and a usage error load no stage: each
command imports its stage only when it runs (release/commands/)."""

from __future__ import annotations

PYPI_SIMPLE = "https://pypi.org/simple/"  # PyPI's simple index, where no other is named

# a wheel bigger than this is not read by verify or audit (GitHub's release assets stop at
# 2 GiB, PyPI's files well below): a body that never ends fills no disk
WHEEL_SIZE_LIMIT = 4 * 2**30

# `release verify`
VERIFY_CONCURRENCY = 16  # GitHub allows 100 concurrent requests; stay well under
CALLER_WORKFLOW = "release.yml"  # the file name `release init` gives the caller workflow
# the workflow an attestation must name
RELEASE_WORKFLOW = f".github/workflows/{CALLER_WORKFLOW}"

# `release audit`
AUDIT_CONCURRENCY = 4  # wheels read at once, each on disk until inspected
AUDIT_FILE_TIMEOUT_S = 600.0  # one wheel's download, retries included
AUDIT_TIMEOUT_S = 3600.0  # the whole audit
AUDIT_ATTEMPTS = 3

# `release build --compile-cache`, over matrix.yaml's compile-cache (release/building/settings)
COMPILE_CACHE_VARIABLE = "RELEASE_COMPILE_CACHE"

# compiles one cell's build runs at once, as --compile-jobs or matrix.yaml's
# build.compile-jobs asks: past the most, make and ninja fork until the machine stops
COMPILE_JOBS_RANGE = (1, 1024)
