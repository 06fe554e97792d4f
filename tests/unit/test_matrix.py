"""matrix.yaml: every validation rule, on malformed files under tests/data/matrix/bad."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.cli import main
from release.errors import ConfigError
from release.matrix import GithubDestination, PypiDestination, load_matrix
from release.targets import CudaVersion, GpuTarget

DATA = Path(__file__).parent.parent / "data" / "matrix"
BAD = sorted((DATA / "bad").glob("*.yaml"))
REPO = Path(__file__).resolve().parents[2]


def expectations(path: Path) -> list[str]:
    return [
        line.removeprefix("# expect: ")
        for line in path.read_text().splitlines()
        if line.startswith("# expect: ")
    ]


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_matrix_reports_file_line_and_key_path(path: Path) -> None:
    expected = expectations(path)
    assert expected, f"{path.name} states no expected error"
    with pytest.raises(ConfigError) as caught:
        load_matrix(path)
    problems = caught.value.problems
    for line in expected:
        assert any(p.startswith(line) for p in problems), (
            f"expected a problem starting with\n  {line}\ngot\n  " + "\n  ".join(problems)
        )


def test_every_problem_is_one_line_with_a_position() -> None:
    for path in BAD:
        with pytest.raises(ConfigError) as caught:
            load_matrix(path)
        for problem in caught.value.problems:
            assert "\n" not in problem
            assert problem.startswith(f"{path.name}:"), problem


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        load_matrix(DATA / "bad" / "local-labels.yaml")
    assert len(caught.value.problems) == 3


def test_shipped_matrix_has_four_cells_with_the_right_filenames() -> None:
    matrix = load_matrix(REPO / "matrix.yaml")
    version = matrix.project.version
    assert matrix.project.name == "k3-kernels"
    by_id = {c.id: c for c in matrix.cells}
    assert set(by_id) == {"13.0-x86_64", "13.0-aarch64", "12.9-x86_64", "12.9-aarch64"}
    assert by_id["13.0-x86_64"].wheel_filename == (
        f"k3_kernels-{version}-py3-none-manylinux_2_28_x86_64.whl"
    )
    assert by_id["12.9-aarch64"].wheel_filename == (
        f"k3_kernels-{version}+cu129-py3-none-manylinux_2_28_aarch64.whl"
    )
    for cell in matrix.cells:
        assert [str(s) for s in cell.sms] == ["75", "80", "86", "89", "90", "100"]
        assert str(cell.ptx) == "100"
        assert str(cell.nccl) == "2.30.7"
    assert isinstance(by_id["13.0-x86_64"].destination, PypiDestination)
    assert isinstance(by_id["12.9-x86_64"].destination, GithubDestination)
    assert matrix.nccl_pins() == {12: by_id["12.9-x86_64"].nccl, 13: by_id["13.0-x86_64"].nccl}


def test_exclusion_drops_one_sm_for_one_arch_and_unquoted_versions_load() -> None:
    matrix = load_matrix(DATA / "good" / "shipped-shape.yaml")
    sms = {c.id: [str(s) for s in c.sms] for c in matrix.cells}
    assert sms["12.9-aarch64"] == ["80", "86", "89", "90", "100"]
    assert sms["12.9-x86_64"] == ["75", "80", "86", "89", "90", "100"]
    assert sms["13.0-aarch64"][0] == "75"
    github = matrix.cells[-1].destination
    assert isinstance(github, GithubDestination)
    assert github.index_url == "https://k3-project.github.io/k3-kernels/"
    assert github.tag(matrix.project.version) == "v0.1.0"


def test_missing_file_names_the_remedy(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_matrix(tmp_path / "matrix.yaml")
    assert "no such file" in caught.value.message
    assert caught.value.hint is not None
    assert "--matrix" in caught.value.hint


@pytest.mark.parametrize(
    ("held", "problem"),
    [
        (None, "sgl_tiny/VERSION: no such file: the prepare step's version-file is where"),
        ("\n", "sgl_tiny/VERSION:1: an empty file: "),
        ("v1 beta\n", "sgl_tiny/VERSION:1: version 'v1 beta' is not PEP 440"),
    ],
)
def test_a_version_files_problem_is_reported_at_its_key(
    tmp_path: Path, held: str | None, problem: str
) -> None:
    project = tmp_path / "sgl_tiny"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "sgl-tiny"\ndynamic = ["version"]\n', encoding="utf-8"
    )
    if held is not None:
        (project / "VERSION").write_text(held, encoding="utf-8")
    (tmp_path / "matrix.yaml").write_text(
        "project: sgl_tiny\n"
        "build:\n"
        "  prepare: {command: bash stage.sh, version-file: sgl_tiny/VERSION, output: build}\n"
        'defaults: {arches: [x86_64], manylinux: "2_28", sms: [80]}\n'
        'cuda: {"13.0": {destination: pypi}}\n'
        "destinations: {pypi: {kind: pypi}}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_matrix(tmp_path / "matrix.yaml")
    (reported,) = caught.value.problems
    assert reported.startswith("matrix.yaml:3:51: build.prepare.version-file: "), reported
    assert f"{tmp_path}/{problem}" in reported


@pytest.mark.parametrize(
    ("text", "number", "suffix"),
    [("90a", 90, "a"), ("sm_100f", 100, "f"), ("compute_75", 75, ""), (" 120 ", 120, "")],
)
def test_gpu_target_parse(text: str, number: int, suffix: str) -> None:
    assert GpuTarget.parse(text) == GpuTarget(number, suffix)


def test_cuda_version_orders_numerically() -> None:
    assert CudaVersion.parse("12.10") > CudaVersion.parse("12.9")
    with pytest.raises(ValueError, match=r"MAJOR\.MINOR"):
        CudaVersion.parse("13")


def test_cli_exit_code_and_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["matrix", "--matrix", str(DATA / "bad" / "ptx.yaml")])
    assert code == ConfigError.exit_code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert lines[0].startswith("error: ptx.yaml:")
    assert lines[-1].startswith("hint: ")


def test_filters_that_match_nothing_name_what_exists(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["matrix", "--matrix", str(REPO / "matrix.yaml"), "--cuda", "12.8"])
    assert code == ConfigError.exit_code
    assert "no cell has CUDA 12.8" in capsys.readouterr().err


def test_github_format_is_a_valid_strategy_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    for per in ("cell", "cuda"):
        assert (
            main(
                [
                    "matrix",
                    "--matrix",
                    str(REPO / "matrix.yaml"),
                    "--format",
                    "github",
                    "--per",
                    per,
                ]
            )
            == 0
        )
        out = capsys.readouterr().out
        assert out.count("\n") == 1, "the output must be one compact line for $GITHUB_OUTPUT"
        data = json.loads(out)
        assert set(data) == {"include"}
        include = data["include"]
        assert 0 < len(include) <= 256
        for entry in include:
            for key, value in entry.items():
                assert isinstance(key, str)
                assert isinstance(value, str | int | float | bool), (key, value)
        if per == "cell":
            assert len(include) == 4
            assert {e["arch"] for e in include} == {"x86_64", "aarch64"}
        else:
            assert [e["cuda"] for e in include] == ["13.0", "12.9"]


def test_filters_select_cells(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "matrix",
                "--matrix",
                str(REPO / "matrix.yaml"),
                "--format",
                "json",
                "--cuda",
                "12.9",
                "--arch",
                "aarch64",
            ]
        )
        == 0
    )
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert [c["wheel"] for c in cells] == [
        "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_aarch64.whl"
    ]


GATE = """
gpu-gate:
  runners:
    - {labels: [self-hosted, linux, h200], sms: [90]}
    - {labels: [self-hosted, arm64, gh200], sms: [90], arch: aarch64}
  command: bash csrc/tests/gpu/run_on_device.sh {wheel} {expect_arch} -k 'not slow'
