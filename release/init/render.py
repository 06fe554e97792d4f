"""matrix.yaml and the caller workflow as `release init` writes them: the templates under
release/init/templates (package data) filled with a `Decision`. Pure (the templates are
read from the installed package).

A template line that holds nothing but `${name}` is a comment placeholder where `name` is
one of the rendered comments: it becomes that text wrapped as `#` lines at the line's
indent (or nothing, for an empty one). Every other `${name}` is a plain substitution.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Mapping, Sequence
from importlib import resources
from string import Template

from ruamel.yaml import YAML

from release.backends import backend_for
from release.init.decide import Decision
from release.init.detect import Finding, Note
from release.toolchain.pins import CUDA_TOOLKIT_IMAGES

REPOSITORY = "k3-project/cuda-wheel-release"  # the tool's own repository
TORCH_TODO = "TODO-the-exact-torch-version"  # refused at its line until it is replaced
WIDTH = 92
_COMMENT_LINE = re.compile(r"^( *)\$\{(\w+)\}$", re.MULTILINE)


def schema_url(version: str) -> str:
    return f"https://raw.githubusercontent.com/{REPOSITORY}/v{version}/schema/matrix.schema.json"


def docs_url(version: str, page: str = "matrix.md") -> str:
    """A page of the tool's docs/ at `version`: the matrix keys unless `page` names another."""
    return f"https://github.com/{REPOSITORY}/blob/v{version}/docs/{page}"


def fill(name: str, values: Mapping[str, str], comments: Mapping[str, str]) -> str:
    """The template `name` with its comment lines and values filled in."""
    text = resources.files("release.init").joinpath("templates").joinpath(name).read_text("utf-8")

    def comment(match: re.Match[str]) -> str:
        indent, key = match.group(1), match.group(2)
        if key not in comments:
            return match.group(0)
        said = comments[key]
        return _wrapped(said, f"{indent}# ").replace("$", "$$") if said else "\x00"

    text = _COMMENT_LINE.sub(comment, text).replace("\x00\n", "")
    return Template(text).substitute(values)


def render_workflow(
    tool_version: str,
    matrix: str,
    commit: str | None,
    token_secret: str | None = None,
    *,
    destination_token_secret: str | None = None,
) -> str:
    """.github/workflows/release.yml: the caller of the tool's reusable workflows and of its
    publish action, each pinned to `commit` (the release's tag where it is not known), with
    PyPI's trusted publishing or, given `token_secret`, that repository secret's API token;
    given `destination_token_secret`, that secret is the token of a destination in another
    repository (matrix.yaml's token-secret), for the publish action and the jobs that read
    the destinations."""
    if token_secret is None:
        publisher = (
            "PyPI: trusted publishing. Add a trusted publisher to the PyPI project: this "
            "repository, workflow release.yml, environment release. With an API token "
            "instead: `release init --pypi-token-secret NAME`, or give the step "
            "`with: {pypi-token: ${{ secrets.NAME }}}`."
        )
        publish_with = ""
    else:
        publisher = (
            f"PyPI: the API token in the repository secret {token_secret}. PyPI takes PEP 740 "
            "attestations only from trusted publishing: its wheels' provenance is their GitHub "
            "build provenance (docs/ci.md)."
        )
        publish_with = f"\n          pypi-token: ${{{{ secrets.{token_secret} }}}}"
    reader_token = ""
    if destination_token_secret is not None:
        secret = f"${{{{ secrets.{destination_token_secret} }}}}"
        publish_with += (
            f"\n          token: {secret}\n          token-secret: {destination_token_secret}"
        )
        reader_token = (
            f"\n      token-secret: {destination_token_secret}"
            f"\n    secrets:\n      destination-token: {secret}"
        )
        publisher += (
            f" A destination in another repository (matrix.yaml's token-secret) is written "
            f"with the token in the repository secret {destination_token_secret}."
        )
    if publish_with:
        publish_with = "\n        with:" + publish_with
    pin_note = (
        ""
        if commit is not None
        else f"TODO: pin each `uses:` by the commit of tag v{tool_version} (zizmor: "
        "unpinned-uses): this copy of the tool does not know it."
    )
    return fill(
        "release.yml",
        {
            "tool_version": tool_version,
            "matrix": matrix,
            "docs_url": docs_url(tool_version, "ci.md"),
            "ref": commit or f"v{tool_version}",
            "publish_with": publish_with,
            "reader_token": reader_token,
        },
        {"publisher": publisher, "pin_note": pin_note},
    )


