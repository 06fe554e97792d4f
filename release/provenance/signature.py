"""Whether an attestation's Sigstore signature holds, and whether the release's workflow made
it: sigstore-python's `Verifier.verify_dsse` (the certificate's chain to Fulcio at the time
the transparency log or a signed timestamp proves, its SCT, the log entry's inclusion proof
and promise, the DSSE signature over the statement), with the identity policy here
(`signer_problem`) as its `VerificationPolicy`.

The trust root is the public-good instance's `trusted_root.json` that sigstore-python ships
(the target its TUF client starts from), read from the installed package: offline, with no
TUF refresh and nothing written to the user's cache, so every run judges alike. A signature
under a key that this root does not hold (one Sigstore adds after this sigstore-python
release) fails: it never passes unchecked. A newer sigstore-python brings a newer root.

GitHub's own Sigstore instance, which signs the artifact attestations of private
repositories, records no transparency-log entry (an RFC 3161 timestamp instead), and
sigstore-python verifies no bundle without one (sigstore/sigstore-python#1529). Anyone can
write a bundle of that shape, so the shape proves nothing: such a bundle is "unverified"
(`Checked.verifiable` is False), which release verify counts as a failure, never as
verified and never as "no provenance"; it is not said to be GitHub's, since nothing here
checked that.

Every reason is one line of at most REASON_LIMIT characters (`reason`): what sigstore,
pydantic or json say about hostile input carries byte reprs and digests, which are cut.

The expected identity, as GitHub's `gh attestation verify --repo R --signer-workflow W`
and PyPI's trusted publishing read Fulcio's certificate extensions
(github.com/sigstore/fulcio docs/oid-info.md):
- Source Repository URI: the repository whose run signed (the caller of a reusable
  workflow);
- Source Repository Ref: the release's tag;
- Build Config URI: the workflow that run started from (`--provenance-workflow`);
- Build Signer URI: the workflow whose job signed: the same one, or the reusable workflow
  that workflow calls (`--provenance-signer-workflow`, gh's `--signer-workflow`).

sigstore's models and verifier, cryptography and pydantic are imported where a bundle or a
certificate is read (only sigstore's errors, which import nothing heavy, at the top), so
that a command that checks no attestation loads none of them.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sigstore.errors import CertValidationError, Error, VerificationError

from release.fsutil import json_document

if TYPE_CHECKING:
    from cryptography import x509
    from sigstore.models import Bundle, TrustedRoot
    from sigstore.verify import Verifier

GITHUB = "https://github.com/"
GITHUB_ACTIONS_ISSUER = "https://token.actions.githubusercontent.com"
PUBLIC_GOOD_TUF = "https://tuf-repo-cdn.sigstore.dev"  # sigstore-python's DEFAULT_TUF_URL
PUBLIC_GOOD = "Sigstore public-good"
IN_TOTO = "application/vnd.in-toto+json"
# Fulcio's certificate extensions; .1 is a raw string, the later ones DER UTF8Strings
ISSUER_V1 = "1.3.6.1.4.1.57264.1.1"
ISSUER = "1.3.6.1.4.1.57264.1.8"
BUILD_SIGNER_URI = "1.3.6.1.4.1.57264.1.9"
SOURCE_REPOSITORY_URI = "1.3.6.1.4.1.57264.1.12"
SOURCE_REPOSITORY_REF = "1.3.6.1.4.1.57264.1.14"
BUILD_CONFIG_URI = "1.3.6.1.4.1.57264.1.18"
SIGNER_FLAG = "--provenance-signer-workflow"
REASON_LIMIT = 200
UNVERIFIED_GITHUB = "unverified: GitHub's private-instance bundles need sigstore-python#1529"
# what hostile input makes the libraries echo: byte reprs, digests, base64
_BYTES_REPR = re.compile(r"(?<!\w)b'(?:[^'\\]|\\.)*'" + r'|(?<!\w)b"(?:[^"\\]|\\.)*"')
_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})")
_HEX = re.compile(r"\b[0-9a-fA-F]{16,}\b")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")
# what the libraries raise on material they cannot read (hostile input, not a bug here)
HOSTILE = (Error, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError)


def reason(text: str, limit: int = REASON_LIMIT) -> str:
    """`text` as one line of at most `limit` characters: byte reprs dropped, digests and
    base64 shortened, nothing unprintable."""
    line = " ".join(text.split())
    line = _BYTES_REPR.sub("<bytes>", line)
    line = _ESCAPE.sub("?", line)
    line = _HEX.sub(lambda m: m.group()[:12] + "...", line)
    line = _BASE64.sub(lambda m: m.group()[:12] + "...", line)
    line = "".join(c if c.isprintable() else "?" for c in line)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def error_text(error: BaseException) -> str:
    """What an exception says, for a reason: a pydantic error's first location and message
    (also where it is the cause of sigstore's), else its first line, else its type."""
    from pydantic import ValidationError

    cause = error if isinstance(error, ValidationError) else error.__cause__ or error.__context__
    if isinstance(cause, ValidationError) and cause.errors():
        first = cause.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "the document"
        return f"{where}: {first.get('msg', 'invalid')}"
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@dataclass(frozen=True, kw_only=True)
class ExpectedSigner:
    """Who must have signed: a run of `workflow` in `repository` (owner/name) at `ref`
    (refs/tags/...; None: any tag), signed from that workflow's own job or, when
    `signer_workflow` (owner/name/path[@ref]) is given, from that reusable workflow's."""

    repository: str
    workflow: str
    ref: str | None
    signer_workflow: str | None = None

    def __str__(self) -> str:
        at = self.ref or "refs/tags/*"
        via = f" via {self.signer_workflow}" if self.signer_workflow else ""
        return f"{self.repository} {self.workflow}@{at}{via}"


@dataclass(frozen=True, kw_only=True)
class Checked:
    """One attestation, checked: its verified in-toto statement and who signed it, or why
    it is refused (`verifiable`: False where it could not be checked here at all)."""

    statement: Mapping[str, Any] | None = None
    signer: str | None = None
    problem: str | None = None
    verifiable: bool = True


# --- The identity policy (pure: the certificate's claims in, a problem out). ---


def _der_utf8(value: bytes) -> str:
    """Fulcio's newer extensions are DER UTF8Strings; the older ones raw bytes."""
    if len(value) >= 2 and value[0] == 0x0C:
        length, start = value[1], 2
        if length & 0x80:
            count = length & 0x7F
            length, start = int.from_bytes(value[2 : 2 + count], "big"), 2 + count
        return value[start : start + length].decode("utf-8", errors="replace")
    return value.decode("utf-8", errors="replace")


def claims_of(certificate: x509.Certificate) -> dict[str, str]:
    """The Fulcio extensions of a certificate, by dotted OID, as text."""
    from cryptography import x509

    claims: dict[str, str] = {}
    for extension in certificate.extensions:
        value = extension.value
        if isinstance(value, x509.UnrecognizedExtension):
            claims[extension.oid.dotted_string] = _der_utf8(value.value)
    return claims


def _split_workflow_uri(uri: str, ref: str) -> tuple[str, str] | None:
    """`https://github.com/owner/name/path@ref` -> (owner/name, path), for this `ref`."""
    if not uri.startswith(GITHUB) or not uri.endswith(f"@{ref}"):
        return None
    parts = uri[len(GITHUB) : -len(ref) - 1].split("/", 2)
    if len(parts) < 3:
        return None
    return f"{parts[0]}/{parts[1]}", parts[2]


def _short(uri: str) -> str:
    return uri.removeprefix(GITHUB) or "nothing"


def signer_problem(claims: Mapping[str, str], expected: ExpectedSigner) -> str | None:
    """Why a certificate with these claims is not the expected signer's, or None."""
    issuer = claims.get(ISSUER) or claims.get(ISSUER_V1)
    if issuer != GITHUB_ACTIONS_ISSUER:
        return f"its certificate was issued to {issuer or 'no OIDC issuer'}, not to GitHub Actions"
    source = claims.get(SOURCE_REPOSITORY_URI, "")
    if source.lower() != f"{GITHUB}{expected.repository}".lower():
        return f"it was signed in {_short(source)}, not {expected.repository}"
    ref = claims.get(SOURCE_REPOSITORY_REF, "")
    if (expected.ref is None and not ref.startswith("refs/tags/")) or (
        expected.ref is not None and ref != expected.ref
    ):
        return f"it was signed at {ref or 'no ref'}, not {expected.ref or 'a tag'}"
    config = claims.get(BUILD_CONFIG_URI, "")
    started = _split_workflow_uri(config, ref)
    if started is None or started[0].lower() != expected.repository.lower():
        return f"its certificate names the workflow {_short(config)}, not one of {_short(source)}"
    if started[1] != expected.workflow:
        return f"it was signed by a run of {started[1]}, not {expected.workflow}"
    return _build_signer_problem(claims.get(BUILD_SIGNER_URI, ""), config, expected)


def _build_signer_problem(signer: str, config: str, expected: ExpectedSigner) -> str | None:
    if expected.signer_workflow is None:
        if signer.startswith(GITHUB) and _same_workflow(
            signer.removeprefix(GITHUB), config.removeprefix(GITHUB)
        ):
            return None
        return (
            f"it was signed by the reusable workflow {_short(signer)} (name it with {SIGNER_FLAG})"
        )
    if signer.startswith(GITHUB) and _same_workflow(
        signer.removeprefix(GITHUB), expected.signer_workflow
    ):
        return None
    return f"it was signed by {_short(signer)}, not the signer workflow {expected.signer_workflow}"


def _same_workflow(signed: str, wanted: str) -> bool:
    """`owner/name/path@ref` against `owner/name/path[@ref]`: the owner and name in any
    case, the path exactly, the ref where `wanted` names one."""
    signed_workflow, _, signed_ref = signed.partition("@")
    wanted_workflow, _, wanted_ref = wanted.partition("@")
    got, want = signed_workflow.split("/", 2), wanted_workflow.split("/", 2)
    return (
        len(got) == 3
        and len(want) == 3
        and [part.lower() for part in got[:2]] == [part.lower() for part in want[:2]]
        and got[2] == want[2]
        and (not wanted_ref or signed_ref == wanted_ref)
    )


def signed_by(claims: Mapping[str, str]) -> str:
    """Who signed, as the certificate names it: repository, workflow and ref, and the
    reusable workflow that signed where that is another."""
    ref = claims.get(SOURCE_REPOSITORY_REF, "")
    config = claims.get(BUILD_CONFIG_URI, "")
    started = _split_workflow_uri(config, ref)
    named = f"{started[0]} {started[1]}@{ref}" if started else _short(config)
    signer = claims.get(BUILD_SIGNER_URI, "")
    return named if signer == config else f"{named} via {_short(signer)}"


class WrongSigner(VerificationError):
    """The identity policy's refusal (its message is the one-line reason)."""


@dataclass(frozen=True)
class SignerPolicy:
    """sigstore's `VerificationPolicy` for `expected`."""

    expected: ExpectedSigner

    def verify(self, cert: x509.Certificate) -> None:
        problem = signer_problem(claims_of(cert), self.expected)
        if problem is not None:
            raise WrongSigner(problem)


# --- Verifying (sigstore-python against the public-good trust root, offline). ---


@functools.cache
def public_good_root() -> TrustedRoot:
    """The public-good trust root that sigstore-python ships."""
    from sigstore.models import TrustedRoot

    embedded = resources.files("sigstore._store") / quote(PUBLIC_GOOD_TUF, safe="")
    with resources.as_file(embedded / "trusted_root.json") as path:
        return TrustedRoot.from_file(str(path))


@functools.cache
def public_good() -> Verifier:
    """A verifier on that trust root."""
    from sigstore.verify import Verifier

    return Verifier(trusted_root=public_good_root())


def check_bundle(bundle: Bundle, expected: ExpectedSigner) -> Checked:
    """Verify `bundle` (a DSSE envelope around an in-toto statement) against `expected`."""
    try:
        kind, payload = public_good().verify_dsse(bundle, SignerPolicy(expected))
    except WrongSigner as error:
        return Checked(problem=reason(str(error)))
    except CertValidationError:
        return Checked(problem=_certificate_reason(bundle.signing_certificate))
    except VerificationError as error:
        return Checked(problem=reason(_verification_reason(str(error))))
    except HOSTILE as error:  # hostile material the library fails on otherwise
        return Checked(problem=reason(f"its signature does not verify ({error_text(error)})"))
    if kind != IN_TOTO:
        return Checked(problem=reason(f"its envelope holds {kind}, not an in-toto statement"))
    try:
        statement = json_document(payload, "the signed statement")
    except ValueError:
        return Checked(problem="its signed statement is not JSON")
    if not isinstance(statement, dict):
        return Checked(problem="its signed statement is not a JSON object")
    try:
        signer = signed_by(claims_of(bundle.signing_certificate))
    except HOSTILE as error:
        return Checked(problem=reason(f"its certificate is unreadable ({error_text(error)})"))
    return Checked(statement=statement, signer=reason(signer))


def timestamp_only(document: Mapping[str, Any]) -> bool:
    """The shape of a bundle of GitHub's private instance: no transparency-log entry, an
    RFC 3161 timestamp. Only a shape: anyone can write one."""
    material = document.get("verificationMaterial")
    material = material if isinstance(material, Mapping) else {}
    timestamps = material.get("timestampVerificationData")
    stamped = isinstance(timestamps, Mapping) and bool(timestamps.get("rfc3161Timestamps"))
    return stamped and not material.get("tlogEntries")


def check_bundle_json(document: Mapping[str, Any], expected: ExpectedSigner) -> Checked:
    """A Sigstore bundle as GitHub's attestations API serves it, verified against
    `expected`. A timestamp-only bundle cannot be verified here (sigstore-python#1529):
    unverified, whatever it claims."""
    if timestamp_only(document):
        return Checked(problem=UNVERIFIED_GITHUB, verifiable=False)
    from sigstore.models import Bundle

    try:
        bundle = Bundle.from_json(json.dumps(document))
    except Error as error:
        return Checked(problem=bundle_problem(error))
    except HOSTILE as error:
        return Checked(problem=reason(f"unreadable bundle: {error_text(error)}"))
    return check_bundle(bundle, expected)


def bundle_problem(error: Error) -> str:
    """Why sigstore-python does not take a bundle as one (InvalidBundle and kin)."""
    message = error_text(error)
    if "inclusion promise or signed timestamp" in message:
        return (
            "nothing proves when it was signed (no inclusion promise from the transparency "
            "log, no signed timestamp): its certificate is valid for minutes only"
        )
    return reason(f"not a Sigstore bundle sigstore-python accepts ({message})")


def _certificate_reason(certificate: x509.Certificate) -> str:
    """Why a certificate's chain failed, for the message only (sigstore refused it): not
    Fulcio's at all, or Fulcio's but not valid at the time the log or a timestamp proves."""
    try:
        fulcio = _issued_by_fulcio(certificate)
    except HOSTILE:
        fulcio = False
    if fulcio:
        return (
            "its certificate was not valid when the transparency log recorded the signature "
            "(expired, or another signature's certificate)"
        )
    return (
        f"its certificate was not issued by {PUBLIC_GOOD}'s Fulcio (self-signed, or "
        "another Sigstore instance's)"
    )


def _issued_by_fulcio(certificate: x509.Certificate) -> bool:
    """Whether `certificate` chains to the trust root's Fulcio at its own start of
    validity (sigstore-python's chain policy: code signing, not client auth)."""
    from cryptography import x509
    from cryptography.x509.verification import (
        Criticality,
        ExtensionPolicy,
        PolicyBuilder,
        Store,
    )
    from cryptography.x509.verification import VerificationError as X509VerificationError

    fulcio = public_good_root().get_fulcio_certs()
    ca = ExtensionPolicy.webpki_defaults_ca().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    ee = ExtensionPolicy.webpki_defaults_ee().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    verifier = (
        PolicyBuilder()
        .store(Store(fulcio))
        .time(certificate.not_valid_before_utc)
        .extension_policies(ca_policy=ca, ee_policy=ee)
        .build_client_verifier()
    )
    try:
        verifier.verify(certificate, [])
    except (X509VerificationError, x509.UnsupportedGeneralNameType):
        return False
    return True


def _verification_reason(message: str) -> str:
    first = message.splitlines()[0] if message else "verification failed"
    if first.startswith("DSSE:"):
        return "its signature does not match its statement (edited bytes, or another key's)"
    if "not enough sources of verified time" in first:
        return "nothing proves when it was signed (no log entry time, no signed timestamp)"
    if "expired at time of signing" in first:
        return "its certificate had expired when it was signed"
    if first.startswith("invalid log entry"):
        # what follows ": expected" is sigstore's repr of the proof, bytes and all
        return f"its transparency-log entry does not verify ({first.split(': expected', 1)[0]})"
    if "SCT" in first:
        return f"its certificate's SCT does not verify ({first})"
    return f"its signature does not verify ({first})"
