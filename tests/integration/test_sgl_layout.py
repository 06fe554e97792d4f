"""sgl-project's release layout end to end (issue 52), against the stand-ins: CUDA 13.0 built
once, plain on PyPI (pypiserver) and relabelled `+cu130` on the GitHub release of another
repository (`sgl-project/whl` on the stand-in GitHub, written with that repository's token,
named by `token-secret`), 12.9 `+cu129` there only; the index of both committed to a bare git
repository on disk that already holds another package's pages, served over HTTP from a
checkout of it. `release plan`, `publish` and `verify` are the real commands; the dist is
made of small real wheels (tests/integration/wheels.py) through the build's own relabelling
and manifest entries (what `release build` writes after its compiles). pip installs each
variant from where a user would. Faults of the push: refused once, then raced by another
package's commit (fetched again and re-applied); refused for good (the branch as it was, the
release in a state a re-run completes, one line)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from release.building.pipeline import relabelled_copies
from release.building.stage import manifest_entry
from release.cli import main
from release.errors import PublishError
from release.fsutil import sha256_file
from release.inspection.wheel import WheelReport
from release.matrix import load_matrix
from release.records.manifest import Manifest, index_refs, write_manifest
from tests.github_standin import DEFAULT_REPO, GitHubStandIn
from tests.integration.gitremote import BRANCH, OTHERS, git, seeded, tree_of
from tests.integration.indexes import static_server
from tests.integration.jobenv import publish_job_env
from tests.integration.wheels import PROJECT, VERSION, make_wheel, write_release
from tests.pypi_server import PypiServer

WHL = "sgl-project/whl"
SECRET = "GH_PAT_FOR_WHL_RELEASE"  # the name sgl-project's workflow gives the whl token
PLAIN = "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
CU130 = "k3_kernels-0.1.0+cu130-py3-none-manylinux_2_28_x86_64.whl"
CU129 = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"


def matrix_text(pypi: PypiServer, gh: GitHubStandIn, bare: Path, served: str) -> str:
    """sgl-project's matrix (tests/data/matrix/good/sgl-layout.yaml), pointed at the
    stand-ins; x86_64 only."""
    return f"""project: project
defaults: {{arches: [x86_64], manylinux: "2_28", sms: [90, 100]}}
cuda:
  "13.0":
    destination:
      - pypi
      - {{name: whl, local-label: cu130}}
  "12.9":
    destination: whl
    local-label: cu129
destinations:
  pypi: {{kind: pypi, repository-url: "{pypi.url}", index-url: "{pypi.index_url}"}}
  whl:
    kind: github
    repository: {WHL}
    api-url: "{gh.api_url}"
    tag: "v{{version}}"
    token-secret: {SECRET}
    index: whl-index
  whl-index:
    kind: git-index
    url: {bare}
    branch: {BRANCH}
    directory: "."
    index-url: "{served}"
    token-secret: {SECRET}
"""


def build_dist(matrix: Path, dist: Path) -> Manifest:
    """What `release build` leaves in dist/ after its compiles: each cell's wheel (a small
    real one), relabelled for its other copies by the build's own code, an entry per copy
    and the index that lists the whl destination."""
    loaded = load_matrix(matrix)
    entries = []
    for cell in loaded.cells:
        wheel = make_wheel(dist, version=str(cell.version), platform=cell.platform_tag)
        assert wheel.name == cell.wheel_filename
        report = WheelReport(
            filename=wheel.name, size=wheel.stat().st_size, sha256=sha256_file(wheel),
            sms=("90", "100"), ptx=(),
        )  # fmt: skip
        entries.append(manifest_entry(cell, report, {}))
        entries += [
            manifest_entry(c.cell, c.report, {}) for c in relabelled_copies(cell, wheel, report)
        ]
    manifest = Manifest(
        project=PROJECT,
        version=VERSION,
        wheels=tuple(entries),
        indexes=index_refs(loaded.indexes, entries, VERSION),
    )
    write_manifest(manifest, dist / "manifest.json")
    return manifest


@dataclass(frozen=True, kw_only=True)
class Layout:
    matrix: Path
    dist: Path
    bare: Path
    site: Path  # the checkout the index is served from
    served: str  # its URL
    pypi: PypiServer
    gh: GitHubStandIn
    tmp: Path

    def checkout(self) -> None:
        """The served checkout brought to the branch's tip, as Pages would deploy it."""
        if (self.site / ".git").exists():
            git("fetch", "--quiet", "origin", cwd=self.site)
            git("reset", "--quiet", "--hard", f"origin/{BRANCH}", cwd=self.site)
        else:
            git("clone", "--quiet", "--branch", BRANCH, str(self.bare), str(self.site))

    def hook(self, script: str) -> None:
        hook = self.bare / "hooks" / "pre-receive"
        hook.write_text("#!/bin/sh\n" + script)
        hook.chmod(0o755)


