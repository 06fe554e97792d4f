"""release.destinations.reach: one command's clients and credentials, each built once from
the environment it is handed, with the command line's overrides of where a destination is."""

from __future__ import annotations

import pytest

from release.destinations.reach import PYPI_UPLOAD, Reach
from release.errors import ConfigError, PublishError
from release.matrix.gitindex import token_secret_problem
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
    # tokens of no issuer's prefix: redact masks a ghp_ token in any text, held or not
    mine, whl = "own-" + "c3" * 18, "whl-" + "w1" * 18
    reach = Reach({"GITHUB_TOKEN": mine, "WHL_TOKEN": whl}, command="release publish")
    own = reach.github(API)
    other = reach.github(API, token_secret="WHL_TOKEN")
    assert other is not own
    assert reach.github(API, token_secret="WHL_TOKEN") is other
    # each client holds (and masks) its own token only
    assert (mine in own.scrub(mine), whl in own.scrub(whl)) == (False, True)
    assert (mine in other.scrub(mine), whl in other.scrub(whl)) == (True, False)
    assert reach.token("WHL_TOKEN") is not None
    assert reach.token("WHL_TOKEN").reveal() == whl  # type: ignore[union-attr]
    # a secret the environment lacks: reading falls back to the job's own token
    assert reach.token("MISSING_TOKEN").reveal() == mine  # type: ignore[union-attr]


def test_writing_with_a_token_secret_needs_that_variable_not_github_token() -> None:
    with pytest.raises(PublishError) as caught:
        Reach({"GITHUB_TOKEN": TOKEN}, command="release publish").require_github_token(
            "whl", "WHL_TOKEN"
        )
    assert caught.value.message == "whl: no WHL_TOKEN in the environment (its token-secret)"
    assert "token-secret: WHL_TOKEN" in (caught.value.hint or "")
    Reach({"WHL_TOKEN": TOKEN}, command="release publish").require_github_token("whl", "WHL_TOKEN")
    Reach({}, command="release plan", read_only=True).require_github_token("whl", "WHL_TOKEN")


# --- A credential goes only where it is good: a manifest is another job's output. ---

JOB = {"GITHUB_ACTIONS": "true", "GITHUB_API_URL": "https://api.github.com",
       "GITHUB_SERVER_URL": "https://github.com", "GITHUB_TOKEN": TOKEN}  # fmt: skip
ELSEWHERE = "https://api.github.example.net"


def test_in_a_workflow_job_a_github_token_goes_to_the_jobs_own_github_alone() -> None:
    """A manifest whose `api_url` was changed after the build (by code the build ran) would
    receive the job's token with every request."""
    reach = Reach(JOB, command="release publish")
    assert not reach.github("https://api.github.com").anonymous
    with pytest.raises(PublishError) as refused:
        reach.github(ELSEWHERE)
    assert refused.value.message == (
        f"{ELSEWHERE} is not this job's GitHub (https://api.github.com, https://github.com): "
        "GITHUB_TOKEN is sent to the job's own GitHub alone"
    )
    assert TOKEN not in "\n".join(refused.value.lines())
    # another repository's token (a destination's token-secret) is held to the same
    with pytest.raises(PublishError, match="GH_PAT_WHL is sent to the job's own GitHub"):
        Reach({**JOB, "GH_PAT_WHL": "ghp_other"}, command="x").token_for(
            ELSEWHERE + "/o/r.git", "GH_PAT_WHL"
        )


def test_the_command_line_and_a_machine_outside_a_workflow_name_any_github() -> None:
    on_the_line = Reach(JOB, command="release publish", github_api_url=ELSEWHERE)
    assert on_the_line.github("https://ignored.example").api_url == ELSEWHERE
    assert not on_the_line.github(None).anonymous
    outside = Reach({"GITHUB_TOKEN": TOKEN}, command="release publish")
    assert not outside.github(ELSEWHERE).anonymous  # the caller's own files
    ghes = Reach({**JOB, "GITHUB_API_URL": API, "GITHUB_SERVER_URL": "https://ghe.example.com"},
                 command="x")  # fmt: skip
    assert not ghes.github(API).anonymous  # a GitHub Enterprise runner's own


