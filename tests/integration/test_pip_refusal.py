"""Provisioning refused by pip's own configuration (issue 42.5): a constraint in a pip.conf
refuses the pin; the error is pip's reason and the hint names where pip's settings come
from, by name only. A real pip, offline: its index is a directory of one small wheel."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from release import proc
from release.errors import ToolchainError
from release.toolchain import PinSet, install_pinset
from release.toolchain.pins import Pin
from tests.integration.wheels import PROJECT, make_wheel

SECRET = "s3cret-index-password"


def test_a_pin_pips_configuration_refuses_says_pips_reason_and_where_it_is_set(
    tmp_path: Path,
) -> None:
    links = tmp_path / "links"
    links.mkdir()
    make_wheel(links, version="2.0.0", platform="any")
    conf = tmp_path / "pip.conf"
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(f"{PROJECT}<2\n", encoding="utf-8")
    conf.write_text(f"[global]\nconstraint = {constraints}\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        PIP_CONFIG_FILE=str(conf),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(links),
        PIP_INDEX_URL=f"https://user:{SECRET}@index.example/simple",
    )
    pinset = PinSet("fixture", (Pin(PROJECT, "2.0.0"),), "any")
    with pytest.raises(ToolchainError) as caught:
        install_pinset(pinset, tmp_path / "dest", proc.run, python=sys.executable, env=env)
    error = caught.value
    assert error.exit_code == 3
    assert f"pip installing {PROJECT}==2.0.0 failed" in error.message
    assert f"The user requested (constraint) {PROJECT}<2" in error.message
    assert error.hint is not None
    assert f"{conf} (global.constraint)" in error.hint
    assert "PIP_INDEX_URL" in error.hint  # named, never its value
    assert "PIP_CONFIG_FILE=/dev/null" in error.hint
    assert SECRET not in "\n".join(error.lines())
    assert not (tmp_path / "dest").exists()
