"""The one secret-name policy: the names whose values are masked, kept from child processes
and refused in matrix.yaml's build `env` are the same names; and the one URL redactor, which
hides the credentials of any URL in a text."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from release.commands.parsing.common import parse_overrides
from release.credentials import (
    _BARE_USERINFO,
    MIN_LENGTH,
    SECRET_VARIABLES,
    _mask_bare_userinfo,
    add_mask_lines,
    has_credentials,
    is_credential_query_key,
    is_secret_name,
    mask,
    redact,
    secret_values,
    without_credentials,
    written_url_problem,
)
from release.errors import ConfigError, Location, shown
from release.matrix import load_matrix

PROJECT = Path(__file__).resolve().parents[1] / "data" / "matrix" / "project"

SECRET_NAMES = (
    *SECRET_VARIABLES,
    "MY_TOKEN",
    "npm_token",
    "DB_PASSWORD",
    "Password",
    "AWS_SECRET_ACCESS_KEY",
    "client_secret",
    "OPENAI_API_KEY",
    "api_key_2",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "credential",
    "GH_PAT_FOR_WHL_RELEASE",  # sgl-project's, a personal access token
    "pat",
)
ORDINARY_NAMES = (
    *("PATH", "HOME", "CUDA_HOME", "MAX_JOBS", "TWINE_USERNAME", "API", "KEY", "TOK"),
    *("LD_LIBRARY_PATH", "PATCH_LEVEL", "COMPAT"),
)


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_a_name_with_token_password_secret_api_key_credential_or_pat_is_a_secret(name: str) -> None:
    assert is_secret_name(name)
    env = {name: "value-1234", "PATH": "/bin"}
    assert secret_values(env) == ("value-1234",)
    assert without_credentials(env) == {"PATH": "/bin"}


@pytest.mark.parametrize("name", ORDINARY_NAMES)
def test_other_names_are_not(name: str) -> None:
    assert not is_secret_name(name)
    assert secret_values({name: "value-1234"}) == ()


def matrix_with_build_env(tmp_path: Path, name: str) -> Path:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        f"project: {PROJECT}\n"
        "build:\n"
        "  backend: cmake\n"
        f"  env: {{{name}: 'x'}}\n"
        "defaults: {arches: [x86_64], sms: [80], manylinux: '2_28'}\n"
        "cuda:\n"
        "  '13.0': {destination: pypi}\n"
        "destinations:\n"
        "  pypi: {kind: pypi}\n",
        encoding="utf-8",
    )
    return matrix


@pytest.mark.parametrize("name", [n for n in SECRET_NAMES if n.isidentifier()])
def test_the_matrix_refuses_the_same_names_in_a_build_env(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_matrix(matrix_with_build_env(tmp_path, name))
    (problem,) = raised.value.problems
    assert f"build.env.{name}: {name} looks like a credential" in problem


@pytest.mark.parametrize("name", ["MAX_JOBS", "SGL_KERNEL_ENABLE_SM90A"])
def test_the_matrix_takes_other_names(tmp_path: Path, name: str) -> None:
    assert load_matrix(matrix_with_build_env(tmp_path, name)).cells


# --- The one URL redactor (issue 49): userinfo and credential query values, in any text. ---

SECRET = "S3cr3t-Val-0042"
REDACTED = {
    f"redis://:{SECRET}@h": "redis://***@h",
    f"https://user:{SECRET}@host/simple/": "https://***@host/simple/",
    f"https://{SECRET}@host/simple/": "https://***@host/simple/",  # a token as the user
    f"https://u:p@{SECRET}@host/": "https://***@host/",  # an `@` in the password
    f"https://h/simple/?token={SECRET}": "https://h/simple/?token=***",
    f"https://h/simple/#token={SECRET}": "https://h/simple/#token=***",
    f"https://h/x?a=1&Access_Token={SECRET}&b=2": "https://h/x?a=1&Access_Token=***&b=2",
    f"https://h/o?X-Amz-Credential={SECRET}&X-Amz-Signature={SECRET}&X-Amz-Date=20250101":
        "https://h/o?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Date=20250101",
    f"https://h/blob?sv=2024&sig={SECRET}": "https://h/blob?sv=2024&sig=***",
    f"https://h/?key={SECRET}&api_key={SECRET}&pwd={SECRET}&passwd={SECRET}":
        "https://h/?key=***&api_key=***&pwd=***&passwd=***",
    f"https://h/?secret={SECRET}&password={SECRET}&auth={SECRET}&signature={SECRET}":
        "https://h/?secret=***&password=***&auth=***&signature=***",
    f"s3://bucket/p?endpoint=http://u:{SECRET}@minio:9000&region=r":
        "s3://bucket/p?endpoint=http://***@minio:9000&region=r",
    f"pip install --index-url 'https://u:{SECRET}@h/simple/' k3":
        "pip install --index-url 'https://***@h/simple/' k3",
    f'{{"url": "https://h/simple/?token={SECRET}"}}': '{"url": "https://h/simple/?token=***"}',
    # a mistyped scheme leaves no :// before the userinfo
    f"http//u:{SECRET}@h/simple/": "http//***@h/simple/",
    f"'http:/u:{SECRET}@h/simple/' is not a URL": "'http:/***@h/simple/' is not a URL",
    f"u:{SECRET}@[::1]/x": "***@[::1]/x",
    # urllib reads each as a password that holds the quote, `<`, `>` or backslash
    f"https://u:{SECRET}\\q@h/simple/": "https://***@h/simple/",
    f"https://u:{SECRET}'q@h/": "https://***@h/",
    f'https://u:{SECRET}"<q>@h/': "https://***@h/",
    f"http//u:{SECRET}'q@h/": "http//***@h/",
    # a `#` or `?` in a password, unescaped: urllib cannot parse the URL, and the error about
    # it showed the password
    f"http://user:p#{SECRET}@127.0.0.1:8765/p/": "http://***@127.0.0.1:8765/p/",
    f"https://u:{SECRET}?x@h/simple/": "https://***@h/simple/",
    # a `/` in a password, unescaped: urllib ends the authority there
    f"https://u:pa/{SECRET}@h/simple/": "https://***@h/simple/",
    f"error: 'http://u:{SECRET}/x@h:8080/p/' is not a URL":
        "error: 'http://***@h:8080/p/' is not a URL",
    f"https://h/w.whl?jwt={SECRET}&passphrase={SECRET}&Bearer={SECRET}":
        "https://h/w.whl?jwt=***&passphrase=***&Bearer=***",
    f"https://h/simple/x/?pw={SECRET}&hmac={SECRET}&X-Hmac-Sha256={SECRET}":
        "https://h/simple/x/?pw=***&hmac=***&X-Hmac-Sha256=***",
}  # fmt: skip
KEPT = (
    "https://github.com/o/r/releases/download/v1/k3_kernels-0.1.0+cu129-py3-none-any.whl",
    "https://files.pythonhosted.org/packages/ab/k3.whl#sha256=" + "0" * 64,
    "https://github.com/o/r/.github/workflows/release.yml@refs/tags/v1",
    "http://[::1]:8080/simple/?page=2&region=us-east-1",
    "uses: actions/checkout@v4 and mail me@example.com",
)


@pytest.mark.parametrize("text", REDACTED)
def test_a_url_s_credentials_are_redacted_wherever_it_stands(text: str) -> None:
    assert redact(text) == REDACTED[text]
    assert SECRET not in mask(text, ())
    assert has_credentials(text)


@pytest.mark.parametrize("text", KEPT)
def test_a_url_without_credentials_is_left_as_it_is(text: str) -> None:
    assert redact(text) == text
    assert not has_credentials(text)


@pytest.mark.parametrize(
    "key", ["token", "TOKEN", "id_token", "X-Amz-Security-Token", "AWSAccessKeyId", "client_secret"]
)
def test_credential_query_keys_are_recognised_in_any_case(key: str) -> None:
    assert is_credential_query_key(key)


@pytest.mark.parametrize("key", ["page", "region", "endpoint", "format", "version", "name"])
def test_other_query_keys_are_not(key: str) -> None:
    assert not is_credential_query_key(key)


def test_a_value_quoted_in_a_message_is_redacted_before_it_is_cut() -> None:
    """`shown` cuts a long value: a cut before the `@` would leave a password no URL rule
    can find, so the redaction comes first."""
    long_secret = "P" * 60
    text = shown(f"s3://bucket/p?endpoint=http://user:{long_secret}@minio:9000")
    assert "PPPP" not in text
    assert text.startswith("'s3://bucket/p?endpoint=http://***@")


@pytest.mark.parametrize(
    "line",
    [
        "  pypi: {kind: pypi, repository-url: 'https://u:S3cr3t-Val@test.pypi.org/legacy/'}\n",
        "  pypi: {kind: pypi, repository-url: 'https://h/legacy/?token=S3cr3t-Val'}\n",
    ],
)
def test_the_matrix_refuses_a_url_with_credentials(tmp_path: Path, line: str) -> None:
    """dist/manifest.json records the destination's URLs: a credential in one would be
    written there, so matrix.yaml refuses it (credentials come from the environment)."""
    matrix = matrix_with_build_env(tmp_path, "MAX_JOBS")
    text = matrix.read_text().replace("  pypi: {kind: pypi}\n", line)
    matrix.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_matrix(matrix)
    (problem,) = raised.value.problems
    assert "destinations.pypi.repository-url: " in problem
    assert "holds credentials" in problem
    assert "S3cr3t-Val" not in problem


def test_an_error_never_carries_a_url_s_credentials() -> None:
    """Whatever a raise put in it: the message, each problem, the hint and the locations of
    an error (what tracebacks, logs and callers see) are redacted as it is made."""
    url = "https://u:S3cr3t-Val@h/simple/?token=S3cr3t-Val"
    error = ConfigError(
        [f"first {url}", f"second {url}"],
        hint=f"try {url}",
        locations=[Location("matrix.yaml", 3, 1, f"at {url}")],
    )
    texts = [str(error), repr(error), error.message, error.hint or "", *error.problems]
    texts += [where.message for where in error.locations]
    for text in texts:
        assert "S3cr3t-Val" not in text
    assert error.problems[0] == "first https://***@h/simple/?token=***"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://h/simple/", None),
        ("ftp://h/x", "is not an http(s) URL"),
        ("https://h/x\n--index-url https://evil/", "white space or a control character"),
        ("https://h/x y", "white space or a control character"),
        (f"https://u:{SECRET}@h/simple/", "holds credentials"),
        (f"https://h/simple/?token={SECRET}", "holds credentials"),
    ],
)
def test_a_url_written_into_a_requirement_file_is_plain(url: str, said: str | None) -> None:
    problem = written_url_problem(url)
    assert problem is None if said is None else problem is not None and said in problem
    refused = said is not None and said != "holds credentials"
    with pytest.raises(ConfigError) if refused else contextlib.nullcontext():
        # a private index's credentials, given on the line, are the user's to write
        assert parse_overrides([f"cu129={url}"]) == {"cu129": url}


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://h/x.whl?z&sha256=" + "e" * 64 + "&z", "names a hash pip would check"),
        ("https://h/x.whl?a=1&md5=00", "names a hash pip would check instead of the pin's (&md5=)"),
        (
            "https://h/x.whl#sha512=00",
            "names a hash pip would check instead of the pin's (#sha512=",
        ),
        ("https://h/x.whl#egg=k3", "holds a fragment (#...), where a pin's own #sha256= goes"),
        ("https://h/x.whl?sha256=00", None),  # pip reads `[#&]sha256=`: not `?sha256=`
        ("https://h/x.whl?a=1&b=2", None),
    ],
)
def test_a_url_written_into_a_pin_names_no_other_hash(url: str, said: str | None) -> None:
    """pip checks a download against the first `[#&]NAME=` of its link, query included:
    a pin `NAME @ URL#sha256=BUILT` whose URL names another hash would check that one."""
    problem = written_url_problem(url)
    assert problem is None if said is None else problem is not None and said in problem


def test_a_secret_echoed_in_another_case_is_masked_too() -> None:
    """A server that folds what it echoes (a charset, a header value) must not show the
    password a request carried."""
    secret = "Pw-Upl0ad-3f9C"
    text = f"bad charset {secret.lower()!r}; header {secret.upper()}; as sent {secret}"
    masked = mask(text, [secret])
    assert secret.lower() not in masked.lower()
    assert masked == "bad charset '***'; header ***; as sent ***"
    assert mask("short pw", ["pw"]) == "short pw"  # too short to tell from text


def test_a_secret_with_a_line_break_is_masked_as_a_message_quotes_it() -> None:
    token = "ghp_" + "LineEnd" * 5
    env = {"GH_PAT_FOR_WHL_RELEASE": f"{token}\r\n", "OTHER_SECRET": "line-one\nline-two"}
    quoted = f"Illegal header value b'token {token}\\r\\n'; then line-one and line-two"
    shown = mask(quoted, secret_values(env))
    assert token not in shown
    assert "line-one" not in shown
    assert "line-two" not in shown
    lines = set(add_mask_lines({**env, "GITHUB_ACTIONS": "true"}))
    assert {f"::add-mask::{token}", "::add-mask::line-one", "::add-mask::line-two"} <= lines
    assert not any("\n" in line for line in lines)


def test_a_secret_in_a_value_cut_short_is_masked_from_its_first_character() -> None:
    """A version file holding GITHUB_TOKEN's value was quoted by its first 36 characters and
    `...` (errors.shown): the whole value no longer matched, and the token showed in part."""
    token = "ghp_PROBEsecret0123456789abcdefghijklmnop"
    message = f"matrix.yaml:5:19: version {shown(token + 'x' * 100)} is not PEP 440"
    masked = mask(message, [token])
    assert token[:MIN_LENGTH] not in masked
    # a token of GitHub's prefix is masked whole even before the cut
    assert masked.startswith("matrix.yaml:5:19: version '***")
    assert mask("Installing build dependencies ... done", [token]).endswith("... done")


def test_a_secret_quoted_with_escapes_is_masked_as_quoted() -> None:
    """A password holding a backslash showed whole in a message that quotes it with repr
    (`'pa\\\\ss0rd-Zq'`): the value as written no longer matched."""
    secret = "pa\\ss0rd-Zq"
    for quoted in (repr(secret), json.dumps(secret)):
        message = f"error: version {quoted} is not PEP 440"
        assert mask(message, secret_values({"DB_PASSWORD": secret})) == (
            f"error: version {quoted[0]}***{quoted[-1]} is not PEP 440"
        )


@pytest.mark.parametrize(
    ("token", "prefix"),
    [
        ("ghp_" + "SEKRET" + "0" * 30, "ghp_"),
        ("github_pat_11ABCDEFG0" + "x" * 60, "github_pat_"),
        ("pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAw", "pypi-AgE"),
        ("glpat-" + "x1Y2" * 5, "glpat-"),
    ],
)
def test_a_token_of_a_known_issuer_is_masked_wherever_it_stands(token: str, prefix: str) -> None:
    # a token pasted into any value of matrix.yaml was echoed by the message quoting it
    said = redact(f"destinations.x.token-secret: '{token}' is not a name")
    assert said == "destinations.x.token-secret: '***' is not a name"
    assert prefix not in said
    assert redact("ghp_short and pypi-nightly-destination-name") == (
        "ghp_short and pypi-nightly-destination-name"
    )


# the characters that make or break a bare `user:password@host`: a user name's (ASCII and
# not), the separators, white space and a line end of another script
_BARE_PIECES = st.text(alphabet="ab1_.~%+-:@/?#[ \n\u00e9\u2028x", max_size=30)


@given(_BARE_PIECES)
@settings(max_examples=500)
def test_a_bare_user_and_password_is_masked_as_its_pattern_says(text: str) -> None:
    """The bare `user:password@host` is found from its `:` (a pattern that starts with a run of
    word characters took a second a megabyte of a compiler's output): what it masks is what
    the pattern it stands for would."""
    assert _mask_bare_userinfo(text) == _BARE_USERINFO.sub("***@", text)


def test_a_password_in_megabytes_of_output_is_masked_in_all_its_lines() -> None:
    lines = ["arch = sm_90 sym@GLIBC_2.2.5 code version = [1,8]\n"] * 200_000
    lines[1000] = "fetching x:pa55word@mirror.example/simple\n"
    lines[-1] = "see https://u:pa55word@h/x?token=pa55word"
    said = redact("".join(lines))
    assert "pa55word" not in said
    assert said.count("sym@GLIBC_2.2.5") == len(lines) - 2
    assert "fetching ***@mirror.example/simple\n" in said
