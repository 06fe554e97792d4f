"""Forged and hostile attestation input (issue 40): each forgery refused, or left
unverified, with a one-line reason of at most 200 characters; random JSON and bytes fed to
every reader of attestation material, and nothing escapes but the tool's own answer.

The forgeries are made at test time from the real, production-signed files in
tests/data/provenance (see its README) and from certificates made with `cryptography`."""

from __future__ import annotations

import base64
import copy
import json
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from release.errors import PublishError
from release.provenance.attestation import (
    checked_provenance,
    provenance_problem,
    read_provenance,
    signer_of,
    statement_sha256s,
    subject_problem,
)
from release.provenance.signature import (
    REASON_LIMIT,
    UNVERIFIED_GITHUB,
    Checked,
    ExpectedSigner,
    check_bundle_json,
    reason,
)
from release.remote.github_model import ATTESTATIONS_PAGE, attestation_items
from release.verify.checks import provenance_verdict
from release.verify.provenance import check_github_attestation, predicate_workflow
from tests.integration.wheels import fulcio_like_certificate

DATA = Path(__file__).parent.parent / "data" / "provenance"
MODELS = "pypi_attestation_models-0.0.4a2.tar.gz"
MODELS_SHA256 = "c9709ce6fd5b67b59b4a28758cf14d3f411803c4b89b6068b1f1a8e4ee94c8ef"
MODELS_SIGNER = ExpectedSigner(
    repository="trailofbits/pypi-attestation-models",
    workflow=".github/workflows/release.yml",
    ref="refs/tags/v0.0.4a2",
)
SDIST = "pypi_attestations-0.0.19.tar.gz"
SDIST_SHA256 = "9bb1add04b1b4e182be6b0b80931593f7a291eb49d69b4fd728a5d4cbcdc4bd3"
SDIST_SIGNER = ExpectedSigner(
    repository="trailofbits/pypi-attestations",
    workflow=".github/workflows/release.yml",
    ref="refs/tags/v0.0.19",
)
OURS = ExpectedSigner(
    repository="k3-org/k3-kernels", workflow=".github/workflows/release.yml", ref="refs/tags/v0.1.0"
)
NOT_FULCIO = (
    "its certificate was not issued by Sigstore public-good's Fulcio (self-signed, or "
    "another Sigstore instance's)"
)
EDITED = "its signature does not match its statement (edited bytes, or another key's)"


def bundle() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / f"{MODELS}.sigstore").read_text())
    return loaded


def provenance() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / f"{SDIST}.provenance").read_text())
    return loaded


def one_line(text: str | None) -> str:
    assert text is not None
    assert "\n" not in text
    assert len(text) <= REASON_LIMIT
    assert "\\x" not in text  # no byte reprs
    return text


# --- The forged inputs, each with the reason verify prints (the closing table). ---


def self_signed(document: dict[str, Any]) -> dict[str, Any]:
    der = fulcio_like_certificate(MODELS_SIGNER.repository, MODELS_SIGNER.workflow)
    document["verificationMaterial"]["certificate"]["rawBytes"] = base64.b64encode(der).decode()
    return document


def timestamp_only(document: dict[str, Any]) -> dict[str, Any]:
    material = document["verificationMaterial"]
    material["tlogEntries"] = []
    material["timestampVerificationData"] = {"rfc3161Timestamps": [{"signedTimestamp": "AAAA"}]}
    return document


