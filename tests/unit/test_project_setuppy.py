"""release.project.setuppy: what a setup.py says, read with ast and never run."""

from __future__ import annotations

from release.project import read_setup_py
from release.project.setuppy import gencode_targets

# The shapes of PyTorch's extension template (pytorch/extension-cpp), written anew: a
# module-level name constant, py_limited_api decided by the torch version, bdist_wheel's
# floor under a condition, and CUDA only where torch.cuda.is_available().
TEMPLATE_SHAPED = """\
import os
import torch
from setuptools import setup
from torch.utils.cpp_extension import CppExtension, CUDAExtension, BuildExtension

library_name = "muladd_ops"

if torch.__version__ >= "2.6.0":
    py_limited_api = True
else:
    py_limited_api = False


def extensions():
    use_cuda = os.getenv("USE_CUDA", "1") == "1"
    use_cuda = use_cuda and torch.cuda.is_available()
    kind = CUDAExtension if use_cuda else CppExtension
    return [kind(f"{library_name}._C", ["a.cpp"],
                 extra_compile_args={"cxx": ["-DPy_LIMITED_API=0x03090000"]},
                 py_limited_api=py_limited_api)]


setup(
    name=library_name,
    version="0.0.1",
    ext_modules=extensions(),
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp39"}} if py_limited_api else {},
)
"""


def test_name_and_version_literals_and_module_constants_are_read_with_their_lines() -> None:
    read = read_setup_py(TEMPLATE_SHAPED)
    assert read.problem is None
    assert read.name is not None
    assert read.version is not None
    assert (read.name.value, str(read.name.place), str(read.name.via)) == (
        "muladd_ops",
        "setup.py:24",
        "setup.py:6",
    )
    assert read.name.source() == "setup.py:24 (library_name, setup.py:6)"
    assert (read.version.value, str(read.version.place)) == ("0.0.1", "setup.py:25")


def test_a_computed_version_is_its_expression_and_place() -> None:
    read = read_setup_py(
        "from setuptools import setup\n"
        "VERSION = open('VERSION').read()\n"
        "if 1:\n    NAME = 'x'\n"
        "setup(name=NAME, version=VERSION)\n"
    )
    assert read.name is not None
    assert read.version is not None
    assert read.name.value is None  # assigned under a condition: not a constant
    assert (read.version.value, read.version.expression) == (None, "VERSION")
    assert str(read.version.place) == "setup.py:5"
    assert read_setup_py("from setuptools import setup\nsetup(**kw)\n").name is None


def test_torch_extensions_py_limited_api_and_its_floor() -> None:
    read = read_setup_py(TEMPLATE_SHAPED)
    assert str(read.cuda_extension) == "setup.py:17"
    limited = read.limited_api
    assert limited is not None
    assert limited.on is None  # decided by the torch version at build time
    assert [str(p) for p in limited.assigned] == ["setup.py:9", "setup.py:11"]
    assert read.limited_api_floor is not None
    assert (read.limited_api_floor.value, str(read.limited_api_floor.place)) == (
        "cp39",
        "setup.py:28",
    )
    assert read.limited_api_define is not None
    assert read.limited_api_define.value == "0x03090000"
    plain = read_setup_py(
        "X(py_limited_api=True)\nY(options={'bdist_wheel': {'py_limited_api': tag()}})\n"
    )
    assert plain.limited_api is not None
    assert plain.limited_api.on is True
    assert plain.limited_api_floor is not None
    assert plain.limited_api_floor.expression == "tag()"


def test_a_cuda_gate_without_a_switch_and_one_a_variable_forces() -> None:
    (gate,) = read_setup_py(TEMPLATE_SHAPED).gates
    assert str(gate.place) == "setup.py:16"
    assert gate.forced_by == ()  # USE_CUDA can only turn CUDA off
    forced = read_setup_py(
        "import os, torch\n"
        'FORCE = os.getenv("FORCE_CUDA", "0") == "1"\n'
        "if torch.cuda.is_available() or FORCE:\n    pass\n"
        "cuda = (CUDA_HOME and torch.cuda.is_available()) or "
        'os.environ.get("MY_CUDA", "").lower() in ("true", "1")\n'
    )
    first, second = forced.gates
    assert [(s.name, s.on, str(s.place)) for s in first.forced_by] == [
        ("FORCE_CUDA", "1", "setup.py:2")
    ]
    assert [(s.name, s.on) for s in second.forced_by] == [("MY_CUDA", "true")]


def test_a_gpu_check_that_raises_or_builds_for_rocm_is_no_cuda_gate() -> None:
    # flash-attention's ROCm path: without a GPU (and GPU_ARCHS) the build stops
    read = read_setup_py(
        "import torch\n"
        "if not torch.cuda.is_available():\n"
        "    raise RuntimeError('no GPU detected')\n"
        "if torch.cuda.is_available() and x:\n"
        "    pass\n"
        "elif torch.version.hip and (torch.cuda.is_available() or os.getenv('HIP_ARCH')):\n"
        "    pass\n"  # xformers' ROCm build
    )
    assert [str(g.place) for g in read.gates] == ["setup.py:4"]


