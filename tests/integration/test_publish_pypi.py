"""The PyPI publisher against a real pypiserver (auth on, no fallback), twine and pip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from release.cli import main
from release.credentials import IndexCredentials
from release.destinations.decide import Action, plan_for
from release.destinations.pypi_publisher import PypiPublisher, UploadAnswer, twine_upload
from release.destinations.reach import Reach
from release.errors import PublishError
from release.publish.run import PublishSettings, publish
from release.records.manifest import Manifest, write_manifest
from tests.integration.indexes import QuietHandler, serve
from tests.integration.wheels import (
    PROJECT,
    VERSION,
    attestation_for,
    entry_for,
    make_release,
    make_wheel,
    pypi_destination,
)
from tests.local_http import LOCAL
from tests.pypi_server import PypiServer
from tests.s3_server import free_port


class CountingRunner:
    """twine's real upload, counting uploads (and optionally acting after one)."""

    def __init__(self, after_upload: list[object] | None = None) -> None:
        self.uploads: list[str] = []
        self.hooks = after_upload or []

    def __call__(self, wheel: Path, repository_url: str, creds: IndexCredentials) -> UploadAnswer:
        answer = twine_upload(wheel, repository_url, creds)
        self.uploads.append(wheel.name)
        if self.hooks:
            hook = self.hooks.pop(0)
            if callable(hook):
                hook()
        return answer


def publisher(server: PypiServer, runner: CountingRunner, env: Mapping[str, str]) -> PypiPublisher:
    reach = Reach(env, command="release publish")
    return PypiPublisher(pypi_destination(server.url), reach=reach, uploader=runner)


def test_uploads_then_a_rerun_uploads_nothing(pypiserver: PypiServer, tmp_path: Path) -> None:
    release = make_release(tmp_path / "dist", pypi=pypi_destination(pypiserver.url),
                           arches=("x86_64", "aarch64"))  # fmt: skip
    runner = CountingRunner()
    pub = publisher(pypiserver, runner, pypiserver.env())
    first = pub.apply(
        plan_for(pub, release.manifest.wheels, release.dist, replace=False), release.dist
    )
    assert [d.reason for d in first] == ["uploaded", "uploaded"]
    assert pypiserver.files() == {w.name: w.read_bytes() for w in release.wheels}

    again = plan_for(pub, release.manifest.wheels, release.dist, replace=False)
    assert {d.action for d in again.decisions} == {Action.SKIP}
    pub.apply(again, release.dist)
    assert len(runner.uploads) == 2  # the second run called twine for nothing


def test_an_identical_file_already_there_counts_only_when_the_index_agrees(
    pypiserver: PypiServer, tmp_path: Path
) -> None:
    """pypiserver answers an identical re-upload with 400/409; that is success only because
    the index then lists the same sha256 (a stale plan simulates a racing publisher)."""
    release = make_release(tmp_path / "dist", pypi=pypi_destination(pypiserver.url))
    runner = CountingRunner()
    pub = publisher(pypiserver, runner, pypiserver.env())
    stale = plan_for(pub, release.manifest.wheels, release.dist, replace=False)
    pub.apply(stale, release.dist)
    (again,) = pub.apply(stale, release.dist)
    assert again.reason == "already there with the same sha256"
    assert len(runner.uploads) == 2


def test_other_bytes_uploaded_by_someone_else_are_a_conflict(
    pypiserver: PypiServer, tmp_path: Path
) -> None:
    first = make_release(tmp_path / "a", pypi=pypi_destination(pypiserver.url), payload=b"#1")
    second = make_release(tmp_path / "b", pypi=pypi_destination(pypiserver.url), payload=b"#2")
    pub = publisher(pypiserver, CountingRunner(), pypiserver.env())
    stale = plan_for(pub, second.manifest.wheels, second.dist, replace=False)
    pub.apply(plan_for(pub, first.manifest.wheels, first.dist, replace=False), first.dist)
    with pytest.raises(PublishError, match="now holds sha256"):
        pub.apply(stale, second.dist)