"""


def gated_matrix(tmp_path: Path) -> Path:
    text = (REPO / "matrix.yaml").read_text().replace("project: csrc", f"project: {REPO / 'csrc'}")
    path = tmp_path / "matrix.yaml"
    path.write_text(text + GATE)
    return path


def test_a_gpu_gate_tests_each_cell_of_the_runner_arch_as_built_and_ptx_only(
    tmp_path: Path,
) -> None:
    matrix = load_matrix(gated_matrix(tmp_path))
    gate = matrix.gpu_gate
    assert gate is not None
    runner = gate.runner("self-hosted/arm64/gh200")
    runs = gate.runs(runner, matrix.cells)
    assert [(r.cell.id, r.build, r.expect_arch) for r in runs] == [
        ("13.0-aarch64", "cubin", ""),
        ("13.0-aarch64", "ptx", "750"),
        ("12.9-aarch64", "cubin", ""),
        ("12.9-aarch64", "ptx", "750"),
    ]
    ptx = runs[1].built_cell
    assert ptx.sms == ()
    assert ptx.ptx == GpuTarget(75)
    assert ptx.wheel_filename == runs[0].cell.wheel_filename
    words = gate.command_line(runs[1], Path("/runner/a dir/k3 kernels.whl"))
    assert words == [
        "bash",
        "csrc/tests/gpu/run_on_device.sh",
        "/runner/a dir/k3 kernels.whl",
        "750",
        "-k",
        "not slow",
    ]
    with pytest.raises(ConfigError, match="no GPU runner 'h100'"):
        gate.runner("h100")


def test_gpu_format_lists_one_job_per_runner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["matrix", "--matrix", str(gated_matrix(tmp_path)), "--format", "gpu"]) == 0
    include = json.loads(capsys.readouterr().out)["include"]
    assert include == [
        {
            "runner": "self-hosted/linux/h200",
            "labels": ["self-hosted", "linux", "h200"],
            "arch": "x86_64",
            "sms": "90",
        },
        {
            "runner": "self-hosted/arm64/gh200",
            "labels": ["self-hosted", "arm64", "gh200"],
            "arch": "aarch64",
            "sms": "90",
        },
    ]
    assert main(["matrix", "--matrix", str(REPO / "matrix.yaml"), "--format", "gpu"]) == 0
    assert json.loads(capsys.readouterr().out) == {"include": []}


def test_an_enterprise_destination_with_a_tag_that_needs_quoting_loads(tmp_path: Path) -> None:
    shipped = (DATA / "good" / "shipped-shape.yaml").read_text(encoding="utf-8")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "pyproject.toml").write_text(
        '[project]\nname = "k3-kernels"\nversion = "0.1.0"\n', encoding="utf-8"
    )
    enterprise = (
        "  github: {kind: github, repository: k3-project/k3-kernels, "
        'tag: "release/v{version}+cu129", api-url: "https://ghe.example.com/api/v3/"}\n'
    )
    lines = [enterprise if "kind: github" in line else line for line in shipped.splitlines(True)]
    path = tmp_path / "matrix.yaml"
    path.write_text("".join(lines).replace("../project", "project"), encoding="utf-8")
    matrix = load_matrix(path)
    github = matrix.cells[-1].destination
    assert isinstance(github, GithubDestination)
    assert github.api_url == "https://ghe.example.com/api/v3"
    assert github.tag(matrix.project.version) == "release/v0.1.0+cu129"


def test_compress_mode_per_cuda_version_over_the_defaults_and_what_an_exclusion_removed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = DATA / "good" / "size-levers.yaml"
    matrix = load_matrix(path)
    by_id = {c.id: c for c in matrix.cells}
    assert {i: c.compress_mode for i, c in by_id.items()} == {
        "13.0-x86_64": "none",
        "13.0-aarch64": "none",
        "12.9-x86_64": "size",
        "12.9-aarch64": "size",
    }
    # 12.9's own sms have no 75: the exclusion removed it from 13.0's aarch64 cell only
    assert {i: [str(s) for s in c.excluded_sms] for i, c in by_id.items()} == {
        "13.0-x86_64": [],
        "13.0-aarch64": ["75"],
        "12.9-x86_64": [],
        "12.9-aarch64": [],
    }
    assert main(["matrix", "--matrix", str(path), "--json"]) == 0
    cells = {c["id"]: c for c in json.loads(capsys.readouterr().out)["cells"]}
    assert cells["13.0-aarch64"]["excluded_sms"] == ["75"]
    assert cells["13.0-aarch64"]["compress_mode"] == "none"
    assert "excluded_sms" not in cells["13.0-x86_64"]
    assert main(["matrix", "--matrix", str(path), "--format", "github"]) == 0
    include = json.loads(capsys.readouterr().out)["include"]
    assert [e["compress_mode"] for e in include] == ["none", "none", "size", "size"]


def test_matrix_table_shows_the_excluded_sms_and_compress_mode_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # stacked rows: one `column: value` line each
    assert main(["matrix", "--matrix", str(DATA / "good" / "size-levers.yaml")]) == 0
    rows = capsys.readouterr().out.split("\n\n")
    aarch64 = next(r for r in rows if "CUDA:        13.0" in r and "aarch64" in r)
    assert "SMs:         80 90\nexcluded:    75\nPTX:         90\ncompress:    none" in aarch64
    x86_64 = next(r for r in rows if "CUDA:        12.9" in r and "x86_64" in r)
    assert "excluded:    -\n" in x86_64
    assert "compress:    size\n" in x86_64


def test_cells_without_device_code_say_so_in_every_listing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(DATA / "good" / "host-only.yaml")
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["matrix", "--matrix", path]) == 0
    rows = capsys.readouterr().out.split("\n\n")
    cell = next(r for r in rows if "CUDA:        13.0" in r and "aarch64" in r)
    assert "SMs:         no device code\nPTX:         -\n" in cell
    assert main(["matrix", "--matrix", path, "--json"]) == 0
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert [(c["sms"], c["ptx"], c["device_code"]) for c in cells] == [([], None, "none")] * 2
    assert main(["matrix", "--matrix", path, "--format", "github"]) == 0
    include = json.loads(capsys.readouterr().out)["include"]
    assert [(e["sms"], e["device_code"]) for e in include] == [("", "none")] * 2


def torch_matrix(tmp_path: Path, minors: int) -> Path:
    """A torch project's matrix of `minors` torch versions x 4 Pythons x 2 arches."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text(
        '[project]\nname = "wide"\nversion = "1.0.0"\n'
        '[build-system]\nrequires = ["setuptools", "torch"]\n'
        'build-backend = "setuptools.build_meta"\n'
    )
    torch = ", ".join(f'"2.{minor}.0"' for minor in range(minors))
    path = tmp_path / "matrix.yaml"
    path.write_text(
        "project: proj\n"
        "build: {backend: torch}\n"
        "defaults:\n"
        "  arches: [x86_64, aarch64]\n"
        "  sms: [90]\n"
        "  ptx: 90\n"
        '  manylinux: "2_34"\n'
        '  python: ["3.10", "3.11", "3.12", "3.13"]\n'
        "cuda:\n"
        f'  "13.0": {{destination: gh, torch: [{torch}], local-label: "cu130torch{{torch}}"}}\n'
        "destinations:\n"
        "  gh: {kind: github, repository: o/r}\n"
    )
    return path


def test_a_github_matrix_over_the_job_limit_is_refused_naming_the_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = torch_matrix(tmp_path, minors=33)  # 33 x 4 x 2 = 264 cells
    assert main(["matrix", "--matrix", str(path), "--format", "github"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "error: --format github: 264 jobs (one per cell), over GitHub Actions' limit of 256 "
        "jobs in one matrix",
        "hint: split the cells over several jobs' matrices with --cuda and --arch, or give a "
        "job a CUDA version's cells with --per cuda",
    ]
    # one arch's half fits, and --per cuda names each arch once
    assert main(["matrix", "--matrix", str(path), "--format", "github", "--arch", "x86_64"]) == 0
    assert len(json.loads(capsys.readouterr().out)["include"]) == 132
    assert main(["matrix", "--matrix", str(path), "--format", "github", "--per", "cuda"]) == 0
    (job,) = json.loads(capsys.readouterr().out)["include"]
    assert job["arches"] == "x86_64 aarch64"
