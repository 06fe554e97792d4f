"""matrix.yaml and the caller workflow as `release init` writes them: the templates under
release/init/templates (package data) with a `Decision`'s values put into their slots and
dumped by ruamel.yaml (release.init.emit), each value with a comment saying where it was
read. Pure (the templates are read from the installed package).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from release.backends import DEFAULT_BACKEND, backend_for
from release.defaults import CALLER_WORKFLOW
from release.init.decide import Decision
from release.init.detect import Finding, Note
from release.init.emit import ABSENT, commented, emit, flow, quoted
from release.targets import GpuTarget
from release.toolchain.pins import CUDA_TOOLKIT_IMAGES

REPOSITORY = "k3-project/cuda-wheel-release"  # the tool's own repository
TORCH_TODO = "TODO-the-exact-torch-version"  # refused at its line until it is replaced
ENV_EXAMPLE = 'The project\'s own switches, such as a force-CUDA one:\nenv: {FORCE_CUDA: "1"}'


def schema_url(version: str) -> str:
    return f"https://raw.githubusercontent.com/{REPOSITORY}/v{version}/schema/matrix.schema.json"


def docs_url(version: str, page: str = "matrix.md") -> str:
    """A page of the tool's docs/ at `version`: the matrix keys unless `page` names another."""
    return f"https://github.com/{REPOSITORY}/blob/v{version}/docs/{page}"


def render_workflow(
    tool_version: str,
    matrix: str,
    commit: str | None,
    token_secret: str | None = None,
    *,
    destination_token_secret: str | None = None,
    workflow: str = CALLER_WORKFLOW,
) -> str:
    """.github/workflows/`workflow`: the caller of the tool's reusable workflows and of its
    publish action, each pinned to `commit` (the release's tag where it is not known), with
    PyPI's trusted publishing or, given `token_secret`, that repository secret's API token;
    given `destination_token_secret`, that secret is the token of a destination in another
    repository (matrix.yaml's token-secret), for the publish action and the jobs that read
    the destinations."""
    if token_secret is None:
        publisher = (
            "PyPI: trusted publishing. Add a trusted publisher to the PyPI project: this "
            f"repository, workflow {workflow}, environment release. With an API token "
            "instead: `release init --pypi-token-secret NAME`, or give the step "
            "`with: {pypi-token: ${{ secrets.NAME }}}`."
        )
        publish_with: Any = ABSENT
    else:
        publisher = (
            f"PyPI: the API token in the repository secret {token_secret}. PyPI takes PEP 740 "
            "attestations only from trusted publishing: its wheels' provenance is their GitHub "
            "build provenance (docs/ci.md)."
        )
        # the expressions init writes: a secret's name is an identifier (its option's type)
        publish_with = {"pypi-token": f"${{{{ secrets.{token_secret} }}}}"}
    reader_token: Any = ABSENT
    reader_secrets: Any = ABSENT
    if destination_token_secret is not None:
        secret = f"${{{{ secrets.{destination_token_secret} }}}}"
        given = {} if publish_with is ABSENT else dict(publish_with)
        publish_with = {**given, "token": secret, "token-secret": destination_token_secret}
        reader_token = destination_token_secret
        reader_secrets = {"destination-token": secret}
        publisher += (
            " A destination in another repository (matrix.yaml's token-secret) is written "
            f"with the token in the repository secret {destination_token_secret}."
        )
    pin_note = (
        ""
        if commit is not None
        else f"TODO: pin each `uses:` by the commit of tag v{tool_version} (zizmor: "
        "unpinned-uses): this copy of the tool does not know it."
    )
    ref = commit or f"v{tool_version}"
    return emit(
        "release.yml",
        {
            "build_uses": f"{REPOSITORY}/.github/workflows/wheels.yml@{ref}",
            "publish_uses": f"{REPOSITORY}/actions/publish@{ref}",
            "verify_uses": f"{REPOSITORY}/.github/workflows/wheels-verify.yml@{ref}",
            "matrix": matrix,
            "tool_version": quoted(tool_version),
            "publish_with": publish_with,
            "reader_token_secret": reader_token,
            "reader_secrets": reader_secrets,
        },
        {
            "matrix": matrix,
            "docs_url": docs_url(tool_version, "ci.md"),
            "tool_version": tool_version,
            "publisher": publisher,
            "pin_note": pin_note,
        },
    )


