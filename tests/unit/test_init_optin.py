"""A setup.py whose CUDA extensions are each built only when an environment switch is on
(apex's shape, mamba's through a module constant): init turns on the switch that builds the
most of them, names the ones it leaves off, the -gencode flags of a branch left off decide
no target, and a prebuilt download is skipped by a switch that forces the build, never by
one that leaves the extensions out."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import release.project.optin
from release.init.detect import targets_of
from release.init.torchaxes import force_build, force_cuda
from release.project import ProjectFiles, Reading, reading
from release.targets import GpuTarget

APEX_SHAPE = """\
import os
import sys
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

CORE_FLAGS = {"--cpp_ext", "--cuda_ext"}
ext_modules = []


def has_flag(flag, env_var):
    if flag in sys.argv or os.environ.get(env_var, "0") == "1":
        return True
    if flag not in CORE_FLAGS and os.environ.get("KIT_ALL_CONTRIB", "0") == "1":
        return True
    return False


if has_flag("--cpp_ext", "KIT_CPP_EXT"):
    ext_modules.append(CppExtension("kit_C", ["csrc/flatten.cpp"]))

if has_flag("--adam", "KIT_ADAM"):
    ext_modules.append(CUDAExtension("adam_cuda", ["csrc/adam.cu"]))

if has_flag("--cuda_ext", "KIT_CUDA_EXT"):
    ext_modules.append(CUDAExtension("amp_C", ["csrc/amp.cu"]))
    if sys.version_info >= (3, 10):
        ext_modules.append(CUDAExtension("fused_norm", ["csrc/norm.cu"]))

if has_flag("--group_norm", "KIT_GROUP_NORM"):
    ext_modules.append(
        CUDAExtension(
            "group_norm_cuda",
            ["csrc/group_norm.cu"],
            extra_compile_args={"nvcc": ["-gencode=arch=compute_90,code=sm_90"]},
        )
    )

setup(name="kit", version="0.1", ext_modules=ext_modules, cmdclass={"build_ext": BuildExtension})
"""


def read_setup(text: str) -> Reading:
    return reading(ProjectFiles(directory=Path("/p"), texts={"setup.py": text}))


def line_of(text: str, piece: str) -> int:
    (number,) = [n for n, line in enumerate(text.splitlines(), start=1) if piece in line]
    return number


def test_the_switch_that_builds_the_most_cuda_extensions_is_turned_on() -> None:
    switches = force_cuda(read_setup(APEX_SHAPE).setup_py)
    assert switches.env == (("KIT_CUDA_EXT", "1"),)
    (found,) = switches.found
    assert (found.key, found.value) == ("build.env", "KIT_CUDA_EXT=1")
    branch = line_of(APEX_SHAPE, '"KIT_CUDA_EXT"')
    read = line_of(APEX_SHAPE, "os.environ.get(env_var")
    assert found.source.startswith(f"setup.py:{branch}: every CUDA extension is built only when")
    assert f"has_flag() (setup.py:{read})" in found.source
    assert found.source.endswith("which builds 2 of the 4 (the most)")
    (check,) = switches.undecided
    assert check.place == f"setup.py:{line_of(APEX_SHAPE, 'KIT_CPP_EXT')}"
    for name in ("KIT_CPP_EXT", "KIT_ADAM", "KIT_GROUP_NORM"):
        assert f"{name} ({line_of(APEX_SHAPE, f'{name}')})" in check.text
    assert "KIT_CUDA_EXT (" not in check.text
    assert "KIT_ALL_CONTRIB" not in check.text
    assert switches.changes == ()


def test_the_flags_of_a_branch_left_off_decide_no_target() -> None:
    made = targets_of(read_setup(APEX_SHAPE), "torch")
    assert GpuTarget.parse("90") in made.sms
    assert len(made.sms) > 1
    assert not any("-gencode" in change.text for change in made.changes)
    on_by_default = APEX_SHAPE.replace('if has_flag("--group_norm", "KIT_GROUP_NORM"):', "if 1:")
    made = targets_of(read_setup(on_by_default), "torch")
    assert [str(sm) for sm in made.sms] == ["90"]
    assert any("hard-codes nvcc's -gencode flags" in change.text for change in made.changes)


def test_a_switch_spelled_in_place_and_the_shapes_that_are_no_opt_in() -> None:
    spelled = """\
import os
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
exts = []
if os.environ.get("BUILD_KIT_CUDA", "0").lower() in ("1", "true"):
    exts.append(CUDAExtension("k", ["k.cu"]))
