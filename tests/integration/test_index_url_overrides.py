"""`--index-url NAME=URL` of `release pins` and `release verify`, on a release published to
the stand-in GitHub: a NAME the release has no destination or label of is exit 2 naming the
option and the names there are (it was ignored), and pins, whose files users install from
and commit, takes no URL holding credentials (verify may: it only asks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.cli import main
from release.destinations.reach import Reach
from release.publish.run import PublishSettings, publish
from tests.github_standin import GitHubStandIn
from tests.integration.wheels import Release, github_destination, make_release

SECRET = "pw-idx-s3cr3tvalue"


@pytest.fixture
def published(
    github_standin: GitHubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Release:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    release = make_release(
        tmp_path / "dist", pypi=None, github=github_destination(github_standin.api_url)
    )
    reach = Reach({"GITHUB_TOKEN": github_standin.token}, command="release publish")
    publish(PublishSettings(dist=release.dist, index_dir=tmp_path / "site"), reach)
    return release


def stderr_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, err.splitlines()


@pytest.mark.parametrize("command", ["pins", "verify"])
def test_an_index_url_naming_no_destination_or_label_is_exit_2(
    command: str, published: Release, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, "--dist", str(published.dist), "--index-url", "cu999=http://x/"]
    code, err = stderr_of(argv, capsys)
    assert code == 2
    assert err[0] == "error: --index-url 'cu999'=...: no destination or local label of that name"
    assert err[1] == "hint: the release has: cu129, github"
    assert not (published.dist / "pins").exists()


def test_pins_takes_no_index_url_holding_credentials(
    published: Release, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://bob:{SECRET}@127.0.0.1:1/cu129/"
    for given in (url, "http://127.0.0.1:1/cu129/?token=" + SECRET):
        argv = ["pins", "--dist", str(published.dist), "--index-url", f"cu129={given}"]
        code, err = stderr_of(argv, capsys)
        assert code == 2
        assert err[0].startswith("error: --index-url "), err
        assert "holds credentials, which no file written may hold" in err[0]
        assert SECRET not in "\n".join(err)
        assert not (published.dist / "pins").exists()
    argv = ["pins", "--dist", str(published.dist), "--index-url", "cu129=https://idx.test/cu129/"]
    assert stderr_of(argv, capsys)[0] == 0
    assert "https://idx.test/cu129/" in (published.dist / "pins" / "cu129.txt").read_text()