def render_matrix(decision: Decision, tool_version: str) -> str:
    """matrix.yaml for `decision`, every detected value with a comment saying its source."""
    found = {f.key: f for f in decision.found}
    values: dict[str, Any] = {
        "arches": flow(list(decision.arches)),
        "manylinux": quoted(decision.manylinux),
    }
    comments = {
        "schema_url": schema_url(tool_version),
        "docs_url": docs_url(tool_version),
        "tool_version": tool_version,
        "name": decision.name,
        "notes": _notes(decision.changes, decision.undecided),
        "naming_from": _naming_from(found),
        "backend_from": _from(found, "backend"),
    }
    targets_values, targets_comments = _targets(decision, found)
    values.update(targets_values)
    comments.update(targets_comments)
    if decision.backend != DEFAULT_BACKEND:
        staging_values, staging_comments = _staging(decision, found)
        values.update(staging_values)
        comments.update(staging_comments)
    if backend_for(decision.backend).needs_nvcc:  # a cell without device code needs none
        comments["toolkit_image"] = (
            _toolkit_image(decision) if decision.device_code != "none" else ""
        )
    if backend_for(decision.backend).torch_axes:
        torch_values, torch_comments = _torch(decision, found)
        values.update(torch_values)
        comments.update(torch_comments)
    if decision.backend == "cmake":
        values["config_settings"] = (
            {name: quoted(value) for name, value in decision.config_settings}
            if decision.config_settings
            else ABSENT
        )
        comments["config_settings_from"] = _from(found, "build.config-settings")
    return emit(f"matrix-{decision.backend}.yaml", values, comments)


