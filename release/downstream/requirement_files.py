"""Requirement files for consumers of a release: hash-pinned, one per variant.

For each variant (the default one on PyPI, each local label on its index):
- `<variant>.txt`: the index and `name==version` with the sha256 of every platform's wheel,
  for `pip install -r` (hash-checking mode) and `uv pip install -r`;
- `<variant>-urls.txt`: the direct URL of each platform's wheel with its `#sha256=` and a
  `platform_machine` marker, for a Dockerfile that must not depend on any index.
Pure: the published files in, the files' text out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from release.records.published import Published, PublishedFile
from release.wheelfile import WheelName

MACHINES = {"x86_64": "x86_64", "aarch64": "aarch64"}


@dataclass(frozen=True, kw_only=True)
class PinFile:
    name: str
    text: str
    variant: str
    index_url: str | None


def variant_of(file: PublishedFile) -> str:
    return file.local_label or "default"


def _version(file: PublishedFile) -> str:
    return str(WheelName.parse(file.filename).version)


def _requirement(published: Published, files: Sequence[PublishedFile]) -> str:
    version = _version(files[0])
    name = published.project
    hashes = "".join(f" \\\n    --hash=sha256:{f.sha256}" for f in files)
    return f"{name}=={version}{hashes}\n"


def pin_files(published: Published) -> list[PinFile]:
    """The two files of every variant of the release."""
    variants: dict[str, list[PublishedFile]] = {}
    for file in sorted(published.files, key=lambda f: f.filename):
        variants.setdefault(variant_of(file), []).append(file)
    out = []
    for variant, files in sorted(variants.items()):
        version = _version(files[0])
        index = files[0].index_url
        where = "its index" if variant != "default" else "PyPI"
        head = (
            f"# {published.project} {version} ({variant} variant) from {where}, "
            "hash-pinned for every platform:\n"
            f"#   pip install -r {variant}.txt\n"
            f"#   uv pip install -r {variant}.txt\n"
        )
        index_line = f"--index-url {index}\n" if index else ""
        out.append(
            PinFile(
                name=f"{variant}.txt",
                text=head + index_line + _requirement(published, files),
                variant=variant,
                index_url=index,
            )
        )
        lines = [
            f"# {published.project} {version} ({variant} variant): the wheel of each platform\n"
            "# by its URL and sha256, for images that depend on no index:\n"
            f"#   pip install -r {variant}-urls.txt\n"
        ]
        for file in files:
            machine = MACHINES.get(file.arch, file.arch)
            lines.append(
                f"{published.project} @ {file.url}#sha256={file.sha256} ; "
                f'platform_machine == "{machine}"\n'
            )
        out.append(
            PinFile(
                name=f"{variant}-urls.txt", text="".join(lines), variant=variant, index_url=index
            )
        )
    return out


def install_lines(published: Published) -> list[str]:
    """The install commands for each variant, for the README and the step summary."""
    lines = []
    for variant, index in sorted({(variant_of(f), f.index_url) for f in published.files}):
        version = next(_version(f) for f in published.files if variant_of(f) == variant)
        requirement = f"{published.project}=={version}"
        if variant == "default":
            lines.append(f"pip install {requirement}")
            lines.append(f"uv pip install {requirement}")
            continue
        if index is None:  # a variant no index lists: each platform's wheel by its URL
            lines.append(f"pip install -r {variant}-urls.txt")
            lines.append(f"uv pip install -r {variant}-urls.txt")
            continue
        lines.append(f"pip install {requirement} --index-url {index} --extra-index-url "
                     "https://pypi.org/simple/")  # fmt: skip
        lines.append(
            f"uv pip install {requirement} --index-url {index} --extra-index-url "
            "https://pypi.org/simple/ --index-strategy unsafe-best-match"
        )
    return lines