def without(key: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def edit(document: dict[str, Any]) -> dict[str, Any]:
        del document["verificationMaterial"]["tlogEntries"][0][key]
        return document

    return edit


def payload(data: bytes) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def edit(document: dict[str, Any]) -> dict[str, Any]:
        document["dsseEnvelope"]["payload"] = base64.b64encode(data).decode()
        return document

    return edit


def root_hash(document: dict[str, Any]) -> dict[str, Any]:
    proof = document["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]
    proof["rootHash"] = base64.b64encode(b"\x00" * 32).decode()
    return document


BUNDLE_FORGERIES: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]], str]] = [
    ("self-made certificate with Fulcio extensions", self_signed, NOT_FULCIO),
    (
        "self-made certificate, timestamp-only shape",
        lambda d: timestamp_only(self_signed(d)),
        UNVERIFIED_GITHUB,
    ),
    ("real bundle, log entry stripped, a timestamp added", timestamp_only, UNVERIFIED_GITHUB),
    (
        "bare timestamp-only shape",
        lambda d: {
            "verificationMaterial": {"timestampVerificationData": {"rfc3161Timestamps": [1]}}
        },
        UNVERIFIED_GITHUB,
    ),
    (
        "real bundle, log entry stripped, no timestamp",
        lambda d: {**d, "verificationMaterial": {**d["verificationMaterial"], "tlogEntries": []}},
        "not a Sigstore bundle sigstore-python accepts (expected exactly one log entry in bundle)",
    ),
    (
        "no inclusion promise",
        without("inclusionPromise"),
        "nothing proves when it was signed (no inclusion promise from the transparency log, no "
        "signed timestamp): its certificate is valid for minutes only",
    ),
    (
        "no inclusion proof",
        without("inclusionProof"),
        "not a Sigstore bundle sigstore-python accepts "
        "(verificationMaterial.tlogEntries.0.inclusionProof: Field required)",
    ),
    (
        "altered inclusion proof root hash",
        root_hash,
        "its transparency-log entry does not verify (invalid log entry: inclusion proof contains "
        "invalid root hash)",
    ),
    ("statement not JSON", payload(b"\xff not json"), EDITED),
    ("statement a JSON array", payload(b"[1]"), EDITED),
    ("statement a JSON string", payload(b'"s"'), EDITED),
]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [(edit, expected) for _, edit, expected in BUNDLE_FORGERIES],
    ids=[name for name, _, _ in BUNDLE_FORGERIES],
)
def test_each_forged_bundle_of_the_attestations_api_is_refused_with_its_reason(
    edit: Callable[[dict[str, Any]], dict[str, Any]], expected: str
) -> None:
    checked = check_github_attestation({"bundle": edit(bundle())}, MODELS_SHA256, MODELS_SIGNER)
    assert one_line(checked.problem).startswith(expected)
    assert checked.statement is None
    ok, detail = provenance_verdict([checked], required=False)
    assert not ok  # refused or unverified: a failure even where provenance is not required
    assert detail.startswith(("provenance refused: ", "provenance unverified: "))
    one_line(detail)


def pep740_with_statement(data: bytes) -> bytes:
    document = provenance()
    envelope = document["attestation_bundles"][0]["attestations"][0]["envelope"]
    envelope["statement"] = base64.b64encode(data).decode()
    return json.dumps(document).encode()


@pytest.mark.parametrize("statement", [b"\xff not json", b"[1]", b'"s"', b"{"])
def test_a_pep740_statement_that_is_no_json_object_is_refused_on_every_route(
    statement: bytes,
) -> None:
    body = pep740_with_statement(statement)
    # PyPI's integrity API and the index's data-provenance link: release verify
    (checked,) = checked_provenance(body, SDIST_SHA256, SDIST_SIGNER)
    assert checked.problem == EDITED
    # release publish's index build: a link to it would be a false promise
    assert (
        provenance_problem(body, SDIST_SHA256)
        == f"it attests no file of sha256 {SDIST_SHA256[:12]}..."
    )
    # release publish's check of the attestation beside a wheel
    attestation = json.dumps(json.loads(body)["attestation_bundles"][0]["attestations"][0])
    problem = subject_problem(SDIST, SDIST_SHA256, attestation.encode())
    assert problem in ("its statement is not JSON", "its statement is not a JSON object")


def test_reasons_drop_byte_reprs_and_shorten_digests() -> None:
    raw = "root_hash=b'\\x00\\x01' hashes=[b\"\\xcd\"] sha256 " + "ab" * 32 + " " + "QUFB" * 20
    assert (
        reason(raw) == "root_hash=<bytes> hashes=[<bytes>] sha256 abababababab... QUFBQUFBQUFB..."
    )
    assert len(reason("x " * 5000)) == REASON_LIMIT
    assert reason("GitHub's Sigstore instance's b'x'") == "GitHub's Sigstore instance's <bytes>"


