"""`release plan` end to end against a real pypiserver and the stand-in GitHub.

The matrix sends the cu13 wheels to the pypiserver and the `+cu129` wheels to a GitHub
release of the stand-in. The plan must tell the truth in each state: nothing built,
built and not published (all new), published (all identical), one GitHub asset replaced
with other bytes (CONFLICT, exit code 6), and built wheels gone again (present, not
comparable). `release publish` in between is the real command.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from release.cli import main
from release.errors import ConflictError, PublishError
from release.matrix import load_matrix
from release.records.manifest import (
    DestinationRef,
    Manifest,
    read_manifest,
    sdist_cell_of,
    write_manifest,
)
from release.records.release_manifest import RELEASE_MANIFEST, release_manifest_bytes
from tests.github_standin import DEFAULT_REPO, GitHubStandIn
from tests.integration.jobenv import publish_job_env
from tests.integration.wheels import (
    PROJECT,
    VERSION,
    entry_for,
    make_sdist,
    make_wheel,
    write_release,
)
from tests.local_http import LOCAL
from tests.pypi_server import PypiServer

X86_CU129 = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"


@dataclass(frozen=True)
class Setup:
    matrix: Path
    dist: Path
    cache: Path
    standin: GitHubStandIn
    pypi: PypiServer


def write_matrix(root: Path, pypi: PypiServer, standin: GitHubStandIn) -> Path:
    return write_release(
        root,
        f"""project: project
defaults:
  arches: [x86_64, aarch64]
  sms: [75, 90]
  ptx: 90
  manylinux: "2_28"
  nccl: "2.30.7"
cuda:
  "13.0": {{destination: pypi}}
  "12.9": {{local-label: cu129, destination: github}}
destinations:
  pypi: {{kind: pypi, repository-url: "{pypi.url}", index-url: "{pypi.index_url}"}}
  github: {{kind: github, repository: {DEFAULT_REPO}, api-url: "{standin.api_url}"}}
