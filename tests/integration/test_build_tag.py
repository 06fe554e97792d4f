"""`--build-tag` end to end, through the command line, against a real pypiserver and the
stand-in GitHub: a wheel rebuilt with other bytes under a name both destinations hold goes
as the next build of that name (`NAME-1-...whl`) beside the old bytes, never in their place.
`release plan` and the dry run show it, dist/ and the records say what was published,
`release verify` checks it (its real pip picks the build-tagged wheel from PyPI and from the
variant's index, which lists every build), a re-run from the same rebuild changes nothing,
and the next rebuild goes as build 2."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from release.cli import main
from release.errors import ConflictError
from release.matrix import load_matrix
from release.records.manifest import DestinationRef, Manifest, read_manifest, write_manifest
from release.records.release_manifest import RELEASE_MANIFEST, parse_release_manifest
from tests.github_standin import DEFAULT_REPO, GitHubStandIn
from tests.integration.jobenv import publish_job_env
from tests.integration.test_publish_e2e import serve
from tests.integration.wheels import (
    PROJECT,
    VERSION,
    entry_for,
    github_destination,
    make_release,
    make_wheel,
    write_release,
)
from tests.local_http import LOCAL
from tests.pypi_server import PypiServer

BIN = Path(sys.executable).parent
X86 = "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
CU129 = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"


def build(name: str, number: int) -> str:
    """`name` as build `number` of it."""
    head, tags = name.split("-py3-", 1)
    return f"{head}-{number}-py3-{tags}"


@dataclass(frozen=True)
class Setup:
    root: Path
    matrix: Path
    standin: GitHubStandIn
    pypi: PypiServer


@pytest.fixture
def setup(
    tmp_path: Path,
    pypiserver: PypiServer,
    github_standin: GitHubStandIn,
    monkeypatch: pytest.MonkeyPatch,
) -> Setup:
    publish_job_env(monkeypatch, pypiserver, github_standin.token)
    matrix = write_release(
        tmp_path,
        f"""project: project
defaults: {{arches: [x86_64], sms: [90], ptx: 90, manylinux: "2_28"}}
cuda:
  "13.0": {{destination: pypi}}
  "12.9": {{local-label: cu129, destination: github}}
destinations:
  pypi: {{kind: pypi, repository-url: "{pypiserver.url}", index-url: "{pypiserver.index_url}"}}
  github: {{kind: github, repository: {DEFAULT_REPO}, api-url: "{github_standin.api_url}"}}
