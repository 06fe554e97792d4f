"""release.project.localversion: a setup.py whose version function adds a local label when
a variable is on, and whose default turns it on (DeepGEMM's DG_USE_LOCAL_VERSION); or adds
one that nothing turns off (DeepEP's version function, FlashMLA's version expression)."""

from __future__ import annotations

import pytest

from release.project.localversion import local_version, local_version_switch

DEEP_GEMM = """\
import os
import subprocess

DG_USE_LOCAL_VERSION = int(os.getenv('DG_USE_LOCAL_VERSION', '1')) == 1


def get_package_version():
    public_version = '2.5.0'
    revision = ''
    if DG_USE_LOCAL_VERSION:
        try:
            cmd = ['git', 'rev-parse', '--short', 'HEAD']
            revision = '+' + subprocess.check_output(cmd).decode('ascii').rstrip()
        except Exception:
            revision = '+local'
    return f'{public_version}{revision}'


setuptools.setup(name='deep_gemm', version=get_package_version())
"""


def test_deep_gemms_switch_is_on_by_default_and_0_turns_it_off() -> None:
    switch = local_version_switch(DEEP_GEMM)
    assert switch is not None
    assert (switch.name, str(switch.place), switch.default, switch.off) == (
        "DG_USE_LOCAL_VERSION",
        "setup.py:4",
        "1",
        "0",
    )
    assert (switch.function, str(switch.label)) == ("get_package_version", "setup.py:13")


@pytest.mark.parametrize(
    ("test", "off"),
    [
        ('os.environ.get("K3_LOCAL", "true").lower() in ("1", "true")', "0"),
        ('os.getenv("K3_LOCAL", "yes") != "no"', "no"),
        ('not os.getenv("K3_NO_LOCAL", "")', "0"),  # any value turns it off
        ('os.getenv("K3_LOCAL", "") != ""', None),  # its default is off: nothing to say
        ('os.getenv("K3_LOCAL")', None),  # no default: off
        ('os.getenv("K3_LOCAL", "1") == "1" and os.getenv("K3_OTHER", "1") == "1"', None),
        ("some_function()", None),  # not worked out: nothing is guessed
    ],
)
def test_a_switch_is_worked_out_for_its_default_and_the_values_that_turn_it_off(
    test: str, off: str | None
) -> None:
    text = DEEP_GEMM.replace("int(os.getenv('DG_USE_LOCAL_VERSION', '1')) == 1", test).replace(
        "DG_USE_LOCAL_VERSION", "SWITCH"
    )
    switch = local_version_switch(text)
    assert (switch.off if switch is not None else None) == off


def test_a_label_from_a_variable_that_is_off_by_default_or_no_label_says_nothing() -> None:
    flash = DEEP_GEMM.replace("'+' + subprocess", "'.' + subprocess").replace("'+local'", "''")
    assert local_version_switch(flash) is None
    literal = DEEP_GEMM.replace("version=get_package_version()", "version='2.5.0'")
    assert local_version_switch(literal) is None
    assert local_version_switch("setup(\n") is None


DEEP_EP = """\
import subprocess


def get_package_version():
    public_version = '2.1.0'
    try:
        cmd = ['git', 'rev-parse', '--short', 'HEAD']
        revision = '+' + subprocess.check_output(cmd).decode('ascii').rstrip()
    except:
        revision = '+local'
    return f'{public_version}{revision}'


setuptools.setup(name='deep_ep', version=get_package_version())
"""

FLASH_MLA = """\
try:
    rev = '+' + subprocess.check_output(['git', 'rev-parse', '--short', 'HEAD']).decode()
except Exception as _:
    rev = '+' + datetime.now().strftime("%Y-%m-%d-%H-%M-%S")

setup(name="flash_mla", version="1.0.0" + rev)
"""


def test_a_label_no_variable_turns_off_is_found_in_the_function_or_the_expression() -> None:
    deep_ep = local_version(DEEP_EP)
    assert deep_ep.switch is None
    assert deep_ep.label is not None
    assert (deep_ep.label.function, str(deep_ep.label.label)) == (
        "get_package_version",
        "setup.py:8",
    )
    flash_mla = local_version(FLASH_MLA)
    assert flash_mla.label is not None
    assert (flash_mla.label.function, str(flash_mla.label.label)) == (None, "setup.py:2")
    # DeepGEMM's label is under its switch; a literal version or one under a test has none
    assert local_version(DEEP_GEMM).label is None
    assert (
        local_version(DEEP_EP.replace("version=get_package_version()", "version='2.1.0'")).label
        is None
    )
    guarded = (
        FLASH_MLA.replace("try:", "if os.getenv('LOCAL'):\n  try:")
        .replace("\n    ", "\n      ")
        .replace("\nexcept", "\n  except")
    )
    assert local_version(guarded).label is None
    named = FLASH_MLA.replace('version="1.0.0" + rev', "version=VERSION").replace(
        "rev = '+'", "VERSION = '1.0.0' + '+'"
    )
    assert local_version(named).label is not None  # a name assigned in a block
    # reading a label is not adding one
    stripped = DEEP_EP.replace("revision = '+' + subprocess", "revision = '.' + subprocess")
    stripped = stripped.replace(
        "revision = '+local'", "revision = ''\n    public_version = public_version.split('+')[0]"
    ).replace("    try:", "    assert '+' not in public_version\n    try:")
    assert local_version(stripped).label is None