""",
    )


def build_dist(matrix: Path, dist: Path) -> None:
    """One small real wheel per cell, named as the matrix names it, and its manifest."""
    entries = []
    for cell in load_matrix(matrix).cells:
        wheel = make_wheel(
            dist, version=str(cell.version), platform=cell.platform_tag, payload=b"#built\n"
        )
        assert wheel.name == cell.wheel_filename
        entries.append(entry_for(wheel, DestinationRef.of(cell), cuda=str(cell.cuda)))
    write_manifest(
        Manifest(project=PROJECT, version=VERSION, wheels=tuple(entries)), dist / "manifest.json"
    )


@pytest.fixture
def setup(
    tmp_path: Path,
    pypiserver: PypiServer,
    github_standin: GitHubStandIn,
    monkeypatch: pytest.MonkeyPatch,
) -> Setup:
    publish_job_env(monkeypatch, pypiserver, github_standin.token)
    return Setup(
        matrix=write_matrix(tmp_path, pypiserver, github_standin),
        dist=tmp_path / "dist",
        cache=tmp_path / "cache",
        standin=github_standin,
        pypi=pypiserver,
    )


def plan(setup: Setup, tmp_path: Path, name: str) -> tuple[int, dict[str, dict[str, object]]]:
    report = tmp_path / f"{name}.json"
    markdown = tmp_path / f"{name}.md"
    code = main(
        [
            "plan",
            "--matrix", str(setup.matrix),
            "--dist", str(setup.dist),
            "--cache-dir", str(setup.cache),
            "--json-file", str(report),
            "--markdown", str(markdown),
        ]
    )  # fmt: skip
    data = json.loads(report.read_text(encoding="utf-8"))
    assert markdown.read_text(encoding="utf-8").startswith(f"## Release plan: {PROJECT} {VERSION}")
    return code, {c["wheel"]: c for c in data["cells"]}


def states(cells: dict[str, dict[str, object]]) -> dict[str, object]:
    return {name: c["state"] for name, c in cells.items()}


def writes(standin: GitHubStandIn) -> list[str]:
    return [f"{e.method} {e.path}" for e in standin.request_log if e.method not in ("GET", "HEAD")]


def test_plan_tells_the_truth_before_and_after_publishing(
    setup: Setup, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells = load_matrix(setup.matrix).cells
    names = sorted(c.wheel_filename for c in cells)

    # Nothing built, nothing published.
    code, found = plan(setup, tmp_path, "empty")
    assert code == 0
    assert sorted(found) == names
    assert set(states(found).values()) == {"absent"}
    assert all(c["size"] is None and c["toolchain_ok"] for c in found.values())
    pypi_url = found["k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"]["url"]
    assert (
        pypi_url == f"{setup.pypi.url}packages/k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    )
    assert found[X86_CU129]["url"] == (
        f"{setup.standin.api_url}/{DEFAULT_REPO}/releases/download/v0.1.0/{X86_CU129}"
    )

    # Built, not published: every file is new; the plan shows sizes and the NCCL files.
    build_dist(setup.matrix, setup.dist)
    capsys.readouterr()
    code, found = plan(setup, tmp_path, "built")
    assert code == 0
    assert set(states(found).values()) == {"new"}
    assert all(isinstance(c["size"], int) and c["size"] > 0 for c in found.values())
    out = capsys.readouterr().out
    assert "cu12.txt: nvidia-nccl-cu12==2.30.7" in out
    assert "cu13-constraints.txt: nvidia-nccl-cu13==2.30.7" in out
    assert "4 cells, 4 built: 4 new" in out

    # The plan changed nothing: no write request, nothing on the index.
    assert writes(setup.standin) == []
    assert setup.pypi.files() == {}

    assert main(["publish", "--dist", str(setup.dist)]) == 0
    assert len(setup.pypi.files()) == 2

    code, found = plan(setup, tmp_path, "published")
    assert code == 0
    assert set(states(found).values()) == {"identical (skip)"}

    # Someone replaces one GitHub asset with other bytes.
    (release,) = setup.standin.releases(DEFAULT_REPO)
    (asset,) = [a for a in setup.standin.assets(release.id) if a.name == X86_CU129]
    deleted = LOCAL.delete(
        f"{setup.standin.api_url}/repos/{DEFAULT_REPO}/releases/assets/{asset.id}",
        headers={"Authorization": f"Bearer {setup.standin.token}"},
    )
    assert deleted.status_code == 204
    setup.standin.add_asset(release.id, X86_CU129, b"other bytes" * 100)
    setup.standin.clear_log()

    code, found = plan(setup, tmp_path, "conflict")
    assert code == ConflictError.exit_code
    assert found[X86_CU129]["state"] == "CONFLICT"
    assert "exists with sha256" in str(found[X86_CU129]["reason"])
    others = {n: s for n, s in states(found).items() if n != X86_CU129}
    assert set(others.values()) == {"identical (skip)"}
    err = capsys.readouterr().err
    assert f"error: 1 CONFLICT ({X86_CU129})" in err
    assert setup.standin.token not in err
    assert writes(setup.standin) == []

    # The wheels are gone from dist: the destinations still hold them; nothing to compare.
    shutil.rmtree(setup.dist)
    code, found = plan(setup, tmp_path, "unbuilt")
    assert code == 0
    assert set(states(found).values()) == {"present (cannot compare: not built)"}


def test_plan_fails_on_a_tag_that_does_not_release_the_version(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["plan", "--matrix", str(setup.matrix), "--dist", str(setup.dist)]
    assert main([*args, "--expect-tag", "v0.1.0"]) == 0
    assert main([*args, "--expect-tag", "v0.2.0"]) == 2
    assert "the GitHub release of version 0.1.0 is tagged v0.1.0" in capsys.readouterr().err


def test_a_dry_run_without_credentials_shows_everything_known_and_names_what_it_could_not_ask(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No token: the public GitHub release is read anonymously; the private index refuses
    without credentials and is 'not asked', with a distinct exit code, not a stop."""
    monkeypatch.delenv("GITHUB_TOKEN")
    for name in setup.pypi.env():
        monkeypatch.delenv(name)
    code = main(["plan", "--matrix", str(setup.matrix), "--dist", str(setup.dist),
                 "--cache-dir", str(setup.cache), "--json"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 9, captured.err
    document = json.loads(captured.out)
    states = {c["cell"]: c["state"] for c in document["cells"]}
    assert states["12.9-x86_64"] == "absent"  # asked anonymously
    assert states["13.0-x86_64"] == "not asked"
    reason = next(c["reason"] for c in document["cells"] if c["cell"] == "13.0-x86_64")
    assert "401" in reason or "credentials" in reason
    assert "k3-kernels 0.1.0: release plan" in captured.err  # the table, on stderr under --json
    # the sdist goes where the 13.0 wheels go: not asked either
    assert document["sdist"]["state"] == "not asked"
    assert document["sdist"]["sdist"] == "k3_kernels-0.1.0.tar.gz"
    assert "error: 2 wheel(s) and the sdist not asked" in captured.err
    assert "release publish" not in captured.err.split("hint:")[-1]


def test_an_unresolvable_host_is_not_asked_and_not_retried(
    setup: Setup, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = setup.matrix.read_text().replace(setup.standin.api_url, "https://api.nowhere.invalid")
    setup.matrix.write_text(matrix)
    code = main(["plan", "--matrix", str(setup.matrix), "--dist", str(setup.dist),
                 "--cache-dir", str(setup.cache), "--json"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 9, captured.err
    cells = json.loads(captured.out)["cells"]
    github = [c for c in cells if c["cell"].startswith("12.9")]
    assert {c["state"] for c in github} == {"not asked"}
    assert all("retry" not in c["reason"] and "attempt" not in c["reason"] for c in github)


# --- Sizes: growth since the previous release, the project size limit. ---


def publish_previous(standin: GitHubStandIn, tmp_path: Path, tag: str, sizes: int | None) -> None:
    """A published GitHub release `tag`, holding a release-manifest.json of its version's
    wheels (one per cell of the matrix, each `sizes` bytes) unless `sizes` is None."""
    created = LOCAL.post(
        f"{standin.api_url}/repos/{DEFAULT_REPO}/releases",
        headers={"Authorization": f"Bearer {standin.token}"},
        json={"tag_name": tag, "name": tag, "draft": False},
    )
    assert created.status_code == 201
    if sizes is None:
        return
    version = tag.removeprefix("v")
    entries = []
    for label, destination in ((None, "pypi"), ("cu129", "github")):
        for arch in ("x86_64", "aarch64"):
            wheel = make_wheel(
                tmp_path / tag,
                version=f"{version}+{label}" if label else version,
                platform=f"manylinux_2_28_{arch}",
            )
            ref = DestinationRef(name=destination, kind="pypi", index_url=None, max_file_size=1)
            entries.append(replace(entry_for(wheel, ref), size=sizes))
    manifest = Manifest(project=PROJECT, version=version, wheels=tuple(entries))
    standin.add_asset(created.json()["id"], RELEASE_MANIFEST, release_manifest_bytes(manifest))


def test_plan_shows_growth_since_the_previous_release_and_fails_past_the_growth_limit(
    setup: Setup, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_dist(setup.matrix, setup.dist)
    report = tmp_path / "plan.json"
    args = ["plan", "--matrix", str(setup.matrix), "--dist", str(setup.dist),
            "--cache-dir", str(setup.cache), "--json-file", str(report)]  # fmt: skip

    # No release before this one: said, and nothing fails.
    assert main(args) == 0
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["previous"] is None
    assert document["previous_note"].startswith("no previous release (no published release of")
    assert all(c["growth"] is None for c in document["cells"])

    # The previous release is the highest below 0.1.0 whose release has a manifest.
    size = (setup.dist / X86_CU129).stat().st_size
    publish_previous(setup.standin, tmp_path, "v0.0.8", size // 4)
    publish_previous(setup.standin, tmp_path, "v0.0.9", size // 2)
    publish_previous(setup.standin, tmp_path, "v0.0.10", None)  # no manifest: not a candidate
    publish_previous(setup.standin, tmp_path, "v0.2.0", size)  # above this version
    setup.standin.clear_log()
    capsys.readouterr()
    assert main(args) == 0
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["previous"]["version"] == "0.0.9"
    assert "GitHub release v0.0.9" in document["previous"]["source"]
    growth = {c["wheel"]: c["growth"] for c in document["cells"]}
    assert growth[X86_CU129]["previous_wheel"] == X86_CU129.replace("0.1.0", "0.0.9")
    assert growth[X86_CU129]["bytes"] == size - size // 2
    assert growth[X86_CU129]["percent"] == pytest.approx(100 * (size - size // 2) / (size // 2))
    assert all(g is not None for g in growth.values())
    assert "previous release: 0.0.9" in capsys.readouterr().out
    assert writes(setup.standin) == []

    # A growth limit on the GitHub destination: the plan is refused, naming the wheel.
    text = setup.matrix.read_text(encoding="utf-8")
    setup.matrix.write_text(
        text.replace(f'api-url: "{setup.standin.api_url}"}}',
                     f'api-url: "{setup.standin.api_url}", max-growth-percent: 50}}'),
        encoding="utf-8",
    )  # fmt: skip
    capsys.readouterr()
    assert main(args) == PublishError.exit_code
    err = capsys.readouterr().err
    assert f"error: {X86_CU129} grew +" in err
    assert "over github's max-growth-percent of 50%" in err
    assert "k3_kernels-0.1.0-py3" not in err.split("hint:")[0]  # pypi has no limit
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["ok"] is False
    assert len(document["over_growth_limit"]) == 2

    # --previous-manifest gives the previous release without asking GitHub.
    given = tmp_path / "given.json"
    previous = Manifest(project=PROJECT, version="0.0.7", wheels=())
    given.write_bytes(release_manifest_bytes(previous))
    assert main([*args, "--previous-manifest", str(given)]) == 0
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["previous"] == {"version": "0.0.7", "source": str(given)}
    assert {c["growth"] for c in document["cells"]} == {None}


def test_plan_and_publish_refuse_a_release_past_the_project_size_limit(
    setup: Setup, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_dist(setup.matrix, setup.dist)
    manifest = read_manifest(setup.dist / "manifest.json")
    pypi_wheels = [w for w in manifest.wheels if w.destination.kind == "pypi"]
    limit = sum(w.size for w in pypi_wheels) - 1
    write_manifest(
        replace(
            manifest,
            wheels=tuple(
                replace(w, destination=replace(w.destination, max_project_size=limit))
                if w.destination.kind == "pypi"
                else w
                for w in manifest.wheels
            ),
        ),
        setup.dist / "manifest.json",
    )
    capsys.readouterr()
    code, _ = plan(setup, tmp_path, "over")
    assert code == PublishError.exit_code
    err = capsys.readouterr().err
    assert f"({limit} bytes) project limit" in err
    assert "pypi: the project would hold" in err
    assert "set `max-project-size-gib`" in err

    code = main(["publish", "--dist", str(setup.dist)])
    assert code == PublishError.exit_code
    err = capsys.readouterr().err
    assert "project limit" in err
    assert "nothing was uploaded" in err
    assert setup.pypi.files() == {}
    assert writes(setup.standin) == []


def test_the_plan_shows_the_sdist_beside_the_default_variants_wheels(
    setup: Setup, tmp_path: Path
) -> None:
    """Its row: the 13.0 cells' PyPI; absent before the build, new once dist/ holds it,
    identical once published, present where dist/ is gone; other bytes are a CONFLICT."""
    sdist = "k3_kernels-0.1.0.tar.gz"

    def row(name: str) -> tuple[int, dict[str, object]]:
        plan(setup, tmp_path, name)
        document = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
        return document["ok"], document["sdist"]

    ok, found = row("empty")
    assert (found["sdist"], found["state"], found["built"]) == (sdist, "absent", False)
    assert found["destination"] == "pypi (pypi)"
    assert found["url"] == f"{setup.pypi.url}packages/{sdist}"
    build_dist(setup.matrix, setup.dist)
    cell = sdist_cell_of(load_matrix(setup.matrix).cells)
    assert cell is not None
    pypi = DestinationRef.of(cell)
    manifest = read_manifest(setup.dist / "manifest.json")
    entry = make_sdist(setup.dist, pypi)
    write_manifest(replace(manifest, sdist=entry), setup.dist / "manifest.json")
    ok, found = row("built")
    assert (found["state"], found["size"], ok) == ("new", entry.size, True)
    assert main(["publish", "--dist", str(setup.dist)]) == 0
    assert (setup.dist / sdist).read_bytes() == setup.pypi.files()[sdist]
    assert row("published")[1]["state"] == "identical (skip)"
    other = make_sdist(setup.dist, pypi, payload="# other\n")  # same name, other bytes
    write_manifest(replace(manifest, sdist=other), setup.dist / "manifest.json")
    ok, found = row("conflict")
    assert (found["state"], ok) == ("CONFLICT", False)
    shutil.rmtree(setup.dist)
    assert row("unbuilt")[1]["state"] == "present (cannot compare: not built)"
