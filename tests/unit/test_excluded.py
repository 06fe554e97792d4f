"""What an exclusion saved: the excluded SM weighed in a sibling cell of the same build."""

from __future__ import annotations

from pathlib import Path

from release.building.excluded import ExcludedSm, excluded_sms, weight
from release.building.settings import CellResult
from release.inspection.wheel import WheelReport
from release.matrix import load_matrix
from release.targets import GpuTarget

SHAPED = Path(__file__).parent.parent / "data" / "matrix" / "good" / "shipped-shape.yaml"
CELLS = {c.id: c for c in load_matrix(SHAPED).cells}  # 12.9-aarch64 has no sm_75


def result(cell_id: str, sm_75: int | None, *, ok: bool = True) -> CellResult:
    sizes = ((("sm_75", sm_75),) if sm_75 is not None else ()) + (("sm_80", 5000),)
    report = WheelReport(
        filename=f"{cell_id}.whl", size=1, sha256="0", sms=(), ptx=(), device_bytes=sizes
    )
    return CellResult(cell=CELLS[cell_id], ok=ok, seconds=0.0, report=report if ok else None)


def test_the_excluded_sm_is_weighed_in_the_same_cuda_version_first() -> None:
    results = [
        result("13.0-aarch64", 900_000),
        result("12.9-x86_64", 825_488),
        result("12.9-aarch64", None),
    ]
    assert excluded_sms(results) == [
        ExcludedSm(
            cell="12.9-aarch64", sm=GpuTarget(75), sibling="12.9-x86_64", sibling_bytes=825_488
        )
    ]
    assert excluded_sms(results)[0].line() == (
        "12.9-aarch64: sm_75 excluded (its device code weighs 806 KiB in 12.9-x86_64)"
    )


def test_else_in_the_same_arch_and_else_it_is_said_to_be_unweighed() -> None:
    failed_sibling = [
        result("12.9-x86_64", None, ok=False),
        result("13.0-aarch64", 1_300_000),
        result("12.9-aarch64", None),
    ]
    (item,) = excluded_sms(failed_sibling)
    assert (item.sibling, item.sibling_bytes) == ("13.0-aarch64", 1_300_000)
    assert item.line().endswith("weighs 1.2 MiB in 13.0-aarch64)")
    (alone,) = excluded_sms([result("12.9-aarch64", None)])
    assert (
        alone.line() == "12.9-aarch64: sm_75 excluded (not weighed: no cell of this build has it)"
    )
    assert alone.as_json() == {"sm": "75", "sibling": None, "sibling_bytes": None}


def test_cells_without_an_exclusion_say_nothing() -> None:
    assert excluded_sms([result("13.0-x86_64", 1), result("12.9-x86_64", 2)]) == []


def test_weight_switches_to_mib_at_one_mib() -> None:
    assert weight(2**20 - 1) == "1024 KiB"
    assert weight(2**20) == "1.0 MiB"