# SageAttention's shape: the list each cell passes is read first; only without one does it
# ask the machine's GPUs (and raise where there are none).
DETECTS_GPUS = """\
import os, torch
from torch.utils.cpp_extension import CUDAExtension
archs = os.getenv("TORCH_CUDA_ARCH_LIST", "").strip()
if not archs:
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    archs = [torch.cuda.get_device_capability(i) for i in range(count)]
if torch.cuda.is_available():
    caps = torch.cuda.get_device_capability()
if torch.cuda.is_available():
    ext = CUDAExtension("k._C", ["a.cu"], extra_compile_args=[torch.cuda.get_device_name()])
"""


def test_asking_the_gpus_for_their_sms_is_no_cuda_gate_where_the_file_reads_the_list() -> None:
    read = read_setup_py(DETECTS_GPUS)
    # the detection on lines 5 and 7 is no gate; line 9 builds its extension past the check
    assert [str(g.place) for g in read.gates] == ["setup.py:9"]
    # without a TORCH_CUDA_ARCH_LIST of its own, the detection decides what is built
    unread = read_setup_py(DETECTS_GPUS.replace('os.getenv("TORCH_CUDA_ARCH_LIST", "")', '""'))
    assert [str(g.place) for g in unread.gates] == ["setup.py:5", "setup.py:7", "setup.py:9"]


def test_a_default_list_for_a_machine_without_gpus_is_no_cuda_gate() -> None:
    """apex's shape: without a GPU it sets TORCH_CUDA_ARCH_LIST where none was passed."""
    read = read_setup_py(
        "import os, torch\n"
        "if not torch.cuda.is_available():\n"
        "    print('Torch did not find available GPUs: cross-compiling')\n"
        '    if os.environ.get("TORCH_CUDA_ARCH_LIST", None) is None:\n'
        '        os.environ["TORCH_CUDA_ARCH_LIST"] = "7.5;8.0;9.0"\n'
        "if torch.cuda.is_available():\n"
        "    print('a GPU')\n"
    )
    assert [str(g.place) for g in read.gates] == ["setup.py:6"]  # names no list: a gate


def test_torch_cuda_arch_list_defaults_and_overrides() -> None:
    read = read_setup_py(
        "import os\n"
        'os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0;9.0+PTX")\n'
        'if "TORCH_CUDA_ARCH_LIST" not in os.environ:\n'
        '    os.environ["TORCH_CUDA_ARCH_LIST"] = "7.5"\n'
        'os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"\n'
        'archs = os.getenv("TORCH_CUDA_ARCH_LIST", "8.6")\n'
        'os.environ["TORCH_CUDA_ARCH_LIST"] = os.environ.get("TORCH_CUDA_ARCH_LIST", "8.9")\n'
        'os.environ["TORCH_CUDA_ARCH_LIST"] = os.getenv("TORCH_CUDA_ARCH_LIST") or "10.0"\n'
        'os.environ["TORCH_CUDA_ARCH_LIST"] = os.getenv("OTHER") or "12.0"\n'
        "if os.getenv('X'):\n"
        '    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "7.0")\n'
        "    raise RuntimeError('not implemented')\n"
    )
    assert [(str(d.place), d.value, d.overrides, d.fails) for d in read.arch_list] == [
        ("setup.py:2", "8.0;9.0+PTX", False, False),
        ("setup.py:4", "7.5", False, False),
        ("setup.py:5", "9.0a", True, False),
        ("setup.py:6", "8.6", False, False),
        ("setup.py:7", "8.9", False, False),
        ("setup.py:8", "10.0", False, False),
        ("setup.py:9", None, True, False),
        ("setup.py:11", "7.0", False, True),
    ]


def test_literal_gencode_flags_give_their_targets_and_computed_ones_are_named() -> None:
    read = read_setup_py(
        'nvcc = ["-O3", "-gencode", "arch=compute_80,code=sm_80",\n'
        '        "-gencode=arch=compute_90a,code=[sm_90a,compute_90a]"]\n'
        'more = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]\n'
    )
    assert [(str(g.place), g.cubins, g.ptx) for g in read.gencode] == [
        ("setup.py:1", ("80",), ()),
        ("setup.py:2", ("90a",), ("90a",)),
        ("setup.py:3", (), ()),
    ]
    assert gencode_targets("-arch=sm_86") == (("86",), ("86",))


def test_what_does_not_parse_is_a_problem_with_its_line() -> None:
    read = read_setup_py("setup(\n  name='x',\n  version=\n")
    assert read.problem is not None
    assert read.problem.startswith("setup.py:")
    assert read.name is None


def test_only_real_code_generation_flags_count_not_a_string_that_holds_gencode() -> None:
    text = (
        '"""Builds with -gencode flags of its own."""\n'
        "import tempfile\n"
        'tmp = tempfile.mkdtemp(prefix="-gencode-work")\n'
        'flags = ["-O3", "-gencode", "arch=compute_80,code=sm_80",\n'
        '         "-gencode=arch=compute_90,code=[sm_90,compute_90]", "-arch=sm_75"]\n'
        'more = [f"-gencode=arch=compute_{sm},code=sm_{sm}" for sm in (86,)]\n'
    )
    found = read_setup_py(text).gencode
    assert [g.text for g in found] == [
        "arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90,code=[sm_90,compute_90]",
        "-arch=sm_75",
        'f"-gencode=arch=compute_{sm},code=sm_{sm}"',
    ]
    assert [(g.cubins, g.ptx) for g in found[:3]] == [
        (("80",), ()),
        (("90",), ("90",)),
        (("75",), ("75",)),
    ]
