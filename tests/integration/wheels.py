"""Small real wheels named like the matrix's, and a manifest for them.

`make_wheel` writes a complete wheel (package, METADATA, WHEEL, RECORD with hashes) with
zipfile + hashlib; its keyword arguments break one thing at a time (a local version, a
`linux_*` tag, a METADATA version that differs from the filename, no RECORD) so each of
PyPI's rejections can be provoked without a 100 MiB file.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import io
import json
import tarfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pypi_attestations import (
    Attestation,
    AttestationType,
    Envelope,
    TransparencyLogEntry,
    VerificationMaterial,
)

from release.building.sdist import normalised
from release.fsutil import sha256_file
from release.matrix import Cell
from release.records.manifest import (
    DestinationRef,
    Manifest,
    SdistEntry,
    WheelEntry,
    write_manifest,
)

PROJECT = "k3-kernels"
MODULE = "k3_kernels"
VERSION = "0.1.0"
MANYLINUX = "manylinux_2_28"
DESCRIPTION = "# k3-kernels\n\nTest wheel of the release tool's integration tests.\n"


def write_release(root: Path, matrix_yaml: str) -> Path:
    """A release of the stand-in project in `root`: project/pyproject.toml (PROJECT at
    VERSION, nothing to compile) and matrix.yaml holding `matrix_yaml`; the matrix's path."""
    (root / "project").mkdir(parents=True, exist_ok=True)
    (root / "project" / "pyproject.toml").write_text(
        f'[project]\nname = "{PROJECT}"\nversion = "{VERSION}"\n', encoding="utf-8"
    )
    matrix = root / "matrix.yaml"
    matrix.write_text(matrix_yaml, encoding="utf-8")
    return matrix


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def wheel_filename(version: str = VERSION, platform: str = f"{MANYLINUX}_x86_64") -> str:
    return f"{MODULE}-{version}-py3-none-{platform}.whl"


