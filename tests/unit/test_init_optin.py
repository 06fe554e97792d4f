"""A setup.py whose CUDA extensions are each built only when an environment switch is on
(apex's shape): init turns on the switch that builds the most of them, names the ones it
leaves off, and the -gencode flags of a branch left off decide no target."""

from __future__ import annotations

from pathlib import Path

from release.init.detect import targets_of
from release.init.torchaxes import force_cuda
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
    assert "builds 2 of them" in found.source
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