setup(name="k", ext_modules=exts)
"""
    switches = force_cuda(read_setup(spelled).setup_py)
    assert switches.env == (("BUILD_KIT_CUDA", "1"),)
    assert "its test is on with BUILD_KIT_CUDA=1" in switches.found[0].source
    assert switches.undecided == ()
    # on unless it is turned off: a build that sets nothing builds it
    on_by_default = spelled.replace('"BUILD_KIT_CUDA", "0"', '"BUILD_KIT_CUDA", "1"')
    assert force_cuda(read_setup(on_by_default).setup_py).env == ()
    # a CUDA extension built with no switch: the others are extras, none is turned on
    unguarded = spelled.replace("setup(", 'exts.append(CUDAExtension("core", ["core.cu"]))\nsetup(')
    assert force_cuda(read_setup(unguarded).setup_py) == force_cuda(None)
    # a variable the cell gives the build (CUDA_HOME) is set: nothing to turn on
    given = spelled.replace('os.environ.get("BUILD_KIT_CUDA", "0")', 'os.getenv("CUDA_HOME", "")')
    assert force_cuda(read_setup(given).setup_py) == force_cuda(None)
    # a variable the build's own processes read is never build.env: a check says so
    process = given.replace("CUDA_HOME", "LD_PRELOAD")
    switches = force_cuda(read_setup(process).setup_py)
    assert switches.env == ()
    assert switches.found == ()
    (check,) = switches.undecided
    assert "LD_PRELOAD is read by the build's own processes" in check.text


MAMBA_SHAPE = """\
import os
import urllib.request
from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

FORCE_BUILD = os.getenv("KIT_FORCE_BUILD", "FALSE") == "TRUE"
KEEP_CUDA_BUILD = os.getenv("KIT_KEEP_CUDA_BUILD", "FALSE") == "TRUE"
ext_modules = []
if KEEP_CUDA_BUILD:
    ext_modules.append(CUDAExtension("kit_cuda", ["csrc/scan.cu"]))


class CachedWheelsCommand(_bdist_wheel):
    def run(self):
        if FORCE_BUILD or not KEEP_CUDA_BUILD:
            return super().run()
        urllib.request.urlretrieve("https://example.invalid/kit.whl", "kit.whl")


setup(name="kit", version="1.0", ext_modules=ext_modules,
      cmdclass={"bdist_wheel": CachedWheelsCommand, "build_ext": BuildExtension})
"""


def test_a_switch_held_in_a_constant_opts_in_and_never_forces_the_build_by_leaving_it_out() -> None:
    """mamba's shape: KEEP_CUDA_BUILD opts the CUDA extension in, and run() builds where
    FORCE_BUILD is on or KEEP_CUDA_BUILD off: build.env turns both on, never KEEP off."""
    setup_py = read_setup(MAMBA_SHAPE).setup_py
    cuda = force_cuda(setup_py)
    assert cuda.env == (("KIT_KEEP_CUDA_BUILD", "TRUE"),)
    branch = line_of(MAMBA_SHAPE, "if KEEP_CUDA_BUILD:")
    assert cuda.found[0].source.startswith(f"setup.py:{branch}: every CUDA extension")
    assert cuda.found[0].source.endswith("on with KIT_KEEP_CUDA_BUILD=TRUE, which builds it")
    build = force_build(setup_py)
    assert build.env == (("KIT_FORCE_BUILD", "TRUE"),)
    fetch, read = line_of(MAMBA_SHAPE, "urlretrieve"), line_of(MAMBA_SHAPE, "FORCE_BUILD =")
    assert build.found[0].source.startswith(
        f"setup.py:{fetch}: CachedWheelsCommand.run() downloads a prebuilt wheel unless "
        f"KIT_FORCE_BUILD=TRUE (setup.py:{read})"
    )
    # with no FORCE_BUILD, only turning the extension off would build: a change, not a switch
    unforced = MAMBA_SHAPE.replace(
        "if FORCE_BUILD or not KEEP_CUDA_BUILD:", "if not KEEP_CUDA_BUILD:"
    )
    build = force_build(read_setup(unforced).setup_py)
    assert build.env == ()
    (change,) = build.changes
    assert "no environment variable skips the download" in change.text


def test_a_download_inside_the_branch_is_skipped_by_the_value_that_keeps_it_from_running() -> None:
    downloads_first = MAMBA_SHAPE.replace(
        """        if FORCE_BUILD or not KEEP_CUDA_BUILD:
            return super().run()
        urllib.request.urlretrieve("https://example.invalid/kit.whl", "kit.whl")""",
        """        if os.environ.get("KIT_PREBUILT", "1") != "0":
            urllib.request.urlretrieve("https://example.invalid/kit.whl", "kit.whl")
            return
        super().run()""",
    )
    assert force_build(read_setup(downloads_first).setup_py).env == (("KIT_PREBUILT", "0"),)


def test_a_switch_function_is_read_once_however_many_ifs_call_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A setup.py of 5,000 `if has_flag(...)` around a has_flag of 3,000 tests took more
    than 300 s to read (the function read again at every call): it is read once."""
    reads: list[str] = []
    real = release.project.optin._function_tests

    def counted(function: ast.FunctionDef, most: int) -> Iterator[tuple[ast.expr, ...]]:
        reads.append(function.name)
        return real(function, most)

    monkeypatch.setattr(release.project.optin, "_function_tests", counted)
    calls = "".join(
        f'if has_flag("--x{n}", "KIT_X{n}"):\n    ext_modules.append(CUDAExtension("x{n}", []))\n'
        for n in range(200)
    )
    text = APEX_SHAPE.replace("setup(name=", calls + "setup(name=")
    opt_ins = read_setup(text).setup_py
    assert opt_ins is not None
    assert reads == ["has_flag"]
    assert len(opt_ins.opt_ins.switches) == 204
