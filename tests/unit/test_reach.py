"""release.destinations.reach: one command's clients and credentials, each built once from
the environment it is handed, with the command line's overrides of where a destination is."""

from __future__ import annotations

import pytest

from release.destinations.reach import PYPI_UPLOAD, Reach
from release.errors import PublishError
from release.remote.retry import RetryPolicy

API = "https://ghe.example.com/api/v3"
TOKEN = "ghp_" + "c3" * 18


def test_one_github_client_per_api_url_for_the_whole_command() -> None:
    reach = Reach({"GITHUB_TOKEN": TOKEN}, command="release verify")
    client = reach.github(API + "/")
    assert reach.github(API) is client  # a GitHub this run gave up on is not asked again
    assert client.api_url == API
    assert client.command == "release verify"
    assert not client.anonymous
    assert reach.github(None).api_url == "https://api.github.com"
    asking = RetryPolicy(attempts=3, total=60.0)
    assert reach.github(API, policy=asking) is not client  # another retry policy
    assert reach.github(API, policy=asking).policy == asking


def test_the_command_lines_api_url_replaces_each_destinations() -> None:
    reach = Reach({}, command="release plan", github_api_url="http://127.0.0.1:1/api/")
    assert reach.github(API).api_url == "http://127.0.0.1:1/api"
    assert reach.github(API).anonymous


def test_the_signers_github_is_the_workflows() -> None:
    reach = Reach({"GITHUB_API_URL": API}, command="release verify")
    assert reach.signer_github().api_url == API
    assert Reach({}, command="release verify").signer_github().api_url == "https://api.github.com"


def test_writing_github_needs_a_token_reading_does_not() -> None:
    with pytest.raises(PublishError, match="github: no GITHUB_TOKEN in the environment"):
        Reach({}, command="release publish").require_github_token("github")
    Reach({}, command="release publish --dry-run", read_only=True).require_github_token("github")
    Reach({"GH_TOKEN": TOKEN}, command="release publish").require_github_token("github")


def test_index_credentials_go_to_the_origins_each_index_serves() -> None:
    reach = Reach({"TWINE_API_KEY": "pypi-key-1234", "GITHUB_TOKEN": TOKEN}, command="x")
    assert reach.upload_url(None) == PYPI_UPLOAD
    assert (
        Reach({}, command="x", repository_url="http://127.0.0.1:2/").upload_url(
            "https://upload.pypi.org/legacy/"
        )
        == "http://127.0.0.1:2/"
    )
    auth = reach.origin_auth(
        bearer=["https://objects.example.com"],
        indexes=[("https://upload.pypi.org/legacy/", ["https://pypi.org/simple/", None])],
    )
    assert list(auth.bearer) == ["https://objects.example.com"]
    assert auth.bearer["https://objects.example.com"].reveal() == TOKEN
    assert list(auth.basic) == ["https://pypi.org"]
    assert auth.basic["https://pypi.org"].password.reveal() == "pypi-key-1234"
    assert set(reach.secrets) >= {TOKEN, "pypi-key-1234"}


def test_without_a_token_no_origin_gets_one() -> None:
    auth = Reach({}, command="x").origin_auth(bearer=["https://objects.example.com"])
    assert auth.bearer == {}


def test_secrets_stay_out_of_its_repr() -> None:
    reach = Reach({"GITHUB_TOKEN": TOKEN, "TWINE_PASSWORD": "hunter2"}, command="x")
    assert TOKEN not in repr(reach)
    assert "hunter2" not in repr(reach)


def test_a_destinations_token_secret_gets_a_client_of_its_own_with_that_token() -> None:
    whl = "ghp_" + "w1" * 18
    reach = Reach({"GITHUB_TOKEN": TOKEN, "WHL_TOKEN": whl}, command="release publish")
    own = reach.github(API)
    other = reach.github(API, token_secret="WHL_TOKEN")
    assert other is not own
    assert reach.github(API, token_secret="WHL_TOKEN") is other
    # each client holds (and masks) its own token only
    assert (TOKEN in own.scrub(TOKEN), whl in own.scrub(whl)) == (False, True)
    assert (TOKEN in other.scrub(TOKEN), whl in other.scrub(whl)) == (True, False)
    assert reach.token("WHL_TOKEN") is not None
    assert reach.token("WHL_TOKEN").reveal() == whl  # type: ignore[union-attr]
    # a secret the environment lacks: reading falls back to the job's own token
    assert reach.token("MISSING_TOKEN").reveal() == TOKEN  # type: ignore[union-attr]


def test_writing_with_a_token_secret_needs_that_variable_not_github_token() -> None:
    with pytest.raises(PublishError) as caught:
        Reach({"GITHUB_TOKEN": TOKEN}, command="release publish").require_github_token(
            "whl", "WHL_TOKEN"
        )
    assert caught.value.message == "whl: no WHL_TOKEN in the environment (its token-secret)"
    assert "token-secret: WHL_TOKEN" in (caught.value.hint or "")
    Reach({"WHL_TOKEN": TOKEN}, command="release publish").require_github_token("whl", "WHL_TOKEN")
    Reach({}, command="release plan", read_only=True).require_github_token("whl", "WHL_TOKEN")