@pytest.fixture
def layout(
    tmp_path: Path, pypiserver: PypiServer, github_standin: GitHubStandIn,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Layout]:  # fmt: skip
    """The stand-ins in sgl-project's layout, and the environment of its publish job: the
    job's own token may not write (push: false), the whl token may."""
    github_standin.add_repo(WHL)
    publish_job_env(monkeypatch, pypiserver, github_standin.add_token("sglang-ci", push=False))
    monkeypatch.setenv(SECRET, github_standin.token)
    bare = seeded(tmp_path / "whl.git", tmp_path / "seed")
    site = tmp_path / "site"
    site.mkdir()
    with static_server(site) as served:
        matrix = write_release(tmp_path, matrix_text(pypiserver, github_standin, bare, served))
        dist = tmp_path / "dist"
        build_dist(matrix, dist)
        yield Layout(
            matrix=matrix, dist=dist, bare=bare, site=site, served=served, pypi=pypiserver,
            gh=github_standin, tmp=tmp_path,
        )  # fmt: skip


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def publish(layout: Layout, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    return run_json(
        capsys, "publish", "--dist", str(layout.dist), "--matrix", str(layout.matrix),
        "--index-dir", str(layout.tmp / "pages"),
    )  # fmt: skip


def verify(layout: Layout, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    return run_json(
        capsys, "verify", "--dist", str(layout.dist), "--matrix", str(layout.matrix),
        "--no-provenance",
    )  # fmt: skip


def whl_assets(gh: GitHubStandIn) -> dict[str, bytes]:
    (release,) = gh.releases(WHL)
    assert (release.tag_name, release.draft) == ("v0.1.0", False)
    return {a.name: a.data for a in gh.assets(release.id)}


def test_sgl_projects_layout_is_planned_published_verified_and_installed(
    layout: Layout, capsys: pytest.CaptureFixture[str]
) -> None:
    dist = layout.dist
    wheels = json.loads((dist / "manifest.json").read_text())["wheels"]
    copies = {w["filename"]: w for w in wheels}
    assert sorted(copies) == sorted([PLAIN, CU129, CU130])
    assert copies[PLAIN]["cell"] == copies[CU130]["cell"] == "13.0-x86_64", "one build"
    assert copies[PLAIN]["sha256"] != copies[CU130]["sha256"]

    # the plan: a row per copy, each asked of its own destination
    code, plan, _ = run_json(
        capsys, "plan", "--matrix", str(layout.matrix), "--dist", str(dist),
        "--cache-dir", str(layout.tmp / "cache"),
    )  # fmt: skip
    assert code == 0
    rows = {(r["cell"], r["wheel"], r["destination"], r["state"]) for r in plan["cells"]}
    assert rows == {
        ("13.0-x86_64", PLAIN, "pypi (pypi)", "new"),
        ("13.0-x86_64", CU130, "whl (github)", "new"),
        ("12.9-x86_64", CU129, "whl (github)", "new"),
    }

    before = git("rev-parse", BRANCH, cwd=layout.bare)
    code, published, err = publish(layout, capsys)
    assert code == 0, err
    # PyPI holds the plain wheel alone; the whl repository's release the labelled copies,
    # written with its own token (the job's may not write); the caller's repository nothing
    assert set(layout.pypi.files()) == {PLAIN}
    assert layout.pypi.files()[PLAIN] == (dist / PLAIN).read_bytes()
    assets = whl_assets(layout.gh)
    assert {n for n in assets if n.endswith(".whl")} == {CU129, CU130}
    assert assets[CU130] == (dist / CU130).read_bytes()
    assert layout.gh.releases(DEFAULT_REPO) == ()
    assert not (layout.tmp / "pages").exists(), "no Pages index: the git index lists them"

    # one commit on the branch, on the other package's, whose pages survive byte for byte
    after = tree_of(layout.bare)
    assert git("rev-parse", f"{BRANCH}^", cwd=layout.bare) == before
    assert git("log", "-1", "--format=%s", BRANCH, cwd=layout.bare) == (
        "k3-kernels 0.1.0: index pages (cu129, cu130)"
    )
    assert {p: after[p] for p in OTHERS if p != "cu130/index.html"} == {
        p: d for p, d in OTHERS.items() if p != "cu130/index.html"
    }
    assert sorted(set(after) - set(OTHERS)) == [
        "cu129/index.html", "cu129/index.json",
        "cu129/k3-kernels/index.html", "cu129/k3-kernels/index.json",
        "cu130/index.json",  # the root, rewritten as this index writes roots
        "cu130/k3-kernels/index.html", "cu130/k3-kernels/index.json",
    ]  # fmt: skip
    for name in (b"acme-kernel", b"k3-kernels"):
        assert b'href="' + name + b'/"' in after["cu130/index.html"]
    page = json.loads(after["cu130/k3-kernels/index.json"])
    assert [(f["filename"], f["hashes"]["sha256"]) for f in page["files"]] == [
        (CU130, sha256_file(dist / CU130))
    ]
    tip = git("rev-parse", BRANCH, cwd=layout.bare)
    assert [(i["label"], i["url"], i.get("commit")) for i in published["indexes"]] == [
        ("cu129", f"{layout.served}cu129/", tip), ("cu130", f"{layout.served}cu130/", tip),
    ]  # fmt: skip

    # verify: every copy where it went, each index page as served, pip's pick per file
    layout.checkout()
    code, report, err = verify(layout, capsys)
    assert code == 0, [c for c in report["checks"] if not c["ok"]]
    checked = {(c["subject"], c["check"]) for c in report["checks"] if c["ok"]}
    for wheel in (PLAIN, CU129, CU130):
        assert (wheel, "download") in checked
        assert (wheel, "pip") in checked
    assert (f"{layout.served}cu130/k3-kernels/", "index-page") in checked
    # the URL watch: the release re-derived from the destinations alone, every copy found
    code, watched, _ = run_json(
        capsys, "verify", "--tag", "v0.1.0", "--matrix", str(layout.matrix), "--no-provenance"
    )
    assert code == 0, [c for c in watched["checks"] if not c["ok"]]
    seen = {(c["subject"], c["check"]) for c in watched["checks"] if c["ok"]}
    for wheel in (PLAIN, CU129, CU130):
        assert (wheel, "pip") in seen

    # a user's pip: +cu129 and +cu130 from the committed index, the plain one from PyPI
    user = layout.tmp / "user"
    for label, wheel in (("cu129", CU129), ("cu130", CU130)):
        installed = pip_install(user, f"{layout.served}{label}/", f"{PROJECT}==0.1.0+{label}")
        assert installed == wheel
    private = layout.pypi.index_url.replace(
        "http://", f"http://{layout.pypi.username}:{layout.pypi.password}@"
    )
    assert pip_install(user, private, f"{PROJECT}==0.1.0") == PLAIN

    # a re-run changes nothing anywhere
    code, again, err = publish(layout, capsys)
    assert code == 0, err
    assert {d["action"] for d in again["applied"]} == {"identical"}
    assert git("rev-parse", BRANCH, cwd=layout.bare) == tip


def pip_install(where: Path, index_url: str, requirement: str) -> str:
    """The wheel `pip install` picks from `index_url` for `requirement`, installed by pip
    as a user runs it (--isolated: no configuration of this machine's) into `where`."""
    target = where / requirement.replace("=", "_")
    report = target.parent / f"{target.name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--isolated", "install", "--no-deps", "--no-cache-dir",
         "--target", str(target), "--report", str(report), "--index-url", index_url,
         requirement],
        check=False, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (item,) = json.loads(report.read_text())["install"]
    return unquote(str(item["download_info"]["url"]).rsplit("/", 1)[-1])


# The push refused once by a hook, then raced: another package's commit lands after the fetch
# (the hook moves the branch, so the push's update finds it moved and is refused).
REFUSED_THEN_RACED = f"""
state="$(pwd)/attempts"
echo x >> "$state"
case "$(wc -l < "$state" | tr -d ' ')" in
1) echo "index busy: try again" >&2; exit 1 ;;
2)
  unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
  export GIT_INDEX_FILE="$(pwd)/race-index"
  blob=$(printf 'zeta\\n' | git hash-object -w --stdin)
  git read-tree {BRANCH}
  git update-index --add --cacheinfo "100644,$blob,cu130/zeta-ops/index.html"
  commit=$(GIT_AUTHOR_NAME=z GIT_AUTHOR_EMAIL=z@z GIT_COMMITTER_NAME=z \\
    GIT_COMMITTER_EMAIL=z@z git commit-tree "$(git write-tree)" -p {BRANCH} -m "zeta-ops 2.0")
  git update-ref refs/heads/{BRANCH} "$commit"
  rm -f "$GIT_INDEX_FILE"
  ;;
esac
exit 0
"""


def test_a_push_refused_once_then_raced_by_another_package_converges(
    layout: Layout, capsys: pytest.CaptureFixture[str]
) -> None:
    layout.hook(REFUSED_THEN_RACED)
    code, published, err = publish(layout, capsys)
    assert code == 0, err
    assert (layout.bare / "attempts").read_text().count("x") == 3
    after = tree_of(layout.bare)
    assert after["cu130/zeta-ops/index.html"] == b"zeta\n", "the racer's commit is kept"
    assert git("log", "-1", "--format=%s", f"{BRANCH}^", cwd=layout.bare) == "zeta-ops 2.0"
    assert {p: after[p] for p in OTHERS if p != "cu130/index.html"} == {
        p: d for p, d in OTHERS.items() if p != "cu130/index.html"
    }
    # the cu130 root, rewritten on the racer's tip, lists all three packages
    for name in (b"acme-kernel", b"zeta-ops", b"k3-kernels"):
        assert b'href="' + name + b'/"' in after["cu130/index.html"]
    assert CU130.encode() in after["cu130/k3-kernels/index.html"]
    assert {i["commit"] for i in published["indexes"]} == {
        git("rev-parse", BRANCH, cwd=layout.bare)
    }
    layout.checkout()
    code, report, _ = verify(layout, capsys)
    assert code == 0, [c for c in report["checks"] if not c["ok"]]


def test_a_push_refused_for_good_changes_nothing_there_and_a_rerun_completes(
    layout: Layout, capsys: pytest.CaptureFixture[str]
) -> None:
    layout.hook('echo "protected branch: pushes need a review" >&2\nexit 1\n')
    tip, before = git("rev-parse", BRANCH, cwd=layout.bare), tree_of(layout.bare)
    capsys.readouterr()
    code = main(["publish", "--dist", str(layout.dist), "--matrix", str(layout.matrix)])
    err = capsys.readouterr().err
    assert code == PublishError.exit_code
    (line,) = [e for e in err.splitlines() if e.startswith("error:")]
    assert line == (
        f"error: git index {layout.bare} ({BRANCH}): the push was refused 4 times and the "
        "branch is as it was: [remote rejected] (pre-receive hook declined): protected "
        "branch: pushes need a review"
    )
    assert layout.gh.token not in err
    assert (git("rev-parse", BRANCH, cwd=layout.bare), tree_of(layout.bare)) == (tip, before)
    assert git("for-each-ref", "--format=%(refname)", cwd=layout.bare) == f"refs/heads/{BRANCH}"
    # the wheels went out first (the index comes last): what a re-run finds done, it skips
    assert {n for n in whl_assets(layout.gh) if n.endswith(".whl")} == {CU129, CU130}
    assert set(layout.pypi.files()) == {PLAIN}

    (layout.bare / "hooks" / "pre-receive").unlink()
    code, published, err = publish(layout, capsys)
    assert code == 0, err
    assert {d["action"] for d in published["applied"]} == {"identical"}
    assert git("rev-parse", f"{BRANCH}^", cwd=layout.bare) == tip
    assert "cu129/k3-kernels/index.html" in tree_of(layout.bare)
    layout.checkout()
    code, report, _ = verify(layout, capsys)
    assert code == 0, [c for c in report["checks"] if not c["ok"]]


def test_without_the_other_repositorys_token_nothing_is_published(
    layout: Layout, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's own token (which may not write there) never stands in for the whl
    repository's: publish stops before any upload, naming the variable."""
    monkeypatch.delenv(SECRET)
    tip = git("rev-parse", BRANCH, cwd=layout.bare)
    capsys.readouterr()
    code = main(["publish", "--dist", str(layout.dist), "--matrix", str(layout.matrix)])
    err = capsys.readouterr().err
    assert code == PublishError.exit_code
    assert f"error: whl: no {SECRET} in the environment (its token-secret)" in err
    assert layout.pypi.files() == {}
    assert layout.gh.releases(WHL) == ()
    assert git("rev-parse", BRANCH, cwd=layout.bare) == tip


def test_in_a_workflow_job_a_git_index_at_a_path_is_pushed_though_no_github_is_there(
    layout: Layout, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a job, a token goes only to the runner's own GitHub. A git index at a path of
    this machine gets no token (git sends one over HTTP alone), so it is no other GitHub:
    publish pushes it. Before, it was refused as 'not this job's GitHub'."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_API_URL", layout.gh.api_url)
    monkeypatch.setenv("GITHUB_SERVER_URL", layout.gh.web_url)
    tip = git("rev-parse", BRANCH, cwd=layout.bare)
    code, _, err = publish(layout, capsys)
    assert code == 0, err
    assert git("rev-parse", BRANCH, cwd=layout.bare) != tip
    assert set(whl_assets(layout.gh)) >= {CU129, CU130}


def test_an_entry_in_the_way_on_the_index_branch_stops_publish_before_any_upload(
    layout: Layout, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the push would find in the way is found first: a release public on PyPI and
    GitHub without its index, which no re-run could complete, is never left behind."""
    seed = layout.tmp / "alias"
    git("clone", "--quiet", "--branch", BRANCH, str(layout.bare), str(seed))
    (seed / "cu129").symlink_to("cu130")  # another package's alias where our label goes
    git("add", "cu129", cwd=seed)
    git("commit", "--quiet", "-m", "alias cu129 to cu130", cwd=seed)
    git("push", "--quiet", "origin", BRANCH, cwd=seed)
    tip, before = git("rev-parse", BRANCH, cwd=layout.bare), tree_of(layout.bare)
    code, plan, _ = run_json(capsys, "plan", "--matrix", str(layout.matrix), "--dist",
                             str(layout.dist))  # fmt: skip
    assert code == PublishError.exit_code
    states = {c["wheel"]: (c["state"], c["reason"]) for c in plan["cells"]}
    assert states[PLAIN][0] == "new"
    for wheel in (CU129, CU130):
        state, reason = states[wheel]
        assert state == "refused"
        assert reason.startswith("its index whl-index: ")
        assert reason.endswith(
            "cu129 is a symlink on the branch, where the index's folder cu129/ goes: writing "
            "cu129/index.html would replace it"
        )
    capsys.readouterr()
    code = main(["publish", "--dist", str(layout.dist), "--matrix", str(layout.matrix)])
    err = capsys.readouterr().err
    assert code == PublishError.exit_code
    (line,) = [e for e in err.splitlines() if e.startswith("error:")]
    assert line.endswith("cu129 is a symlink on the branch, where the index's folder cu129/ "
                         "goes: writing cu129/index.html would replace it")  # fmt: skip
    assert f"nothing of {PROJECT} {VERSION} was uploaded anywhere" in err
    assert layout.pypi.files() == {}
    assert layout.gh.releases(WHL) == ()
    assert (git("rev-parse", BRANCH, cwd=layout.bare), tree_of(layout.bare)) == (tip, before)


def test_a_copy_the_matrix_names_and_the_release_lacks_fails_verify_without_provenance(
    layout: Layout, capsys: pytest.CaptureFixture[str]
) -> None:
    """The matrix holds the release to each variant whether or not provenance is checked:
    a dist that lost its `+cu130` copy publishes what it has, and verify names the copy."""
    manifest = layout.dist / "manifest.json"
    data = json.loads(manifest.read_text())
    data["wheels"] = [w for w in data["wheels"] if w["filename"] != CU130]
    manifest.write_text(json.dumps(data))
    (layout.dist / CU130).unlink()
    code, _, err = publish(layout, capsys)
    assert code == 0, err
    layout.checkout()
    code, report, _ = verify(layout, capsys)
    assert code == 7
    failed = [(c["check"], c["subject"]) for c in report["checks"] if not c["ok"]]
    assert [check for check, _ in failed] == ["missing-variant"], failed
    assert "cu130" in failed[0][1]


ACME_WHEEL = "acme_kernels-0.1.0+cu130-py3-none-manylinux_2_28_x86_64.whl"
ACME_MANIFEST = b'{"project": "acme-kernels"}'


@pytest.mark.parametrize(
    ("its_files", "named"),
    [
        ({ACME_WHEEL: b"wheel", "release-manifest.json": ACME_MANIFEST}, ACME_WHEEL),
        ({"release-manifest.json": ACME_MANIFEST}, "release-manifest.json"),
        ({"acme_kernels-0.1.0.tar.gz": b"sdist"}, "acme_kernels-0.1.0.tar.gz"),
    ],
    ids=["wheels", "its-manifest-alone", "its-sdist-alone"],
)
def test_a_tag_another_project_released_in_the_shared_repository_is_never_added_to(
    layout: Layout, capsys: pytest.CaptureFixture[str], its_files: dict[str, bytes], named: str
) -> None:
    """sgl-project/whl holds several packages' releases: one that already released v0.1.0
    there keeps its release as it was, --replace or not, and the plan says why."""
    state = layout.gh.state
    owner, name = WHL.split("/")
    bot = state.user("whl-bot")
    other = state.create_release(state.repo(owner, name, bot, ""), bot, {"tag_name": "v0.1.0"})
    for file, data in its_files.items():
        layout.gh.add_asset(other.id, file, data)
    acme_name = named
    held = {a.name: a.data for a in layout.gh.assets(other.id)}

    (layout.tmp / "unbuilt").mkdir()
    for dist in (layout.dist, layout.tmp / "unbuilt"):  # after the build, and before it
        code, plan, _ = run_json(capsys, "plan", "--matrix", str(layout.matrix), "--dist",
                                 str(dist))  # fmt: skip
        assert code == PublishError.exit_code
        refused = {c["wheel"]: c["reason"] for c in plan["cells"] if c["state"] == "refused"}
        assert set(refused) == {CU129, CU130}
        assert all(
            r == f"the release {WHL}@v0.1.0 is another project's (it holds {acme_name}): give "
            'whl a tag of its own (tag: "k3-kernels-v{version}")'
            for r in refused.values()
        ), refused
    for extra in ([], ["--replace"]):
        capsys.readouterr()
        code = main(["publish", "--dist", str(layout.dist), "--matrix", str(layout.matrix),
                     *extra])  # fmt: skip
        err = capsys.readouterr().err
        assert code != 0
        assert "--replace" not in err.split("hint:")[-1]
        assert {a.name: a.data for a in layout.gh.assets(other.id)} == held
        assert layout.pypi.files() == {}


def test_verify_against_another_projects_matrix_is_refused_before_any_request(
    layout: Layout, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = publish(layout, capsys)
    assert code == 0, err
    other = layout.tmp / "other"
    (other / "project").mkdir(parents=True)
    (other / "project" / "pyproject.toml").write_text(
        '[project]\nname = "zz-other"\nversion = "0.1.0"\n', encoding="utf-8"
    )
    (other / "matrix.yaml").write_text(layout.matrix.read_text(), encoding="utf-8")
    layout.gh.clear_log()
    capsys.readouterr()
    code = main(["verify", "--dist", str(layout.dist), "--matrix", str(other / "matrix.yaml"),
                 "--no-provenance"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines()[0] == (
        f"error: {other / 'matrix.yaml'} releases zz-other, and the release verified is "
        f"{PROJECT} {VERSION}"
    )
    assert layout.gh.request_log == ()


def test_a_dry_run_that_cannot_reach_the_git_index_says_so_and_exits_9(
    layout: Layout, capsys: pytest.CaptureFixture[str]
) -> None:
    """As for any destination a dry run cannot ask: its destinations are not asked (exit 9),
    where a publish would stop before its first upload (exit 5)."""
    layout.bare.rename(layout.tmp / "moved.git")
    code, report, _ = run_json(
        capsys, "publish", "--dist", str(layout.dist), "--matrix", str(layout.matrix),
        "--dry-run",
    )  # fmt: skip
    assert code == 9
    (whl,) = [line for line in report["not_asked"] if line.startswith("whl: ")]
    assert "reading the branch failed" in whl
    capsys.readouterr()
    code = main(["publish", "--dist", str(layout.dist), "--matrix", str(layout.matrix)])
    assert code == PublishError.exit_code
    assert layout.pypi.files() == {}
    assert layout.gh.releases(WHL) == ()