def render_matrix(decision: Decision, tool_version: str) -> str:
    """matrix.yaml for `decision`, every detected value with a comment saying its source."""
    found = {f.key: f for f in decision.found}
    values = {
        "schema_url": schema_url(tool_version),
        "docs_url": docs_url(tool_version),
        "tool_version": tool_version,
        "name": decision.name,
        "arches": ", ".join(decision.arches),
        "sms": ", ".join(str(t) for t in decision.sms),
        "ptx": str(decision.ptx) if decision.ptx is not None else "none",
        "manylinux": decision.manylinux,
        **_staging(decision),
    }
    comments = {
        "notes": _notes(decision.changes, decision.undecided),
        "naming_from": _naming_from(found),
        "backend_from": _from(found, "backend"),
        "sms_from": _from(found, "sms"),
        "ptx_from": _from(found, "ptx"),
    }
    if backend_for(decision.backend).needs_nvcc:
        values["toolkit_image"] = _toolkit_image(decision)
    if backend_for(decision.backend).torch_axes:
        torch_values, torch_comments = _torch(decision, found)
        values.update(torch_values)
        comments.update(torch_comments)
        values["targets"] = _targets(decision, found)
    return fill(f"matrix-{decision.backend}.yaml", values, comments)


def _staging(decision: Decision) -> dict[str, str]:
    """`project:`'s value and the build section's prepare step, build requirements and CUDA
    libraries (issue 51's keys: lines at the build section's indent, each ending in a
    newline, or nothing)."""
    lines: list[str] = []
    prepare = decision.prepare
    if prepare is not None:
        lines.append(_wrapped(f"From {_found_source(decision, 'build.prepare')}.", "  # "))
        lines += ["  prepare:", f"    command: {_scalar(prepare.command)}"]
        if prepare.version_file is not None:
            said = _found_source(decision, "build.prepare.version-file")
            lines.append(_wrapped(f"From {said}.", "    # "))
            lines.append(f"    version-file: {_scalar(prepare.version_file)}")
        if prepare.output is not None:
            lines.append(f"    output: {_scalar(prepare.output)}")
    if decision.requires:
        lines.append(_wrapped(f"From {_found_source(decision, 'build.requires')}.", "  # "))
        lines.append(f"  requires: [{', '.join(json.dumps(r) for r in decision.requires)}]")
    if decision.cuda_libraries:
        lines.append(_wrapped(f"From {_found_source(decision, 'build.cuda-libraries')}.", "  # "))
        lines.append(f"  cuda-libraries: [{', '.join(decision.cuda_libraries)}]")
    return {
        "project": _scalar(decision.project),
        "prepare": "".join(f"{line}\n" for line in lines),
    }


def _targets(decision: Decision, found: Mapping[str, Finding]) -> str:
    """The defaults' GPU targets: sms and ptx with where each was read, or, for a wheel
    without device code, `device-code: none` and why."""
    if decision.device_code is not None:
        return "\n".join(
            [
                "  # The wheel carries no device code: its kernels are compiled at run time.",
                _wrapped(_from(found, "device-code"), "  # "),
                f"  device-code: {decision.device_code}",
            ]
        )
    return "\n".join(
        [
            "  # GPU architectures with a cubin each.",
            *([_wrapped(_from(found, "sms"), "  # ")] if "sms" in found else []),
            f"  sms: [{', '.join(str(t) for t in decision.sms)}]",
            "  # PTX for GPUs newer than the list (torch adds it to one of the SMs).",
            *([_wrapped(_from(found, "ptx"), "  # ")] if "ptx" in found else []),
            f"  ptx: {decision.ptx if decision.ptx is not None else 'none'}",
        ]
    )


