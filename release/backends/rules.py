"""The rules a `build:` section follows, whatever its backend: the matrix sets no variable
or config setting the backend gets from the cell, no credential and no SOURCE_DATE_EPOCH;
and the cell's targets are ones its backend can build.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from release.backends.nvcc import cross_problem, missing_nvcc
from release.backends.recipe import BackendName, BuildSpec
from release.backends.registry import backend_for
from release.credentials import is_secret_name
from release.errors import shown
from release.targets import GpuTarget
from release.yamlspec import join_path

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_problem(name: str, backend: BackendName) -> str | None:
    """Why `name` cannot be a variable of a `build:` section's env for `backend`."""
    if not _ENV_NAME.match(name):
        return f"{shown(name)} is not an environment variable name"
    if name in backend_for(backend).owned_env:
        return (
            f"{name} is what `release` gives the {backend} backend from the cell "
            "(the sms, ptx and toolchain of the matrix say it): remove it"
        )
    if is_secret_name(name):  # a build never sees publishing credentials
        return (
            f"{name} looks like a credential: a build never gets one (the publish "
            "step reads credentials from its own environment)"
        )
    if name == "SOURCE_DATE_EPOCH":
        return "SOURCE_DATE_EPOCH is set by `release build` (the last commit's time)"
    return None


def spec_problems(spec: BuildSpec, backend: BackendName, path: str) -> list[tuple[str, str]]:
    """(key path, message) for each rule the `build` section at `path` breaks when built by
    `backend` (the backend in force there, which may come from the release's section)."""
    problems: list[tuple[str, str]] = []
    if spec.compile_jobs is not None and spec.compile_jobs < 1:
        problems.append((join_path(path, "compile-jobs"), "must be 1 or more"))
    for name in spec.env or {}:
        problem = env_problem(name, backend)
        if problem is not None:
            problems.append((join_path(join_path(path, "env"), name), problem))
    chosen = backend_for(backend)
    for name, value in (spec.config_settings or {}).items():
        key = join_path(join_path(path, "config-settings"), name)
        if name in chosen.owned_settings:
            message = (
                f"{name} is what `release` gives the {backend} backend from the cell: remove it"
            )
            problems.append((key, message))
        elif (problem := chosen.setting_problem(name, value)) is not None:
            problems.append((key, problem))
    return problems


def targets_problem(
    backend: BackendName, sms: Sequence[GpuTarget], ptx: GpuTarget | None
) -> str | None:
    """Why `backend` cannot build exactly these targets, with the remedy; None if it can."""
    return backend_for(backend).targets_problem(sms, ptx)


def nvcc_problem(backend: BackendName, cuda: str, device_compiler: str) -> str | None:
    """Why the toolchain planned for a CUDA version cannot serve `backend` (CMake and torch
    drive nvcc, and PyPI has none for CUDA 12.x); None if it can."""
    if not backend_for(backend).needs_nvcc:
        return None
    return missing_nvcc(backend, cuda, device_compiler)


def placement_problem(backend: BackendName, target_arch: str, host_arch: str) -> str | None:
    """Why a cell of `target_arch` does not build on a `host_arch` machine; None if it does.
    csrc's backend cross-compiles its host library with zig; nvcc-driven backends build
    each arch natively."""
    if not backend_for(backend).needs_nvcc:
        return None
    return cross_problem(backend, target_arch, host_arch)