def make_wheel(
    directory: Path,
    *,
    version: str = VERSION,
    platform: str = f"{MANYLINUX}_x86_64",
    metadata_version: str | None = None,
    record: bool = True,
    payload: bytes = b"",
    name: str = PROJECT,
    description_type: str | None = "text/markdown",
    description: str | None = None,
    requires_python: str = ">=3.9",
    members: Mapping[str, bytes] | None = None,
    requires_dist: Sequence[str] = (),
) -> Path:
    """Write a wheel into `directory` and return its path. `payload` changes its bytes;
    `members` are more files in it (shared objects: `k3_kernels/_C.so`), `requires_dist`
    its METADATA's Requires-Dist lines."""
    dist_info = f"{MODULE}-{version}.dist-info"
    metadata = (
        "Metadata-Version: 2.4\n"
        f"Name: {name}\n"
        f"Version: {metadata_version or version}\n"
        "Summary: CUDA kernels (release tool test wheel)\n"
        "License-Expression: Apache-2.0\n"
        f"Requires-Python: {requires_python}\n"
        + "".join(f"Requires-Dist: {line}\n" for line in requires_dist)
        + (f"Description-Content-Type: {description_type}\n" if description_type else "")
        + "\n"
        f"{DESCRIPTION if description is None else description}"
    )
    files: dict[str, bytes] = {
        f"{MODULE}/__init__.py": (
            f'__version__ = "{version}"\nVARIANT = "{platform}"\n'.encode() + payload
        ),
        **(members or {}),
        f"{dist_info}/METADATA": metadata.encode(),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: release-tests\nRoot-Is-Purelib: false\n"
            f"Tag: py3-none-{platform}\n"
        ).encode(),
    }
    record_lines = [f"{path},{_record_hash(data)},{len(data)}" for path, data in files.items()]
    record_lines.append(f"{dist_info}/RECORD,,")
    if record:
        files[f"{dist_info}/RECORD"] = ("\n".join(record_lines) + "\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / wheel_filename(version, platform)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member, data in files.items():
            info = zipfile.ZipInfo(member, date_time=(2026, 11, 30, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return path


def pypi_destination(base_url: str, *, max_file_size: int = 100 * 2**20) -> DestinationRef:
    """A pypi destination pointing at a pypiserver (`base_url` ends in /)."""
    return DestinationRef(
        name="pypi",
        kind="pypi",
        index_url=f"{base_url}simple/",
        repository_url=base_url,
        max_file_size=max_file_size,
    )


def github_destination(
    api_url: str,
    *,
    repository: str = "k3-org/k3-kernels",
    index_url: str | None = None,
    version: str = VERSION,
) -> DestinationRef:
    return DestinationRef(
        name="github",
        kind="github",
        index_url=index_url,
        max_file_size=2048 * 2**20,
        repository=repository,
        tag=f"v{version}",
        api_url=api_url,
    )


def entry_for(wheel: Path, destination: DestinationRef, *, cuda: str = "13.0") -> WheelEntry:
    parts = wheel.name[: -len(".whl")].split("-")
    version, platform = parts[1], parts[-1]
    arch = "aarch64" if platform.endswith("aarch64") else "x86_64"
    label = version.split("+", 1)[1] if "+" in version else None
    return WheelEntry(
        cell=f"{cuda}-{arch}",
        cuda=cuda,
        arch=arch,
        filename=wheel.name,
        version=version,
        local_label=label,
        size=wheel.stat().st_size,
        sha256=sha256_file(wheel),
        sms=("75", "90"),
        ptx="100",
        toolchain={"nvcc": cuda},
        destination=destination,
    )


@dataclass(frozen=True)
class Release:
    dist: Path
    manifest: Manifest
    wheels: tuple[Path, ...]


def make_release(
    dist: Path,
    *,
    pypi: DestinationRef | None,
    github: DestinationRef | None = None,
    arches: Sequence[str] = ("x86_64",),
    payload: bytes = b"",
    version: str = VERSION,
    requires_python: str = ">=3.9",
) -> Release:
    """The matrix's shape in small: cu13 wheels for `pypi`, `+cu129` wheels for `github`;
    written to `dist` with `dist/manifest.json`."""
    entries: list[WheelEntry] = []
    wheels: list[Path] = []
    for arch in arches:
        platform = f"{MANYLINUX}_{arch}"
        if pypi is not None:
            wheel = make_wheel(
                dist,
                version=version,
                platform=platform,
                payload=payload,
                requires_python=requires_python,
            )
            wheels.append(wheel)
            entries.append(entry_for(wheel, pypi, cuda="13.0"))
        if github is not None:
            wheel = make_wheel(
                dist,
                version=f"{version}+cu129",
                platform=platform,
                payload=payload,
                requires_python=requires_python,
            )
            wheels.append(wheel)
            entries.append(entry_for(wheel, github, cuda="12.9"))
    manifest = Manifest(project=PROJECT, version=version, wheels=tuple(entries))
    write_manifest(manifest, dist / "manifest.json")
    return Release(dist=dist, manifest=manifest, wheels=tuple(wheels))


def fulcio_like_certificate(repository: str, workflow: str) -> bytes:
    """A self-signed DER certificate with the two Fulcio extensions a GitHub Actions signing
    certificate carries (source repository URI, build signer URI), as DER UTF8Strings. Not
    Fulcio's: publish reads only what it names, and verify refuses it (its chain)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sigstore-test")])

    def utf8(text: str) -> bytes:
        data = text.encode()
        return (
            bytes([0x0C, len(data)]) + data
            if len(data) < 0x80
            else (bytes([0x0C, 0x81, len(data)]) + data)
        )

    signer = f"https://github.com/{repository}/{workflow}@refs/tags/v{VERSION}"
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc))
        .not_valid_after(datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc))
        .add_extension(
            x509.UnrecognizedExtension(
                x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.12"),
                utf8(f"https://github.com/{repository}"),
            ),
            critical=False,
        )
        .add_extension(
            x509.UnrecognizedExtension(
                x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.9"), utf8(signer)
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.DER)


def attestation_for(
    wheel: Path,
    *,
    name: str | None = None,
    sha256: str | None = None,
    predicate_type: str = AttestationType.PYPI_PUBLISH_V1.value,
    signer: tuple[str, str] = ("k3-org/k3-kernels", ".github/workflows/release.yml"),
) -> Path:
    """`<wheel>.publish.attestation` shaped as `pypi_attestations sign` writes it, built with
    the library's own models (its statement names `name` / `sha256`, the wheel's unless
    given; its certificate names `signer`, a repository and workflow). Unsigned: signing
    needs Sigstore's Fulcio and an OIDC identity, which the library offers no offline way to
    stand in for. Publish takes it (it checks the subject and the repository named; PyPI
    checks the signature); `release verify` refuses it, as it must refuse any forgery."""
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [
            {"name": name or wheel.name, "digest": {"sha256": sha256 or sha256_file(wheel)}}
        ],
        "predicateType": predicate_type,
        "predicate": None,
    }
    attestation = Attestation(
        version=1,
        verification_material=VerificationMaterial(
            certificate=base64.b64encode(fulcio_like_certificate(*signer)),
            transparency_entries=[TransparencyLogEntry({"logIndex": "1"})],
        ),
        envelope=Envelope(
            statement=base64.b64encode(json.dumps(statement).encode()),
            signature=base64.b64encode(b"test signature"),
        ),
    )
    path = wheel.with_name(wheel.name + ".publish.attestation")
    path.write_text(attestation.model_dump_json(), encoding="utf-8")
    return path


def standin_entry(dist: Path, cell: Cell, *, made_by: str, payload: bytes = b"") -> WheelEntry:
    """A small real wheel under `cell`'s filename (its project, version and platform tag)
    in `dist`, and the manifest entry `release build` would give it: the cell's SMs and
    PTX, `made_by` as its toolchain."""
    platform = cell.wheel_filename.removesuffix(".whl").rsplit("-", 1)[1]
    wheel = make_wheel(dist, version=str(cell.version), platform=platform, payload=payload)
    assert wheel.name == cell.wheel_filename
    return WheelEntry.of(
        cell,
        filename=wheel.name,
        size=wheel.stat().st_size,
        sha256=sha256_file(wheel),
        sms=tuple(str(sm) for sm in cell.sms),
        ptx=str(cell.ptx) if cell.ptx else None,
        toolchain={"stand-in": made_by},
    )


def make_sdist(
    dist: Path, destination: DestinationRef, *, version: str = VERSION, payload: str = ""
) -> SdistEntry:
    """A small sdist of the release (PEP 625 name, one top directory, PKG-INFO), written
    as `release build --sdist` writes one; its manifest entry for `destination`."""
    base = f"{MODULE}-{version}"
    members = {
        f"{base}/PKG-INFO": f"Metadata-Version: 2.4\nName: {PROJECT}\nVersion: {version}\n"
        f"Description-Content-Type: text/markdown\n\n{DESCRIPTION}",
        f"{base}/pyproject.toml": f'[project]\nname = "{PROJECT}"\nversion = "{version}"\n'
        + payload,
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, text in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    path = dist / f"{base}.tar.gz"
    path.write_bytes(normalised(raw.getvalue(), 315532800))
    return SdistEntry(
        filename=path.name, version=version, size=path.stat().st_size,
        sha256=sha256_file(path), destination=destination,
    )  # fmt: skip


def with_sdist(release: Release, destination: DestinationRef, *, payload: str = "") -> Release:
    """`release` with its sdist for `destination`, recorded in dist/manifest.json."""
    sdist = make_sdist(release.dist, destination, payload=payload)
    manifest = replace(release.manifest, sdist=sdist)
    write_manifest(manifest, release.dist / "manifest.json")
    return replace(release, manifest=manifest)