def test_in_a_workflow_job_a_file_download_gets_the_token_on_the_jobs_github_alone() -> None:
    auth = Reach(JOB, command="release verify").origin_auth(
        bearer=["https://github.com", "https://evil.example"]
    )
    assert list(auth.bearer) == ["https://github.com"]


def test_a_pypi_token_is_sent_to_pypi_alone() -> None:
    reach = Reach({"TWINE_API_KEY": "pypi-AgEIcHlwaS5vcmc-0123"}, command="release publish")
    assert reach.index_credentials("https://upload.pypi.org/legacy/") is not None
    assert reach.index_credentials("https://test.pypi.org/legacy/") is not None
    elsewheres = (
        "https://evilpypi.org/legacy/",
        "http://upload.pypi.org/legacy/",
        "https://upload.pypi.org.evil.example/legacy/",
        "http://127.0.0.1:9/",
    )
    for elsewhere in elsewheres:
        with pytest.raises(PublishError) as refused:
            reach.index_credentials(elsewhere)
        assert "TWINE_API_KEY holds a PyPI token" in refused.value.message
        assert "pypi-AgEI" not in "\n".join(refused.value.lines())
    # read with the same token, an index page elsewhere is asked without it
    auth = reach.origin_auth(
        indexes=[("https://upload.pypi.org/legacy/", ["https://evil.example/simple/"])]
    )
    assert auth.basic == {}
    # another index's own key goes to it
    key = Reach({"TWINE_API_KEY": "index-key-0123"}, command="x")
    assert key.index_credentials("http://127.0.0.1:9/") is not None


def test_trusted_publishing_asks_pypis_own_hosts_alone() -> None:
    """twine asks the upload URL's host for the OIDC audience and sends it the job's OIDC
    token: another host could trade it for an upload token at PyPI."""
    job = {"GITHUB_ACTIONS": "true", "ACTIONS_ID_TOKEN_REQUEST_URL": "https://x/token"}
    reach = Reach(job, command="release publish")
    trusted = reach.index_credentials("https://upload.pypi.org/legacy/")
    assert trusted is not None
    assert trusted.source == "trusted publishing"
    assert reach.index_credentials("https://evilpypi.org/legacy/") is None
    assert reach.index_credentials("http://upload.pypi.org/legacy/") is None


@pytest.mark.parametrize(
    "secret", ["TWINE_PASSWORD", "TWINE_API_KEY", "PYPI_API_TOKEN", "TEST_PYPI_TOKEN"]
)
def test_a_token_secret_naming_a_pypi_credential_is_refused(secret: str) -> None:
    assert "sent to PyPI alone" in (token_secret_problem(secret) or "")
    assert token_secret_problem("WHL_TOKEN") is None
    # a GitHub token for a mirror of PyPI is named so, and a name of words is a name
    assert token_secret_problem("GH_TOKEN_FOR_PYPI_MIRROR") is None
    assert token_secret_problem("Release_Wheels_Token_For_Org_2024") is None


def test_a_pypi_token_is_never_a_github_token() -> None:
    pypi = "pypi-AgEIcHlwaS5vcmc" + "x" * 40
    reach = Reach({"GITHUB_TOKEN": TOKEN, "WHL_TOKEN": pypi}, command="release publish")
    with pytest.raises(ConfigError) as caught:
        reach.github(API, token_secret="WHL_TOKEN")
    assert caught.value.message.startswith("WHL_TOKEN holds a PyPI token")
    assert pypi not in str(caught.value.lines())
    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        with pytest.raises(ConfigError, match=f"{name} holds a PyPI token"):
            Reach({name: pypi}, command="release publish")