""",
    )
    return Setup(root=tmp_path, matrix=matrix, standin=github_standin, pypi=pypiserver)


def build_dist(setup: Setup, name: str, payload: bytes) -> Path:
    """A dist of the matrix's cells as `release build` leaves it, each wheel's package
    ending in `payload` (a rebuild that is not byte for byte the earlier build)."""
    dist = setup.root / name
    entries = []
    for cell in load_matrix(setup.matrix).cells:
        wheel = make_wheel(dist, version=str(cell.version), platform=cell.platform_tag,
                           payload=payload)  # fmt: skip
        entries.append(entry_for(wheel, DestinationRef.of(cell), cuda=str(cell.cuda)))
    manifest = Manifest(project=PROJECT, version=VERSION, wheels=tuple(entries))
    write_manifest(manifest, dist / "manifest.json")
    return dist


def run(setup: Setup, *args: str) -> tuple[int, dict[str, Any]]:
    report = setup.root / "report.json"
    report.unlink(missing_ok=True)
    code = main([*args, "--json-file", str(report)])
    return code, json.loads(report.read_text(encoding="utf-8"))


def payload_of(wheel: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        return archive.read("k3_kernels/__init__.py")


def assets(setup: Setup) -> dict[str, bytes]:
    (release,) = setup.standin.releases(DEFAULT_REPO)
    return {a.name: a.data for a in setup.standin.assets(release.id)}


def writes(setup: Setup) -> list[str]:
    return [
        f"{e.method} {e.path}" for e in setup.standin.request_log if e.method not in ("GET", "HEAD")
    ]


def listing(dist: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(dist.iterdir())
        if p.is_file()
    }


def test_a_rebuild_goes_as_the_next_build_of_its_name_beside_the_old_bytes(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    site = setup.root / "site"
    first = build_dist(setup, "first", b"#first\n")
    assert main(["publish", "--dist", str(first), "--index-dir", str(site)]) == 0
    old = {X86: setup.pypi.files()[X86], CU129: assets(setup)[CU129]}

    rebuilt = build_dist(setup, "rebuilt", b"#rebuilt\n")
    again = setup.root / "again"  # the same rebuild, as a re-run of the publish job gets it
    shutil.copytree(rebuilt, again)

    # Without the option: CONFLICT, and the hint names it.
    capsys.readouterr()
    code, plan = run(setup, "plan", "--matrix", str(setup.matrix), "--dist", str(rebuilt))
    assert code == ConflictError.exit_code
    assert {c["state"] for c in plan["cells"]} == {"CONFLICT"}
    assert "`release publish --build-tag` publishes a rebuilt wheel" in capsys.readouterr().err
    assert main(["publish", "--dist", str(rebuilt)]) == ConflictError.exit_code
    assert "pass --build-tag to publish each rebuilt wheel" in capsys.readouterr().err

    # The plan and the dry run show where each rebuild goes; nothing changes anywhere.
    setup.standin.clear_log()
    before = listing(rebuilt)
    code, plan = run(setup, "plan", "--matrix", str(setup.matrix), "--dist", str(rebuilt),
                     "--build-tag")  # fmt: skip
    assert code == 0, capsys.readouterr().err
    cells = {c["wheel"]: c for c in plan["cells"]}
    for name in (X86, CU129):
        assert cells[name]["state"] == "new"
        assert cells[name]["published_as"] == build(name, 1)
        assert cells[name]["reason"] == (
            f"upload as {build(name, 1)} (rebuilt: the destination holds other bytes under {name})"
        )
    assert f"new: upload as {build(X86, 1)} (rebuilt:" in capsys.readouterr().out
    code, dry = run(setup, "publish", "--dist", str(rebuilt), "--dry-run", "--build-tag")
    assert code == 0
    wheels = {d["filename"]: d for d in dry["plan"]}
    assert set(wheels) == {build(X86, 1), build(CU129, 1)}
    assert {d["rebuilt_from"] for d in wheels.values()} == {X86, CU129}
    assert {d["action"] for d in wheels.values()} == {"upload"}
    companions = {c["filename"]: c["action"] for c in dry["companions"]}
    assert companions[build(CU129, 1) + ".metadata"] == "upload"
    assert companions[RELEASE_MANIFEST] == "replace"  # it lists the build-tagged wheels
    assert CU129 + ".metadata" not in companions
    assert writes(setup) == []
    assert setup.pypi.files()[X86] == old[X86]
    assert listing(rebuilt) == before

    # Published: beside the old bytes, which still serve under their URLs.
    code, done = run(setup, "publish", "--dist", str(rebuilt), "--build-tag",
                     "--index-dir", str(site))  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert {d["filename"] for d in done["applied"]} == {build(X86, 1), build(CU129, 1)}
    pypi = setup.pypi.files()
    assert pypi[X86] == old[X86]
    assert payload_of(pypi[build(X86, 1)]).endswith(b"#rebuilt\n")
    held = assets(setup)
    assert held[CU129] == old[CU129]
    assert payload_of(held[build(CU129, 1)]).endswith(b"#rebuilt\n")
    url = f"{setup.standin.web_url}/{DEFAULT_REPO}/releases/download/v0.1.0/{CU129}"
    assert LOCAL.get(url, follow_redirects=True).content == old[CU129]
    listed = {w.filename for w in parse_release_manifest(held[RELEASE_MANIFEST])}
    assert listed == {build(X86, 1), build(CU129, 1)}

    # dist/ and its records say what was published: the build-tagged wheels in place of the
    # ones they were rewritten from.
    wheels_now = sorted(p.name for p in rebuilt.glob("*.whl"))
    assert wheels_now == sorted([build(X86, 1), build(CU129, 1)])
    manifest = read_manifest(rebuilt / "manifest.json")
    assert {w.filename: w.sha256 for w in manifest.wheels} == {
        name: hashlib.sha256((rebuilt / name).read_bytes()).hexdigest() for name in wheels_now
    }
    record = json.loads((rebuilt / "published.json").read_text(encoding="utf-8"))
    assert {f["filename"] for f in record["files"]} == set(wheels_now)
    capsys.readouterr()
    code, plan = run(setup, "plan", "--matrix", str(setup.matrix), "--dist", str(rebuilt))
    assert code == 0  # each cell's wheel is its build-tagged one now, published
    assert {(c["wheel"], c["state"], c["published_as"]) for c in plan["cells"]} == {
        (X86, "identical (skip)", build(X86, 1)), (CU129, "identical (skip)", build(CU129, 1)),
    }  # fmt: skip
    assert f"identical (skip): as {build(X86, 1)}" in capsys.readouterr().out

    # The variant's index lists every build; verify's pip picks the build-tagged wheel from
    # it and from PyPI, and the old build's link is the release's, not a stray.
    page = json.loads((site / "cu129" / "k3-kernels" / "index.json").read_text())
    assert {f["filename"] for f in page["files"]} == {CU129, build(CU129, 1)}
    with serve(site) as base:
        code, verified = run(setup, "verify", "--matrix", str(setup.matrix), "--dist",
                             str(rebuilt), "--index-url", f"cu129={base}cu129/")  # fmt: skip
        assert code == 0, [c for c in verified["checks"] if not c["ok"]]
        picked = {c["subject"]: c["detail"] for c in verified["checks"] if c["check"] == "pip"}
        assert picked == {name: f"picks {name}" for name in wheels_now}
        assert "index-page" in {c["check"] for c in verified["checks"]}
        target = setup.root / "uv-target"
        uv = subprocess.run(
            [str(BIN / "uv"), "pip", "install", "--no-cache", "--no-deps", "--target",
             str(target), "--index-url", f"{base}cu129/", f"{PROJECT}==0.1.0+cu129"],
            capture_output=True, text=True, check=False,
            env={"PATH": str(BIN), "HOME": str(setup.root)},
        )  # fmt: skip
        assert uv.returncode == 0, uv.stderr
        assert (target / "k3_kernels" / "__init__.py").read_bytes().endswith(b"#rebuilt\n")

    # A re-run from the same rebuild (a fresh copy of its dist) finds each build-tagged
    # wheel identical: the rewrite gives the same bytes every time.
    setup.standin.clear_log()
    code, rerun = run(setup, "publish", "--dist", str(again), "--build-tag",
                      "--index-dir", str(setup.root / "site-again"))  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert {(d["filename"], d["action"]) for d in rerun["applied"]} == {
        (build(X86, 1), "identical"), (build(CU129, 1), "identical"),
    }  # fmt: skip
    assert writes(setup) == []
    assert {n: s for n, s in listing(again).items() if n.endswith(".whl")} == {
        n: s for n, s in listing(rebuilt).items() if n.endswith(".whl")
    }

    # The next rebuild goes as build 2.
    third = build_dist(setup, "third", b"#third\n")
    code, done = run(setup, "publish", "--dist", str(third), "--build-tag",
                     "--index-dir", str(site))  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert {d["filename"] for d in done["applied"]} == {build(X86, 2), build(CU129, 2)}
    assert {X86, build(X86, 1), build(X86, 2)} <= set(setup.pypi.files())
    page = json.loads((site / "cu129" / "k3-kernels" / "index.json").read_text())
    assert {f["filename"] for f in page["files"]} == {CU129, build(CU129, 1), build(CU129, 2)}


def test_build_tag_and_replace_are_one_choice_and_a_nightly_takes_no_build_tag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["publish", "--build-tag", "--replace"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert main(["publish", "--channel", "nightly", "--build-tag"]) == 2
    assert "--build-tag: a nightly's version is new with every commit" in capsys.readouterr().err


@pytest.mark.parametrize("held", ["07", "5a", "1000"])
def test_a_rebuild_goes_above_every_build_the_release_holds_whatever_its_spelling(
    github_standin: GitHubStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    held: str,
) -> None:
    """pip installs the highest build of a version by value: `-07-` is build 7, `-5a-` is
    above 5, and `K3_Kernels-0.1-...` is the same wheel. A rebuild goes above them, or, past
    the last build number, is refused before anything is uploaded."""
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    destination = github_destination(github_standin.api_url)
    first = make_release(tmp_path / "first", pypi=None, github=destination)
    assert main(["publish", "--dist", str(first.dist), "--index-dir", str(tmp_path / "s")]) == 0
    (release,) = github_standin.releases(DEFAULT_REPO)
    other = (
        build(CU129, 0).replace("-0-", f"-{held}-").replace("k3_kernels-0.1.0", "K3_Kernels-0.1")
    )
    github_standin.add_asset(release.id, other, (first.dist / CU129).read_bytes())
    rebuilt = make_release(tmp_path / "rebuilt", pypi=None, github=destination, payload=b"#2\n")
    before = set(assets_of(github_standin))

    code = main(["publish", "--dist", str(rebuilt.dist), "--build-tag", "--index-dir",
                 str(tmp_path / "s")])  # fmt: skip
    err = capsys.readouterr().err
    sent = set(assets_of(github_standin)) - before
    if held == "1000":
        assert code == 5
        assert "error: a rebuild must go above build 1000 of its wheel" in err
        assert "hint: release a new version" in err
        assert sent == set()
    else:
        assert code == 0, err
        assert build(CU129, {"07": 8, "5a": 6}[held]) in sent


def assets_of(standin: GitHubStandIn) -> dict[str, bytes]:
    (release,) = standin.releases(DEFAULT_REPO)
    return {a.name: a.data for a in standin.assets(release.id)}
