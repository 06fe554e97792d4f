"""A torch project whose setup.py makes its -gencode flags from a variable of its own, as
flash-attention's does from FLASH_ATTN_CUDA_ARCHS (default `80;90;100;110;120`, a cubin for
each and PTX for the highest): the variable, where one whose name says ARCH is read with a
literal default that is an SM list, for matrix.yaml's `targets-env` to hand each cell's SMs
to (in its `sms` form); and the SMs and PTX of that default, which init takes as the
project's list and the dry run names. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from release.credentials import is_secret_name
from release.proc import is_environment_name
from release.project.cudagate import ARCH_LIST
from release.project.places import Place
from release.project.setuppy import SetupPy
from release.targets import GpuTarget

_SM_LIST = re.compile(r"\d{2,3}[af]?(?:;\d{2,3}[af]?)+")  # 80;90;100, as the matrix writes SMs


@dataclass(frozen=True, kw_only=True)
class TargetsVariable:
    name: str
    default: str
    place: Place  # where it is read with its default
    sms: tuple[GpuTarget, ...]
    ptx: GpuTarget | None  # the highest SM where the project's flags add PTX, else None

    @property
    def matrix_key(self) -> str:
        """The targets-env entry that hands each cell's SMs to it."""
        return f"build.targets-env: {{{self.name}: sms}}"

    @property
    def source(self) -> str:
        return (
            f"{self.place}: the -gencode flags follow {self.name} (default {self.default}), "
            "which each cell's sms reach through targets-env"
        )


def targets_variable(setup_py: SetupPy) -> TargetsVariable | None:
    """The variable setup.py's own -gencode flags are made from, if it has one."""
    if not setup_py.gencode:
        return None
    for read in setup_py.env_reads:
        default = read.default
        # TORCH_CUDA_ARCH_LIST is the torch backend's own, never a targets-env variable
        if default is None or read.name == ARCH_LIST or "ARCH" not in read.name.upper():
            continue
        if not is_environment_name(read.name) or is_secret_name(read.name):
            continue  # no build environment can hand a cell's SMs to it
        if _SM_LIST.fullmatch(default):
            sms = tuple(GpuTarget.parse(entry) for entry in default.split(";"))
            builds_ptx = any("code=compute_" in flag.text for flag in setup_py.gencode)
            return TargetsVariable(
                name=read.name, default=default, place=read.place, sms=sms,
                ptx=max(sms) if builds_ptx else None,
            )  # fmt: skip
    return None
