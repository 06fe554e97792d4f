"""The pure core of `release plan`: states, tag check, verdict and Markdown."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.commands.plan import markdown, summary
from release.destinations.decide import RemoteFile, decide
from release.downstream.nccl import override_files
from release.errors import ConfigError, ConflictError, PublishError, ToolchainError
from release.matrix import Cell, load_matrix
from release.publish.plan import (
    PlanRow,
    ReleasePlan,
    State,
    ToolchainVerdict,
    built_state,
    failure,
    gate_lines,
    tag_problems,
    unbuilt_entry,
    unbuilt_state,
)

ROOT = Path(__file__).resolve().parents[2]
OK = ToolchainVerdict(ok=True, text="nvcc (from PyPI)")


@pytest.fixture(scope="module")
def cells() -> tuple[Cell, ...]:
    return load_matrix(ROOT / "matrix.yaml").cells


def remote(sha256: str | None, *, state: str = "uploaded") -> RemoteFile:
    return RemoteFile(name="w.whl", size=10, sha256=sha256, url="https://x/w.whl", state=state)


def row(state: State, *, toolchain: ToolchainVerdict = OK, wheel: str = "w.whl") -> PlanRow:
    return PlanRow(
        cell="13.0-x86_64",
        wheel=wheel,
        built=state not in (State.ABSENT, State.PRESENT),
        size=None,
        destination="pypi (pypi)",
        url="https://x/w.whl",
        state=state,
        reason="",
        toolchain=toolchain,
    )


def plan(*rows: PlanRow, problems: tuple[str, ...] = ()) -> ReleasePlan:
    return ReleasePlan(project="k3-kernels", version="0.1.0", rows=rows, nccl=(), problems=problems)


def test_unbuilt_entry_carries_the_cells_name_and_destination(cells: tuple[Cell, ...]) -> None:
    cell = next(c for c in cells if c.local_label)
    entry = unbuilt_entry(cell)
    assert (
        entry.filename
        == cell.wheel_filename
        == ("k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl")
    )
    assert (entry.destination.kind, entry.destination.tag) == ("github", "k3-kernels-v0.1.0")
    assert (entry.size, entry.sha256) == (0, "")


def test_built_states_follow_the_publishers_decision(cells: tuple[Cell, ...]) -> None:
    entry = unbuilt_entry(cells[0])
    built = type(entry)(**{**vars(entry), "size": 10, "sha256": "a" * 64})

    def state(found: RemoteFile | None, refusal: str | None = None) -> tuple[State, str]:
        return built_state(decide(built, found, refusal=refusal, replace=False, url="u"))

    assert state(None) == (State.NEW, "")
    assert state(remote("a" * 64)) == (State.IDENTICAL, "")
    conflict, reason = state(remote("b" * 64))
    assert conflict is State.CONFLICT
    assert "bbbbbbbbbbbb" in reason
    assert state(remote(None, state="starter"))[0] is State.NEW
    assert state(None, refusal="local version") == (State.REFUSED, "local version")


def test_unbuilt_states() -> None:
    assert unbuilt_state(None) == (State.ABSENT, "")
    assert unbuilt_state(remote("a" * 64)) == (State.PRESENT, "")
    assert unbuilt_state(remote(None, state="starter"))[0] is State.ABSENT


def test_tag_must_be_the_release_tag_of_the_version(cells: tuple[Cell, ...]) -> None:
    assert tag_problems(cells, "0.1.0", "k3-kernels-v0.1.0") == []
    assert tag_problems(cells, "0.1.0", "v0.1.0") == [
        "--expect-tag v0.1.0: the GitHub release of version 0.1.0 is tagged k3-kernels-v0.1.0"
    ]
    pypi_only = [c for c in cells if c.destination.kind == "pypi"]
    assert tag_problems(pypi_only, "0.1.0", "v0.1.0") == []
    assert tag_problems(pypi_only, "0.1.0", "v0.2.0") != []


def test_verdict_conflict_first_then_toolchain_then_refused_then_tag() -> None:
    missing = ToolchainVerdict(ok=False, text="missing: no PyPI toolchain for CUDA 12.8")
    assert failure(plan(row(State.NEW), row(State.IDENTICAL), row(State.PRESENT))) is None
    everything = plan(
        row(State.CONFLICT, wheel="a.whl"),
        row(State.REFUSED, wheel="b.whl"),
        row(State.ABSENT, toolchain=missing),
        problems=("tag",),
    )
    error = failure(everything)
    assert isinstance(error, ConflictError)
    assert error.message == (
        "1 CONFLICT (a.whl); 1 missing toolchain (13.0-x86_64); 1 refused (b.whl)"
    )
    assert isinstance(failure(plan(row(State.NEW, toolchain=missing))), ToolchainError)
    refused = failure(plan(row(State.REFUSED)))
    assert isinstance(refused, PublishError)
    assert not isinstance(refused, ConflictError)
    assert isinstance(failure(plan(row(State.NEW), problems=("bad tag",))), ConfigError)


def test_summary_and_markdown_name_every_state_and_file() -> None:
    result = ReleasePlan(
        project="k3-kernels",
        version="0.1.0",
        rows=(row(State.NEW), row(State.CONFLICT, wheel="a|b.whl")),
        nccl=tuple(override_files({12: "2.30.7"}))[:1],
    )
    assert summary(result) == "2 cells, 2 built: 1 new, 1 CONFLICT"
    text = markdown(result)
    assert text.startswith("## Release plan: k3-kernels 0.1.0\n")
    assert "| a\\|b.whl |" in text
    assert "- `cu12.txt`: `nvidia-nccl-cu12==2.30.7` (uv override)" in text


def test_without_gpu_runners_the_plan_says_no_gpu_gate_ran() -> None:
    text = markdown(plan(row(State.NEW)))
    assert "no GPU gate ran" in text


def test_the_plan_shows_what_each_gpu_runner_tests(tmp_path: Path) -> None:
    gated = tmp_path / "matrix.yaml"
    gated.write_text(
        (ROOT / "matrix.yaml").read_text().replace("project: csrc", f"project: {ROOT / 'csrc'}")
        + "gpu-gate:\n  runners: [{labels: [gpu-h200], sms: [90]}]\n"
        "  command: run-gpu-tests {wheel} {expect_arch}\n"
    )
    matrix = load_matrix(gated)
    lines = gate_lines(matrix.gpu_gate, matrix.cells)
    assert [(g.runner.name, g.runner.arch) for g in lines] == [("gpu-h200", "x86_64")]
    assert [str(sm) for sm in lines[0].runner.sms] == ["90"]
    assert lines[0].runs == (
        "13.0-x86_64 cubin",
        "13.0-x86_64 ptx (compute_75)",
        "12.9-x86_64 cubin",
        "12.9-x86_64 ptx (compute_75)",
    )
    shown = ReleasePlan(project="k", version="1", rows=(), nccl=(), gate=lines)
    text = markdown(shown)
    assert "no GPU gate ran" not in text
    assert "gpu-h200 (x86_64, sm 90): 13.0-x86_64 cubin, 13.0-x86_64 ptx (compute_75)" in text