def _found_source(decision: Decision, key: str) -> str:
    return next((f.source for f in decision.found if f.key == key), "the project")


def _scalar(text: str) -> str:
    """`text` as a plain YAML scalar where it reads back as that string, else quoted."""
    plain = re.fullmatch(r"[A-Za-z0-9_./][A-Za-z0-9_./ -]*", text) and not text.endswith(" ")
    if plain and YAML(typ="safe").load(text) == text:
        return text
    return json.dumps(text)


def _torch(
    decision: Decision, found: Mapping[str, Finding]
) -> tuple[dict[str, str], dict[str, str]]:
    if decision.python_any:
        python_line = "python: any"
        python_from = _from(found, "python")
    elif decision.abi3 is not None:
        tag = f"cp{decision.abi3.replace('.', '')}-abi3"
        python_line = f'abi3: "{decision.abi3}"'
        python_from = f"A py_limited_api extension: one {tag} wheel a cell. {_from(found, 'abi3')}"
    else:
        python_line = "python: [" + ", ".join(f'"{p}"' for p in decision.python) + "]"
        python_from = "A wheel per CPython, each built with python3.X from PATH. " + _from(
            found, "python"
        )
    if decision.torch is not None:
        torch, torch_from = f'"{decision.torch}"', _from(found, "torch")
    else:
        torch = TORCH_TODO
        torch_from = "TODO: no exact torch was found (the notes at the top say why): write it here."
    values = {
        "python_line": python_line,
        "torch": torch,
        "torch_index": f"    torch-index: {decision.torch_index}\n" if decision.torch_index else "",
        "build_env": _build_env(decision),
    }
    return values, {"python_from": python_from, "torch_from": torch_from}


def _toolkit_image(decision: Decision) -> str:
    """The commented toolkit-image lines of a 12.9 cell: the PyPA's manylinux CUDA image of
    each arch at the matrix's level, with where its digest comes from (the tool pins none:
    release/toolchain/pins.py says why)."""
    lines = ["  #   toolkit-image:"]
    images = []
    for arch in decision.arches:
        image = CUDA_TOOLKIT_IMAGES.get(("12.9", arch, decision.manylinux))
        if image is None:
            continue
        images.append(image)
        lines.append(f"  #     {arch}: {image.name}@sha256:<64 hex>")
    if not images:
        return ""
    said = [
        "  #   # each digest (per arch): docker buildx imagetools inspect",
        f"  #   #   {images[0].name}:{images[0].tag}",
    ]
    return "\n".join([*said, *lines]) + "\n"


def _build_env(decision: Decision) -> str:
    if not decision.build_env:
        return (
            "  # The project's own switches, such as a force-CUDA one:\n"
            '  # env: {FORCE_CUDA: "1"}\n'
        )
    switches = {f.value: f.source for f in decision.found if f.key == "build.env"}
    lines = ["  env:"]
    for name, value in decision.build_env:
        source = switches.get(f"{name}={value}", "")
        lines.append(_wrapped(f"From {source}.", "    # "))
        lines.append(f'    {name}: "{value}"')
    return "\n".join(lines).replace("$", "$$") + "\n"


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


def _wrapped(text: str, prefix: str) -> str:
    """`text` as comment lines: each paragraph line wrapped, `- ` items hanging."""
    out = []
    for line in text.splitlines():
        if not line:
            out.append(prefix.rstrip())
            continue
        hanging = "  " if line.startswith("- ") else ""
        out.append(
            textwrap.fill(
                line,
                width=WIDTH,
                initial_indent=prefix,
                subsequent_indent=prefix + hanging,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(out)