def _targets(
    decision: Decision, found: Mapping[str, Finding]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The defaults' GPU targets, sms and ptx with where each was read; for a wheel without
    device code (a JIT-first project), `device-code: none` and why instead."""
    ptx_said = "PTX for GPUs newer than the list" + (
        " (torch adds it to one of the SMs)." if backend_for(decision.backend).torch_axes else "."
    )
    if decision.device_code is not None:
        values: dict[str, Any] = {"sms": ABSENT, "ptx": ABSENT, "device_code": "none"}
        comments = {"sms_from": "", "ptx_from": ""}
        said = "The wheel carries no device code: its kernels are compiled at run time."
        comments["device_code_from"] = f"{said}\n{_from(found, 'device-code')}"
    else:
        values = {
            "sms": flow([_target(t) for t in decision.sms]),
            "ptx": _target(decision.ptx) if decision.ptx is not None else "none",
        }
        comments = {
            "sms_from": f"GPU architectures with a cubin each.\n{_from(found, 'sms')}".strip(),
            "ptx_from": f"{ptx_said}\n{_from(found, 'ptx')}".strip(),
        }
        if decision.backend != DEFAULT_BACKEND:
            values["device_code"], comments["device_code_from"] = ABSENT, ""
    return values, comments


def _staging(
    decision: Decision, found: Mapping[str, Finding]
) -> tuple[dict[str, Any], dict[str, str]]:
    """`project:` and the build section's prepare step, build requirements and CUDA
    libraries (absent where the project needs none), each with where it was read."""
    values: dict[str, Any] = {
        "project": decision.project,
        "prepare": ABSENT,
        "requires": flow([quoted(r) for r in decision.requires]) if decision.requires else ABSENT,
        "cuda_libraries": flow(list(decision.cuda_libraries))
        if decision.cuda_libraries
        else ABSENT,
    }
    comments = {
        "prepare_from": _from(found, "build.prepare") if decision.prepare else "",
        "requires_from": _from(found, "build.requires") if decision.requires else "",
        "cuda_libraries_from": _from(found, "build.cuda-libraries")
        if decision.cuda_libraries
        else "",
    }
    prepare = decision.prepare
    if prepare is not None:
        entries: list[tuple[str, Any, str]] = [("command", prepare.command, "")]
        if prepare.version_file is not None:
            said = _from(found, "build.prepare.version-file")
            entries.append(("version-file", prepare.version_file, said))
        if prepare.output is not None:
            entries.append(("output", prepare.output, ""))
        values["prepare"] = commented(entries, indent=4)
    return values, comments


def _target(target: GpuTarget) -> int | str:
    """An SM as the matrix spells it: 90, or 90a with its suffix."""
    return target.number if not target.suffix else str(target)


def _torch(
    decision: Decision, found: Mapping[str, Finding]
) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {"abi3": ABSENT, "python": ABSENT}
    if decision.python_any:
        values["python"] = "any"
        python_from = _from(found, "python")
    elif decision.abi3 is not None:
        tag = f"cp{decision.abi3.replace('.', '')}-abi3"
        values["abi3"] = quoted(decision.abi3)
        python_from = f"A py_limited_api extension: one {tag} wheel a cell. {_from(found, 'abi3')}"
    else:
        values["python"] = flow([quoted(p) for p in decision.python])
        python_from = "A wheel per CPython, each built with python3.X from PATH. " + _from(
            found, "python"
        )
    if decision.torch is not None:
        values["torch"], torch_from = quoted(str(decision.torch)), _from(found, "torch")
    else:
        values["torch"] = TORCH_TODO
        torch_from = "TODO: no exact torch was found (the notes at the top say why): write it here."
    values["torch_index"] = decision.torch_index if decision.torch_index else ABSENT
    values["env"] = _build_env(decision)
    values["targets_env"] = dict(decision.targets_env) if decision.targets_env else ABSENT
    comments = {
        "python_from": python_from,
        "torch_from": torch_from,
        "targets_env_from": _from(found, "build.targets-env"),
        "env_example": "" if decision.build_env else ENV_EXAMPLE,
        **_cuda_said(decision),
    }
    return values, comments


def _cuda_said(decision: Decision) -> dict[str, str]:
    """What the 13.0 cell and the commented 12.9 one need: nvcc for a wheel with device
    code; only PyPI's headers and libraries of that CUDA for one without, whose 12.9 cell
    then needs no toolkit image."""
    if decision.device_code == "none":
        return {
            "cuda13_said": "The default variant: the plain version, on PyPI. The wheel carries "
            "no device code: CUDA 13.0's headers and libraries come from PyPI.",
            "cuda129_said": "A CUDA 12.9 variant: no device code, so CUDA 12.9's headers and "
            "libraries come from PyPI's -cu12 wheels (no 12.9 toolkit or nvcc is needed), "
            "and its torch from PyTorch's cu129 index:",
        }
    return {
        "cuda13_said": "The default variant: the plain version, on PyPI; nvcc 13.0 comes from "
        "PyPI.",
        "cuda129_said": "A CUDA 12.9 variant needs a 12.9 toolkit (--cuda-home here; PyPI has "
        "no nvcc 12.9) and a cu129 torch from PyTorch's index. In GitHub Actions it builds in "
        "the PyPA's manylinux CUDA image of each arch, by digest:",
    }


def _toolkit_image(decision: Decision) -> str:
    """The commented toolkit-image lines of a 12.9 cell: the PyPA's manylinux CUDA image of
    each arch at the matrix's level, with where its digest comes from (the tool pins none:
    release/toolchain/pins.py says why)."""
    lines = ["  toolkit-image:"]
    images = []
    for arch in decision.arches:
        image = CUDA_TOOLKIT_IMAGES.get(("12.9", arch, decision.manylinux))
        if image is None:
            continue
        images.append(image)
        lines.append(f"    {arch}: {image.name}@sha256:<64 hex>")
    if not images:
        return ""
    said = [
        "  # each digest (per arch): docker buildx imagetools inspect",
        f"  #   {images[0].name}:{images[0].tag}",
    ]
    return "\n".join([*said, *lines])


def _build_env(decision: Decision) -> Any:
    """build.env: each switch with where it was read, above it."""
    if not decision.build_env:
        return ABSENT
    # by the variable's name: the value said is escaped where it holds a line break
    switches = {f.value.partition("=")[0]: f.source for f in decision.found if f.key == "build.env"}
    return commented(
        [
            (name, quoted(value), f"From {switches.get(name, '')}.")
            for name, value in decision.build_env
        ],
        indent=4,
    )


def _from(found: Mapping[str, Finding], key: str) -> str:
    return f"From {found[key].source}." if key in found else ""


def _naming_from(found: Mapping[str, Finding]) -> str:
    parts = [
        f"its {key} {found[key].value} from {found[key].source}"
        for key in ("name", "version")
        if key in found
    ]
    if len(parts) == 2:
        return f"Read statically: {parts[0]}, {parts[1]}."
    return (
        "Its name or version is computed: each command asks its build backend for them, once "
        "per commit (see the notes above)."
    )


def _notes(changes: Sequence[Note], undecided: Sequence[Note]) -> str:
    """The notes at the top of matrix.yaml: a TODO per change the project needs before it
    builds, then what init could not decide."""
    lines: list[str] = []
    for title, notes in (
        ("TODO before it builds (what release init found):", changes),
        ("Check (what release init could not decide):", undecided),
    ):
        if not notes:
            continue
        lines += ["", title]
        for note in notes:
            where = f"{note.place}: " if note.place else ""
            lines.append(f"- {where}{note.text}" + (f". Fix: {note.fix}." if note.fix else "."))
    return "\n".join([*lines, "", ""]) if lines else ""
