"""release.toolchain.provision's reading of pip: why it refused a pin, and where its own
configuration comes from (`pip config debug`), from texts pip printed on this machine."""

from __future__ import annotations

import pytest

from release.errors import ToolchainError
from release.proc import Completed
from release.toolchain.provision import check_pip_install, pip_config_sources, pip_reason

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

# SageAttention's build requirements beside the torch init once chose for it
DEPENDENCY_CONFLICT = (
    (
        "ERROR: Cannot install setuptools<75 and >=62, torch==2.13.0 and torch==2.13.0+cpu "
        "because these package versions have conflicting dependencies.\n"
    )
    + """
The conflict is caused by:
    The user requested setuptools<75 and >=62
    torch 2.13.0+cpu depends on setuptools>=77.0.3
    The user requested setuptools<75 and >=62
    torch 2.13.0 depends on setuptools>=77.0.3

To fix this you could try to:
1. loosen the range of package versions you've specified

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
"""
)

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


def test_a_dependency_that_excludes_a_requirement_is_said_with_the_conflicts_hint() -> None:
    assert pip_reason(DEPENDENCY_CONFLICT) == (
        "Cannot install setuptools<75 and >=62, torch==2.13.0 and torch==2.13.0+cpu; "
        "torch 2.13.0+cpu depends on setuptools>=77.0.3; "
        "torch 2.13.0 depends on setuptools>=77.0.3"
    )
    asked: list[str] = []

    def config() -> str:
        asked.append("config")
        return "/etc/xdg/pip/pip.conf (global.constraint)"

    failed = Completed(returncode=1, output="", stderr=DEPENDENCY_CONFLICT, seconds=1.0)
    with pytest.raises(ToolchainError) as raised:
        check_pip_install(
            failed, ["torch==2.13.0", "setuptools>=62,<75"], python="python3",
            conflict_hints={"torch": "pin another torch"}, config=config,
        )  # fmt: skip
    assert "torch 2.13.0 depends on setuptools>=77.0.3" in raised.value.message
    assert raised.value.hint == "pin another torch"
    assert asked == []  # not pip's configuration: nothing there refused it
    # a constraint's refusal still names where pip's configuration comes from
    refused = Completed(returncode=1, output="", stderr=RESOLUTION_IMPOSSIBLE, seconds=1.0)
    with pytest.raises(ToolchainError) as constrained:
        check_pip_install(
            refused,
            ["torch==2.15.0"],
            python="python3",
            conflict_hints={"torch": "x"},
            config=config,
        )
    assert "global.constraint" in (constrained.value.hint or "")

    # the frontend's own requirement (SageAttention's packaging<24 beside build 1.6.1)
    frontend = Completed(
        returncode=1,
        output="",
        stderr="ERROR: Cannot install build==1.6.1 and packaging<24 and >=21 because these "
        "package versions have conflicting dependencies.\n\nThe conflict is caused by:\n"
        "    The user requested packaging<24 and >=21\n"
        "    build 1.6.1 depends on packaging>=24.0\n",
        seconds=1.0,
    )
    with pytest.raises(ToolchainError) as widen:
        check_pip_install(
            frontend, ["build==1.6.1"], python="python3",
            conflict_hints={"torch": "pin another torch", "build": "widen it"}, config=config,
        )  # fmt: skip
    assert widen.value.hint == "widen it"
