"""release.verify.provenance's pure core, on recorded attestations (tests/data/provenance)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from release.records.published import PublishedFile
from release.verify.provenance import (
    Identity,
    integrity_url,
    provenance_check,
    read_github_attestation,
    read_pypi_provenance,
)

DATA = Path(__file__).parent.parent / "data" / "provenance"
DEMO_WHEEL = "github_provenance_demo-0.0.12-py3-none-any.whl"
DEMO_SHA256 = "ae57936def59bc4c75edd3a837d89bcefc6d3a5e31d55a6fa7a71624f92c3c3b"
DEMO = Identity(repository="actions/attest-demo", workflow=".github/workflows/build-python.yml")
OURS = Identity(repository="k3-org/k3-kernels", workflow=".github/workflows/release.yml")
WHERE = "https://api.example/repos/x/y/attestations/sha256:..."


def demo_bundle() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / f"{DEMO_WHEEL}.sigstore.json").read_text())
    return loaded


def file(name: str = DEMO_WHEEL, sha256: str = DEMO_SHA256) -> PublishedFile:
    return PublishedFile(
        filename=name,
        sha256=sha256,
        size=1437,
        kind="github",
        destination="github",
        arch="any",
        local_label=None,
        url=f"https://example.invalid/{name}",
        index_url="https://pypi.example/simple/",
    )


def test_the_recorded_github_bundle_names_its_file_repository_and_workflow() -> None:
    attested = read_github_attestation({"bundle": demo_bundle(), "repository_id": 1})
    assert attested.problem is None
    assert attested.sha256s == {DEMO_SHA256}
    # the SLSA predicate and the Fulcio certificate both name it
    assert attested.identities == (DEMO, DEMO)
    assert (DATA / DEMO_WHEEL).is_file()


def test_an_attestation_naming_this_repository_and_workflow_is_ok() -> None:
    attested = [read_github_attestation({"bundle": demo_bundle()})]
    check = provenance_check(file(), attested, DEMO, required=False, where=WHERE)
    assert check.ok
    assert check.detail == (
        "provenance: actions/attest-demo .github/workflows/build-python.yml "
        "(signature not checked offline)"
    )


def test_an_attestation_naming_another_repository_fails_and_says_what_it_names() -> None:
    attested = [read_github_attestation({"bundle": demo_bundle()})]
    check = provenance_check(file(), attested, OURS, required=False, where=WHERE)
    assert not check.ok
    assert check.detail == (
        "provenance names another repository/workflow: actions/attest-demo "
        ".github/workflows/build-python.yml (expected k3-org/k3-kernels "
        ".github/workflows/release.yml)"
    )


def test_another_workflow_of_the_same_repository_fails() -> None:
    attested = [read_github_attestation({"bundle": demo_bundle()})]
    release_yml = Identity(
        repository="Actions/Attest-Demo", workflow=".github/workflows/release.yml"
    )
    check = provenance_check(file(), attested, release_yml, required=False, where=WHERE)
    assert not check.ok
    assert "another repository/workflow" in check.detail


def test_no_attestation_is_reported_and_fails_only_when_required() -> None:
    assert provenance_check(file(), None, OURS, required=False, where=WHERE).ok
    required = provenance_check(file(), None, OURS, required=True, where=WHERE)
    assert (required.ok, required.detail) == (False, "no provenance")


def test_an_attestation_of_other_bytes_is_no_provenance_for_this_file() -> None:
    attested = [read_github_attestation({"bundle": demo_bundle()})]
    check = provenance_check(file(sha256="0" * 64), attested, DEMO, required=True, where=WHERE)
    assert (check.ok, check.detail) == (False, "no provenance for this sha256")


def test_a_bundle_whose_predicate_and_certificate_disagree_fails() -> None:
    bundle = demo_bundle()
    envelope = bundle["dsseEnvelope"]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    workflow = statement["predicate"]["buildDefinition"]["externalParameters"]["workflow"]
    workflow["repository"] = "https://github.com/k3-org/k3-kernels"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    attested = [read_github_attestation({"bundle": bundle})]
    forged = Identity(repository="k3-org/k3-kernels", workflow=DEMO.workflow)
    check = provenance_check(file(), attested, forged, required=False, where=WHERE)
    assert not check.ok
    assert "actions/attest-demo" in check.detail  # what the certificate names


def test_an_unreadable_bundle_fails_with_the_reason() -> None:
    attested = [read_github_attestation({"bundle": {"dsseEnvelope": {}}})]
    check = provenance_check(file(), attested, OURS, required=False, where=WHERE)
    assert not check.ok
    assert check.detail.startswith("unreadable bundle")


def test_a_recorded_pypi_provenance_of_another_publisher_fails() -> None:
    body = (DATA / "gcb_attestation_test-0.0.0.tar.gz.provenance").read_bytes()
    attested = read_pypi_provenance(body)
    sha256 = "461317362419124b6012e855423a9078d6de8aed3e74fa78cc74d669b23dc6cf"
    assert [a.sha256s for a in attested] == [{sha256}]
    pypi_file = file("gcb_attestation_test-0.0.0.tar.gz", sha256)
    check = provenance_check(pypi_file, attested, OURS, required=False, where=WHERE)
    assert not check.ok
    assert "a Google publisher" in check.detail


def test_an_unreadable_pypi_provenance_fails() -> None:
    (attested,) = read_pypi_provenance(b'{"version": 1}')
    assert attested.problem is not None
    check = provenance_check(file(), [attested], OURS, required=False, where=WHERE)
    assert not check.ok


def test_the_integrity_url_is_on_the_index_origin() -> None:
    url = integrity_url(file("k3_kernels-0.1.0-py3-none-any.whl"), "K3_Kernels", "0.1.0")
    assert url == (
        "https://pypi.example/integrity/k3-kernels/0.1.0/k3_kernels-0.1.0-py3-none-any.whl/provenance"
    )
