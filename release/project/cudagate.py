"""Which `torch.cuda.is_available()` calls of a setup.py decide whether CUDA is built: a
gate, past which a build machine without a GPU builds the CPU extension alone. Not one:

- the test of an `if` that builds for ROCm (it asks `torch.version.hip`: xformers), or whose
  branch raises (flash-attention's ROCm check);
- GPU detection: the test of a branch that only asks the machine's GPUs for their SMs
  (`torch.cuda.device_count()`, `get_device_capability()`) and builds no extension, in a
  file that reads TORCH_CUDA_ARCH_LIST itself first (SageAttention: the list each cell
  passes is used, and the detection never runs);
- a default list: the test of a branch that names TORCH_CUDA_ARCH_LIST and builds no
  extension (apex: without a GPU it sets the list where none was passed). Pure.
"""

from __future__ import annotations

import ast

from release.project.pysource import SourceIndex, named, string_of

ARCH_LIST = "TORCH_CUDA_ARCH_LIST"
EXTENSIONS = ("CUDAExtension", "CppExtension")
# what a setup.py asks the GPUs of the machine it runs on, to build for their SMs
GPU_QUERIES = frozenset(
    {"device_count", "get_device_capability", "get_device_properties", "get_device_name"}
)


def is_cuda_available(func: ast.AST) -> bool:
    """`torch.cuda.is_available` (or `cuda.is_available`)."""
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "is_available"
        and named(func.value, "cuda")
    )


def is_gate(index: SourceIndex, call: ast.Call, *, reads_arch_list: bool) -> bool:
    """Whether the torch.cuda.is_available() `call` decides whether CUDA is built
    (`reads_arch_list`: the file reads TORCH_CUDA_ARCH_LIST itself)."""
    conditional = index.test_of(call)
    if conditional is None:
        return True
    test, branch = conditional
    body: list[ast.AST] = list(branch.body) if isinstance(branch, ast.If) else [branch.body]
    if any(named(node, "hip") for node in ast.walk(test)):
        return False
    if any(isinstance(statement, ast.Raise) for statement in body):
        return False
    inside = [node for part in body for node in ast.walk(part)]
    asks_gpus = any(
        isinstance(node, ast.Call) and any(named(node.func, q) for q in GPU_QUERIES)
        for node in inside
    )
    builds = any(named(node, name) for node in inside for name in EXTENSIONS)
    lists = any(string_of(node) == ARCH_LIST for node in inside)
    return builds or not (lists or (reads_arch_list and asks_gpus))
