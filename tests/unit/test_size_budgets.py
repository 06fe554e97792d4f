"""Project-size budgets per destination and wheel growth since the previous release: the
pure parts (the matrix keys, the budget, the plan's refusal, matching and growth)."""

from __future__ import annotations

import json
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from release.errors import ConfigError, FileError, PublishError
from release.inspection.budget import (
    ProjectLoad,
    project_refusal,
    project_warning,
    release_loads,
    size_text,
)
from release.matrix import GithubDestination, PypiDestination, load_matrix
from release.publish.growth import (
    Growth,
    growth_by_wheel,
    growth_problem,
    match_key,
    read_previous,
)
from release.publish.plan import ReleasePlan, failure
from release.publish.run import DestinationPlan, blocked_error, plan_destination
from release.records.manifest import Manifest, WheelEntry, from_json, to_json
from release.records.release_manifest import PreviousRelease, ReleaseWheel, release_manifest_bytes
from tests.integration.wheels import entry_for, github_destination, make_wheel, pypi_destination
from tests.unit.test_publish_plan import FakeDestination

REPO = Path(__file__).resolve().parents[2]
GIB = 2**30


def big(entry: WheelEntry, size: int, **device: int) -> WheelEntry:
    return replace(entry, size=size, device_bytes=tuple(device.items()))