# --- Random input to every reader: nothing escapes but the tool's own answer. ---

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(string.ascii_letters, max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON document (keys and indexes), the root included."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += paths(value, (*prefix, index))
    return out


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copied = copy.deepcopy(document)
    node = copied
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return copied


def mutations(original: Any) -> st.SearchStrategy[Any]:
    """The real document with one subtree replaced by random JSON (or removed)."""
    every = paths(original)

    def mutate(index: int, value: Any, remove: bool) -> Any:
        path = every[index % len(every)]
        if remove and path:
            copied = replaced(original, path, None)
            parent = copied
            for part in path[:-1]:
                parent = parent[part]
            del parent[path[-1]]
            return copied
        return replaced(original, path, value)

    return st.builds(mutate, st.integers(min_value=0), JSON, st.booleans())


def assert_answers(checked: Checked) -> None:
    if checked.problem is not None:
        one_line(checked.problem)
    ok, detail = provenance_verdict([checked], required=True)
    assert ok == (checked.problem is None)
    one_line(detail.removeprefix("provenance refused: "))


SETTINGS = settings(max_examples=150)


@SETTINGS
@given(st.one_of(JSON, mutations(bundle())))
def test_random_bundles_of_the_attestations_api(document: Any) -> None:
    checked = check_github_attestation({"bundle": document}, MODELS_SHA256, MODELS_SIGNER)
    assert_answers(checked)
    if isinstance(document, dict):
        assert_answers(check_bundle_json(document, OURS))


@SETTINGS
@given(JSON)
def test_random_items_of_the_attestations_api(item: Any) -> None:
    """An item that is no object is refused as one, never read as no attestation."""
    checked = check_github_attestation(item, MODELS_SHA256, MODELS_SIGNER)
    assert_answers(checked)
    assert checked.problem is not None
    if not isinstance(item, dict):
        assert checked.problem == "unreadable attestation: the item is not an object"


@SETTINGS
@given(st.one_of(JSON, mutations(provenance())).map(lambda d: json.dumps(d).encode()) | st.binary())
def test_random_provenance_objects(body: bytes) -> None:
    for checked in checked_provenance(body, SDIST_SHA256, SDIST_SIGNER):
        assert_answers(checked)
    problem = provenance_problem(body, SDIST_SHA256)
    if problem is not None:
        one_line(problem)
    entries = read_provenance(body)
    if isinstance(entries, str):
        one_line(entries)


@SETTINGS
@given(
    st.one_of(JSON, mutations(provenance()["attestation_bundles"][0]["attestations"][0])).map(
        lambda d: json.dumps(d).encode()
    )
    | st.binary()
)
def test_random_publish_attestations(document: bytes) -> None:
    problem = subject_problem(SDIST, SDIST_SHA256, document)
    if problem is not None:
        one_line(problem)
    signer = signer_of(document)
    if isinstance(signer, str):
        one_line(signer)


@SETTINGS
@given(JSON)
def test_random_statements(statement: Any) -> None:
    if isinstance(statement, dict):
        predicate_workflow(statement)
    assert isinstance(statement_sha256s(statement), frozenset)


def test_an_attestations_answer_holding_more_than_its_page_is_refused_unchecked() -> None:
    """Each item costs a signature check (about 1.5 ms): 6,800 fit in the 64 MiB an answer
    is read to, 10 s of CPU for one file, where the page asked for 100."""
    what = "`list the attestations of sha256:0123` on o/r"
    assert attestation_items({"attestations": [{}] * ATTESTATIONS_PAGE}, what) == [{}] * 100
    with pytest.raises(PublishError, match=r"with 101 items for a page of 100$"):
        attestation_items({"attestations": [{}] * 101}, what)
    with pytest.raises(PublishError, match=r"with no list$"):
        attestation_items({"attestations": {}}, what)