def test_cli_conflict_uploads_nothing_and_exits_6(
    pypiserver: PypiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    old = make_release(tmp_path / "old", pypi=pypi_destination(pypiserver.url), payload=b"old")
    assert main(["publish", "--dist", str(old.dist)]) == 0
    capsys.readouterr()
    new = make_release(tmp_path / "new", pypi=pypi_destination(pypiserver.url),
                       arches=("x86_64", "aarch64"), payload=b"new")  # fmt: skip
    assert main(["publish", "--dist", str(new.dist)]) == 6
    out, err = capsys.readouterr()
    assert "CONFLICT" in out
    assert "exists with sha256" in out
    assert "error: 1 CONFLICT: nothing was uploaded" in err
    # the aarch64 wheel, new and uploadable, was not uploaded either
    assert set(pypiserver.files()) == {old.wheels[0].name}


def test_cli_refuses_everything_pypi_would_reject_one_line_per_file(
    pypiserver: PypiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    dist = tmp_path / "dist"
    destination = pypi_destination(pypiserver.url, max_file_size=2048)
    wheels = [
        make_wheel(dist, version="0.1.0+cu130", platform="manylinux_2_28_x86_64"),
        make_wheel(dist, platform="linux_x86_64"),
        make_wheel(dist, platform="manylinux_2_28_ppc64le", record=False),
        make_wheel(dist, platform="manylinux_2_28_s390x", payload=os.urandom(8000).hex().encode()),
    ]
    good = make_wheel(dist, platform="musllinux_1_2_x86_64")
    entries = tuple(entry_for(w, destination) for w in [*wheels, good])
    write_manifest(
        Manifest(project=PROJECT, version=VERSION, wheels=entries), dist / "manifest.json"
    )
    assert main(["publish", "--dist", str(dist), "--json-file", str(tmp_path / "plan.json")]) == 5
    _, err = capsys.readouterr()
    assert "error: 4 refused: nothing was uploaded" in err
    plan = json.loads((tmp_path / "plan.json").read_text())["plan"]
    reasons = {p["filename"]: p["reason"] for p in plan if p["action"] == "refused"}
    assert set(reasons) == {w.name for w in wheels}
    assert "local version" in reasons[wheels[0].name]
    assert "not on PyPI's allow-list" in reasons[wheels[1].name]
    assert "no RECORD" in reasons[wheels[2].name]
    assert "file limit" in reasons[wheels[3].name]
    assert pypiserver.files() == {}


def test_a_wheel_whose_metadata_disagrees_with_its_name_stops_publish_before_any_request(
    pypiserver: PypiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dist = tmp_path / "dist"
    destination = pypi_destination(pypiserver.url)
    wheel = make_wheel(dist, platform="manylinux_2_28_aarch64", metadata_version="0.1.1")
    entry = entry_for(wheel, destination)
    write_manifest(
        Manifest(project=PROJECT, version=VERSION, wheels=(entry,)), dist / "manifest.json"
    )
    assert main(["publish", "--dist", str(dist)]) == 2
    err = capsys.readouterr().err
    assert f"{wheel.name}: METADATA Version is '0.1.1'" in err
    assert "Traceback" not in err
    assert pypiserver.files() == {}


def test_a_description_pypi_would_not_render_is_a_refusal_and_none_at_all_is_not(
    pypiserver: PypiServer, tmp_path: Path
) -> None:
    """PyPI refuses an upload whose long description fails to render, and takes one with no
    description (PyTorch's extension template has none): `twine check`, not --strict."""
    broken = make_wheel(
        tmp_path / "broken", description_type="text/x-rst", description=".. no-such-directive::\n"
    )
    bare = make_wheel(tmp_path / "bare", description_type=None, description="")
    pub = publisher(pypiserver, CountingRunner(), pypiserver.env())
    destination = pypi_destination(pypiserver.url)
    reason = pub.refusal(entry_for(broken, destination), broken)
    assert reason is not None
    assert reason.startswith("twine check:")
    assert pub.refusal(entry_for(bare, destination), bare) is None


def test_pypiserver_stopped_mid_run_then_a_rerun_converges(
    pypiserver: PypiServer, tmp_path: Path
) -> None:
    release = make_release(tmp_path / "dist", pypi=pypi_destination(pypiserver.url),
                           arches=("x86_64", "aarch64"))  # fmt: skip
    runner = CountingRunner(after_upload=[pypiserver.stop])
    settings = PublishSettings(dist=release.dist)

    def factory(destination: object) -> PypiPublisher:
        return PypiPublisher(
            pypi_destination(pypiserver.url), reach=Reach(pypiserver.env(), command="publish"),
            uploader=runner, propagation_attempts=2,
        )  # fmt: skip

    with pytest.raises(PublishError) as failure:
        publish(settings, Reach(pypiserver.env(), command="release publish"), factory=factory)
    assert "k3_kernels-0.1.0-py3-none-manylinux_2_28_" in failure.value.message
    assert not pypiserver.running

    pypiserver.start()
    outcome = publish(settings, Reach(pypiserver.env(), command="release publish"), factory=factory)
    reasons = sorted(d.reason for d in outcome.applied)
    assert reasons == ["same sha256", "uploaded"]
    assert pypiserver.files() == {w.name: w.read_bytes() for w in release.wheels}


def test_pip_installs_the_test_wheels_from_pypiserver(
    pypiserver: PypiServer, tmp_path: Path
) -> None:
    release = make_release(tmp_path / "dist", pypi=pypi_destination(pypiserver.url))
    pub = publisher(pypiserver, CountingRunner(), pypiserver.env())
    pub.apply(plan_for(pub, release.manifest.wheels, release.dist, replace=False), release.dist)
    index = pypiserver.index_url.replace(
        "http://", f"http://{pypiserver.username}:{pypiserver.password}@"
    )
    target = tmp_path / "target"
    subprocess.run(
        [sys.executable, "-m", "pip", "--isolated", "install", "--no-deps", "--no-cache-dir",
         "--target", str(target), "--index-url", index, "--platform", "manylinux_2_28_x86_64",
         "--only-binary=:all:", f"{PROJECT}=={VERSION}"],
        check=True, capture_output=True,
    )  # fmt: skip
    init = (target / "k3_kernels" / "__init__.py").read_text()
    assert 'VARIANT = "manylinux_2_28_x86_64"' in init


# --- PEP 740 attestations: what twine sent, and what is refused before sending. ---


RECORDER = Path(__file__).with_name("recording_pypiserver.py")


@dataclass(frozen=True)
class RecordingPypiserver:
    url: str
    packages: Path
    record: Path

    def fields(self, filename: str) -> dict[str, str]:
        """The fields of the upload form that carried `filename`."""
        forms = [json.loads(line) for line in self.record.read_text().splitlines()]
        (form,) = [f for f in forms if f.get("content") == filename]
        return dict(form)


@pytest.fixture
def recording_pypiserver(tmp_path: Path) -> Iterator[RecordingPypiserver]:
    """A pypiserver that writes down every upload form (tests/integration/
    recording_pypiserver.py), started for the test and stopped after it."""
    packages = tmp_path / "recorded-packages"
    packages.mkdir()
    record = tmp_path / "forms.jsonl"
    record.touch()
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(RECORDER), str(port), str(record), str(packages)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the recording pypiserver exited with {process.returncode}")
            try:
                if LOCAL.get(f"{url}health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError("the recording pypiserver did not answer")
        yield RecordingPypiserver(url=url, packages=packages, record=record)
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_wheel_goes_with_its_attestation_and_one_without_goes_as_before(
    recording_pypiserver: RecordingPypiserver, tmp_path: Path
) -> None:
    server = recording_pypiserver
    release = make_release(tmp_path / "dist", pypi=pypi_destination(server.url),
                           arches=("x86_64", "aarch64"))  # fmt: skip
    attested, plain = release.wheels
    attestation = attestation_for(attested)
    env = {"TWINE_USERNAME": "anyone", "TWINE_PASSWORD": "unchecked-here"}
    outcome = publish(PublishSettings(dist=release.dist), Reach(env, command="release publish"))
    assert [d.reason for d in outcome.applied] == ["uploaded", "uploaded"]
    assert {p.name for p in server.packages.iterdir()} == {attested.name, plain.name}
    sent = server.fields(attested.name)
    assert json.loads(sent["attestations"]) == [json.loads(attestation.read_text())]
    assert sent["sha256_digest"] == release.manifest.wheels[0].sha256
    assert "attestations" not in server.fields(plain.name)


def test_an_attestation_of_other_bytes_stops_publish_before_any_upload(
    pypiserver: PypiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    release = make_release(tmp_path / "dist", pypi=pypi_destination(pypiserver.url),
                           arches=("x86_64", "aarch64"))  # fmt: skip
    good, stale = release.wheels
    attestation_for(good)
    attestation_for(stale, sha256="ab" * 32)  # signed before a rebuild, say
    plan_file = tmp_path / "plan.json"
    assert main(["publish", "--dist", str(release.dist), "--json-file", str(plan_file)]) == 5
    out, err = capsys.readouterr()
    assert "refused" in out
    assert "error: 1 refused: nothing was uploaded" in err
    plan = json.loads(plan_file.read_text())["plan"]
    reasons = {p["filename"]: p["reason"] for p in plan if p["action"] == "refused"}
    assert list(reasons) == [stale.name]
    assert reasons[stale.name].startswith(
        f"{stale.name}.publish.attestation: it attests sha256 abababababab..., the wheel is "
    )
    assert "Traceback" not in err
    assert pypiserver.files() == {}


class _TakesUploadsAndNeverAnswers(QuietHandler):
    released = threading.Event()  # set when the test is done with the server
    bodies: ClassVar[list[int]] = []

    def do_GET(self) -> None:
        self.send_error(404)  # no project page yet

    def do_POST(self) -> None:
        self.bodies.append(len(self.rfile.read(int(self.headers["Content-Length"]))))
        self.released.wait(120)


def test_an_index_that_takes_the_upload_and_never_answers_fails_it_in_one_line(
    tmp_path: Path,
) -> None:
    """twine sends with no timeout: the upload waited for as long as the index held its
    answer back (forever here), and `release publish` with it."""
    _TakesUploadsAndNeverAnswers.released.clear()
    with serve(_TakesUploadsAndNeverAnswers) as url:
        release = make_release(tmp_path / "dist", pypi=pypi_destination(url))
        reach = Reach({"TWINE_USERNAME": "u", "TWINE_PASSWORD": "hunter2"}, command="publish")
        uploader = partial(twine_upload, timeout=(10.0, 1.0))
        pub = PypiPublisher(pypi_destination(url), reach=reach, uploader=uploader)
        plan = plan_for(pub, release.manifest.wheels, release.dist, replace=False)
        try:
            with pytest.raises(PublishError) as failed:
                pub.apply(plan, release.dist)
        finally:
            _TakesUploadsAndNeverAnswers.released.set()
    (wheel,) = release.wheels
    assert _TakesUploadsAndNeverAnswers.bodies[0] > wheel.stat().st_size  # it was all sent
    assert failed.value.message.startswith(f"{wheel.name}: upload to pypi failed: ")
    assert "timed out" in failed.value.message
    assert "\n" not in failed.value.message
    assert "hunter2" not in failed.value.message