def wheels(tmp_path: Path) -> list[WheelEntry]:
    destination = replace(pypi_destination("http://127.0.0.1:1/"), max_project_size=10 * GIB)
    x86 = entry_for(make_wheel(tmp_path, platform="manylinux_2_28_x86_64"), destination)
    arm = entry_for(make_wheel(tmp_path, platform="manylinux_2_28_aarch64"), destination)
    return [
        big(x86, 6 * GIB, sm_100=3 * GIB, sm_90=2 * GIB, sm_75=GIB // 2),
        big(arm, 4 * GIB, sm_100=2 * GIB),
    ]


def test_a_release_within_the_project_limit_is_neither_refused_nor_warned(
    tmp_path: Path,
) -> None:
    load = ProjectLoad(destination="pypi", limit=20 * GIB, wheels=tuple(wheels(tmp_path)), held=0)
    assert project_refusal(load) is None
    assert project_warning(load) is None


def test_past_the_limit_names_the_heaviest_wheels_their_sms_and_the_remedy(
    tmp_path: Path,
) -> None:
    load = ProjectLoad(destination="pypi", limit=10 * GIB, wheels=tuple(wheels(tmp_path)), held=GIB)
    refusal = project_refusal(load)
    assert refusal is not None
    assert refusal.startswith("pypi: the project would hold 11.00 GiB, over its 10.00 GiB")
    assert "plus the 1.00 GiB pypi already holds" in refusal
    # the heaviest wheel first, with its heaviest targets
    x86 = refusal.index("x86_64.whl 6.00 GiB (sm_100 3072.0 MiB, sm_90 2048.0 MiB")
    assert x86 < refusal.index("aarch64.whl 4.00 GiB")
    assert "`exclude`" in refusal
    assert "`max-project-size-gib`" in refusal
    assert project_warning(load) is None


def test_what_the_destination_holds_unknown_is_said_and_not_counted(tmp_path: Path) -> None:
    load = ProjectLoad(destination="pypi", limit=9 * GIB, wheels=tuple(wheels(tmp_path)))
    refusal = project_refusal(load)
    assert refusal is not None
    assert "what pypi already holds is not known and not counted" in refusal
    assert "would hold 10.00 GiB" in refusal


def test_past_ninety_percent_is_a_warning(tmp_path: Path) -> None:
    load = ProjectLoad(destination="pypi", limit=11 * GIB, wheels=tuple(wheels(tmp_path)), held=0)
    warning = project_warning(load)
    assert warning is not None
    assert "91% of its 11.00 GiB project limit" in warning
    assert project_refusal(load) is None


def test_release_loads_group_by_destination_and_skip_those_without_a_limit(
    tmp_path: Path,
) -> None:
    github = entry_for(
        make_wheel(tmp_path, version="0.1.0+cu129"), github_destination("http://127.0.0.1:1")
    )
    loads = release_loads([*wheels(tmp_path), github])
    assert [(load.destination, load.sending) for load in loads] == [("pypi", 10 * GIB)]


def test_size_text_picks_a_readable_unit() -> None:
    assert [size_text(n) for n in (812, 3 * 2**10, 5 * 2**20 + 2**19, 9 * GIB)] == [
        "812 bytes",
        "3.0 KiB",
        "5.5 MiB",
        "9.00 GiB",
    ]


def test_the_publish_plan_refuses_a_release_past_the_project_limit(tmp_path: Path) -> None:
    entries = [
        replace(e, destination=replace(e.destination, max_project_size=1000))
        for e in [entry_for(make_wheel(tmp_path), pypi_destination("http://127.0.0.1:1/"))]
    ]
    size = entries[0].size
    plan = plan_destination(
        FakeDestination({}, {}, held=1001 - size), entries, tmp_path, replace=False
    )
    assert plan.budget is not None
    assert "plus the 1001 bytes" not in plan.budget
    assert "over its 1000 bytes project limit" in plan.budget
    assert plan.blocked  # nothing is uploaded anywhere
    error = blocked_error([DestinationPlan(destination=entries[0].destination, plan=plan)])
    assert isinstance(error, PublishError)
    assert error.exit_code == 5
    assert "project limit" in error.message
    assert "nothing was uploaded" in error.message

    within = plan_destination(
        FakeDestination({}, {}, held=1000 - size), entries, tmp_path, replace=False
    )
    assert within.budget is None
    assert not within.blocked


def with_pypi_keys(text: str, *keys: str) -> str:
    assert "\n    kind: pypi\n" in text
    return text.replace(
        "\n    kind: pypi\n", "\n    kind: pypi\n" + "".join(f"    {k}\n" for k in keys)
    )


def test_the_matrix_gives_pypi_ten_gib_and_github_no_project_limit_unless_set(
    tmp_path: Path,
) -> None:
    text = (REPO / "matrix.yaml").read_text().replace("project: csrc", f"project: {REPO / 'csrc'}")
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    destinations = load_matrix(path).destinations
    pypi, github = destinations["pypi"], destinations["github"]
    assert isinstance(pypi, PypiDestination)
    assert pypi.max_project_size == 10 * GIB
    assert isinstance(github, GithubDestination)
    assert github.max_project_size is None
    assert pypi.max_growth_percent is None

    path.write_text(with_pypi_keys(text, "max-project-size-gib: 50", "max-growth-percent: 10"))
    pypi = load_matrix(path).destinations["pypi"]
    assert pypi.max_project_size == 50 * GIB
    assert pypi.max_growth_percent == 10


def test_a_limit_that_is_not_positive_is_an_error_with_its_line(tmp_path: Path) -> None:
    text = (REPO / "matrix.yaml").read_text().replace("project: csrc", f"project: {REPO / 'csrc'}")
    path = tmp_path / "matrix.yaml"
    path.write_text(with_pypi_keys(text, "max-growth-percent: 0"))
    with pytest.raises(ConfigError) as caught:
        load_matrix(path)
    (problem,) = caught.value.problems
    line = 2 + text.splitlines().index("    kind: pypi")
    assert problem.startswith(f"matrix.yaml:{line}:")
    assert "destinations.pypi.max-growth-percent: must be a positive number" in problem


def test_a_manifest_from_before_project_limits_gets_pypis(tmp_path: Path) -> None:
    entry = entry_for(make_wheel(tmp_path), pypi_destination("http://127.0.0.1:1/"))
    document = to_json(Manifest(project="k3-kernels", version="0.1.0", wheels=(entry,)))
    document["wheels"][0]["destination"].pop("max_project_size", None)
    assert from_json(document).wheels[0].destination.max_project_size == 10 * GIB
    set_limit = replace(entry, destination=replace(entry.destination, max_project_size=5))
    document = to_json(Manifest(project="k3-kernels", version="0.1.0", wheels=(set_limit,)))
    assert from_json(document).wheels[0].destination.max_project_size == 5


# --- Growth. ---


def previous_of(tmp_path: Path, version: str, *sizes: tuple[str, int]) -> PreviousRelease:
    entries = []
    for platform, size in sizes:
        wheel = make_wheel(tmp_path / version, version=version, platform=platform)
        entries.append(replace(entry_for(wheel, pypi_destination("http://x/")), size=size))
    manifest = Manifest(project="k3-kernels", version=version, wheels=tuple(entries))
    path = tmp_path / f"{version}.json"
    path.write_bytes(release_manifest_bytes(manifest))
    return read_previous(path)


def test_wheels_match_across_versions_by_everything_but_the_version() -> None:
    old = match_key(
        "k3_kernels-0.0.9+cu129-py3-none-manylinux_2_28_x86_64.whl",
        destination="github", arch="x86_64", local_label="cu129",
    )  # fmt: skip
    new = match_key(
        "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl",
        destination="github", arch="x86_64", local_label="cu129",
    )  # fmt: skip
    other_tag = match_key(
        "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_34_x86_64.whl",
        destination="github", arch="x86_64", local_label="cu129",
    )  # fmt: skip
    assert old == new != other_tag


def test_growth_per_wheel_against_the_previous_release(tmp_path: Path) -> None:
    previous = previous_of(
        tmp_path, "0.0.9", ("manylinux_2_28_x86_64", 1000), ("manylinux_2_28_aarch64", 2000)
    )
    assert previous.version == "0.0.9"
    x86 = replace(entry_for(make_wheel(tmp_path), pypi_destination("http://x/")), size=1250)
    other = entry_for(
        make_wheel(tmp_path, platform="manylinux_2_34_x86_64"), pypi_destination("http://x/")
    )
    grown = growth_by_wheel([x86, other], previous)
    assert set(grown) == {x86.filename}  # a wheel with no counterpart has no growth
    growth = grown[x86.filename]
    assert (growth.bytes, growth.percent, growth.text) == (250, 25.0, "+250 bytes (+25.0%)")
    assert growth.previous_wheel.startswith("k3_kernels-0.0.9-")

    problem = growth_problem(x86.filename, growth, limit=20, destination="pypi", previous="0.0.9")
    assert problem is not None
    assert problem.startswith(f"{x86.filename} grew +250 bytes (+25.0%) since 0.0.9")
    assert "over pypi's max-growth-percent of 20%" in problem
    assert growth_problem(x86.filename, growth, limit=25, destination="pypi", previous="") is None
    assert growth_problem(x86.filename, growth, limit=None, destination="pypi", previous="") is None
    shrunk = Growth(previous_wheel="a", previous_size=1000, size=900)
    assert shrunk.text == "-100 bytes (-10.0%)"


def test_a_plan_over_a_growth_limit_fails_as_a_refused_plan() -> None:
    plan = ReleasePlan(
        project="k3-kernels", version="0.1.0", rows=(), nccl=(), too_grown=("w grew",)
    )
    error = failure(plan)
    assert isinstance(error, PublishError)
    assert error.exit_code == 5
    assert error.message == "w grew"
    assert error.hint
    assert "max-growth-percent" in error.hint
    assert failure(replace(plan, too_grown=())) is None


def tag_version(template: str, tag: str) -> Version | None:
    destination = GithubDestination(
        name="github", repository="k3-org/k3", tag_template=template,
        api_url="https://api.github.com", index_url=None, max_file_size=1,
    )  # fmt: skip
    return destination.version_of_tag(tag)


def test_tag_versions_follow_the_tag_template() -> None:
    assert str(tag_version("v{version}", "v0.0.9")) == "0.0.9"
    assert str(tag_version("release-{version}-final", "release-1.2-final")) == "1.2"
    assert tag_version("v{version}", "nightly") is None
    assert tag_version("v{version}", "vnot-a-version") is None


def test_a_previous_manifest_is_read_within_a_documents_bound(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:
        handle.truncate(300 * 2**20)  # sparse: no disk, and 300 MiB if read whole
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="larger than 64 MiB"):
            read_previous(huge)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20
    with pytest.raises(FileError) as device:
        read_previous(Path("/dev/null"))  # a FIFO, /dev/zero: never opened, never read
    assert device.value.message.startswith("cannot read --previous-manifest /dev/null: ")
    assert "not a regular file" in device.value.message


def test_a_previous_manifest_that_is_not_one_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "release-manifest.json"
    path.write_text(json.dumps({"wheels": "no"}))
    with pytest.raises(ConfigError) as caught:
        read_previous(path)
    assert caught.value.problems[0].startswith(f"--previous-manifest {path}: not a release-")
    with pytest.raises(FileError) as missing:
        read_previous(tmp_path / "absent.json")
    assert "absent.json" in missing.value.message


def test_release_wheel_keeps_what_matching_needs(tmp_path: Path) -> None:
    entry = entry_for(make_wheel(tmp_path, version="0.1.0+cu129"), github_destination("http://x"))
    wheel = ReleaseWheel.of(entry)
    assert (wheel.destination, wheel.arch, wheel.local_label) == ("github", "x86_64", "cu129")
