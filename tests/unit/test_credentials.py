"""The one secret-name policy: the names whose values are masked, kept from child processes
and refused in matrix.yaml's build `env` are the same names."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.credentials import (
    SECRET_VARIABLES,
    is_secret_name,
    secret_values,
    without_credentials,
)
from release.errors import ConfigError
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
)
ORDINARY_NAMES = ("PATH", "HOME", "CUDA_HOME", "MAX_JOBS", "TWINE_USERNAME", "API", "KEY", "TOK")


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_a_name_with_token_password_secret_api_key_or_credential_is_a_secret(name: str) -> None:
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
