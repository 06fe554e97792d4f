"""A kernel project's build files, read statically (never run): setup.py with `ast`,
pyproject.toml and setup.cfg, CMakeLists.txt, and for `release init` the scripts and
sources around them. `read_project_files` and `read_layout` are the edges (they read the
files); the rest is pure. The matrix loader takes the project's name and version from
here (`naming`), and `release init` everything else.

Its modules:

- `archchanges`: What keeps a cell's GPU targets from a project's build, as init and the dry run
  both say it.
- `cmakelists`: What a CMakeLists.txt says without running CMake: whether it builds CUDA, and
  its GPU targets.
- `cmakeswitch`: The cache variable a CMakeLists.txt enables CUDA behind (bitsandbytes'
  COMPUTE_BACKEND), and the value that does.
- `cudagate`: Which `torch.cuda.is_available()` calls of a setup.py decide whether CUDA is
  built, and which are GPU detection or a ROCm or failing branch.
- `envtest`: What a setup.py's test of an environment variable works out to with the variable at a
  given value, read with `ast`, never run.
- `files`: A kernel project's files, read once (`read_project_files`, the edge), and what they
  say together (pure).
- `layout`: What `release init` reads of a repository besides its build files (`read_layout`,
  the edge): scripts, subdirectory distributions, the staged one, the translation units named.
- `localversion`: A setup.py whose version function adds a local label when a variable is on,
  and whose default turns it on (DeepGEMM's DG_USE_LOCAL_VERSION); or a label nothing turns off.
- `native`: What a setup.py or a staging script says of the native code it builds: units,
  libraries, C++ standard, package data, imports; and which unit binds to Python.
- `optin`: The extensions a setup.py builds only when an environment variable turns them on
  (apex's APEX_CUDA_EXT), and the switch a release build turns on.
- `places`: Where a project file says something: a `Place` (file and line), and a `Said` value,
  the literal a file gives or the expression that computes it.
- `prebuilt`: A bdist_wheel subclass of a setup.py whose run() downloads a prebuilt wheel
  instead of building, and the variables whose values make it build.
- `pyproject`: What a pyproject.toml and a setup.cfg say.
- `pysource`: A Python file of a kernel project as the readers take it: its bytes decoded as
  Python decodes them (PEP 263's coding declaration, a UTF-8 BOM, else UTF-8), and its syntax
  tree walked once into an index (`SourceIndex`), so that every question
  release.project.setuppy and release.project.stableabi ask costs time linear in the file's
  size.
- `setuppy`: What a setup.py says without running it, read with `ast` (as cibuildwheel reads its
  python_requires).
- `stableabi`: Whether a setup.py builds for libtorch's stable ABI: its TORCH_TARGET_VERSION,
  the torch release it names, and which compilers the define reaches.
- `staging`: Which distribution a repository publishes when it is not the root's: a
  subdirectory's pyproject.toml staged by a script at the root.
- `targetsenv`: The variable a torch project's setup.py makes its -gencode flags from
  (flash-attention's FLASH_ATTN_CUDA_ARCHS), for matrix.yaml's `targets-env`.
- `wheeltag`: A bdist_wheel subclass of a setup.py whose get_tag() tags the wheel with no
  Python ABI (xformers' py39-none).
"""

from __future__ import annotations

from release.project.cmakelists import ArchitecturesSet, CMakeLists, read_cmakelists
from release.project.envtest import EnvRead
from release.project.files import (
    BUILD_FILES,
    SETUP_PY,
    Naming,
    ProjectFiles,
    Reading,
    naming,
    read_project_files,
    read_version_file,
    reading,
)
from release.project.places import Place, Said
from release.project.pyproject import PyProject, SetupCfg, read_pyproject, read_setup_cfg
from release.project.setuppy import (
    ArchListDefault,
    CudaGate,
    Gencode,
    LimitedApi,
    SetupPy,
    read_setup_py,
)

__all__ = [
    "BUILD_FILES",
    "SETUP_PY",
    "ArchListDefault",
    "ArchitecturesSet",
    "CMakeLists",
    "CudaGate",
    "EnvRead",
    "Gencode",
    "LimitedApi",
    "Naming",
    "Place",
    "ProjectFiles",
    "PyProject",
    "Reading",
    "Said",
    "SetupCfg",
    "SetupPy",
    "naming",
    "read_cmakelists",
    "read_project_files",
    "read_pyproject",
    "read_setup_cfg",
    "read_setup_py",
    "read_version_file",
    "reading",
]
