"""release.toolchain.provision's reading of pip: why it refused a pin, and where its own
configuration comes from (`pip config debug`), from texts pip printed on this machine."""

from __future__ import annotations

from release.toolchain.provision import pip_config_sources, pip_reason

RESOLUTION_IMPOSSIBLE = """\
Looking in links: /opt/wheels
ERROR: Cannot install torch==2.15.0 because these package versions have conflicting dependencies.

The conflict is caused by:
    The user requested torch==2.15.0
    The user requested (constraint) torch<=2.14.1

To fix this you could try to:
1. loosen the range of package versions you've specified
2. remove package versions to allow pip attempt to solve the dependency conflict

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
"""

NOT_FOUND = (
    "ERROR: Could not find a version that satisfies the requirement nvidia-cuda-nvcc==13.0.88 "
    "(from versions: none)\n"
    "ERROR: No matching distribution found for nvidia-cuda-nvcc==13.0.88\n"
)

CONFIG_DEBUG = """\
env_var:
  PIP_CERT='/etc/ssl/certs/ca-certificates.crt'
  PIP_INDEX_URL='https://user:pw@index.example/simple'
env:
global:
  /etc/xdg/pip/pip.conf, exists: True
    global.constraint: /etc/xdg/pip/constraints.txt
    global.cert: /etc/ssl/certs/ca-certificates.crt
site:
  /venv/pip.conf, exists: False
user:
  /root/.pip/pip.conf, exists: False
  /root/.config/pip/pip.conf, exists: True
    global.extra-index-url: https://user:pw@private.example/simple
"""


def test_the_resolvers_conflict_with_a_constraint_is_the_reason() -> None:
    assert pip_reason(RESOLUTION_IMPOSSIBLE) == (
        "Cannot install torch==2.15.0; The user requested (constraint) torch<=2.14.1"
    )


def test_a_version_the_index_lacks_is_the_reason() -> None:
    assert pip_reason(NOT_FOUND) == (
        "Could not find a version that satisfies the requirement nvidia-cuda-nvcc==13.0.88 "
        "(from versions: none); No matching distribution found for nvidia-cuda-nvcc==13.0.88"
    )


def test_a_failure_pip_does_not_explain_has_no_reason() -> None:
    assert pip_reason("ERROR: HTTP error 503 while getting https://x/y.whl\n") is None
    assert pip_reason("") is None


def test_the_configuration_is_named_by_file_and_key_never_by_value() -> None:
    sources = pip_config_sources(CONFIG_DEBUG)
    assert sources == (
        "the environment (PIP_CERT, PIP_INDEX_URL); "
        "/etc/xdg/pip/pip.conf (global.constraint, global.cert); "
        "/root/.config/pip/pip.conf (global.extra-index-url)"
    )
    assert pip_config_sources("env_var:\nenv:\nglobal:\n  /etc/pip.conf, exists: False\n") is None
