"""The torch environments kept within their budget (release.toolchain.envcache): the budget
as $RELEASE_TORCH_ENV_BUDGET says it, the least recently used pruned first, never one a
build holds. Environments here are directories of a few files; locks are this process's."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from release.errors import ConfigError
from release.toolchain import envcache
from release.toolchain.envcache import (
    DEFAULT_BUDGET,
    Environment,
    budget_of,
    parse_size,
    pruning_order,
    shown_size,
)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("16GiB", 16 * 2**30),
        ("500MB", 500 * 10**6),
        ("1.5 G", 1_500_000_000),
        ("2048", 2048),
        ("0", 0),
        ("none", None),
        ("Unlimited", None),
    ],
)
def test_a_budget_is_a_size_or_none(text: str, size: int | None) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["9" * 400, "1e999", "nan GiB"])
def test_a_size_past_any_disk_is_no_size(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a size"):
        parse_size(text)


def test_a_budget_that_is_no_size_is_a_config_error_naming_the_variable() -> None:
    with pytest.raises(ConfigError) as caught:
        budget_of({"RELEASE_TORCH_ENV_BUDGET": "twenty gigs"})
    assert caught.value.problems[0].startswith("RELEASE_TORCH_ENV_BUDGET: 'twenty gigs'")
    assert budget_of({}).size == DEFAULT_BUDGET
    assert budget_of({}).source == "default"
    assert budget_of({"RELEASE_TORCH_ENV_BUDGET": "8GiB"}).source == "$RELEASE_TORCH_ENV_BUDGET"
    assert shown_size(DEFAULT_BUDGET) == "16 GiB"


def test_pruning_goes_from_the_least_recently_used() -> None:
    old = Environment(path=Path("torch-a"), size=5, last_used=100.0)
    new = Environment(path=Path("torch-b"), size=5, last_used=200.0)
    never = Environment(path=Path("torch-c"), size=5, last_used=0.0)
    assert pruning_order([new, old, never]) == [never, old, new]


def environment(cache: Path, name: str, size: int, used: float) -> Path:
    root = cache / name
    (root / "venv").mkdir(parents=True)
    (root / "venv" / "torch.so").write_bytes(b"\0" * size)
    use = envcache.use_file(cache, name)
    use.touch()
    os.utime(use, (used, used))
    return root


def test_prune_deletes_the_least_recently_used_until_the_rest_fit(tmp_path: Path) -> None:
    oldest = environment(tmp_path, "torch-2.11.0-cu130-py3.11-a", 200_000, 1000.0)
    middle = environment(tmp_path, "torch-2.12.0-cu130-py3.11-b", 200_000, 2000.0)
    newest = environment(tmp_path, "torch-2.14.1-cu130-py3.11-c", 200_000, 3000.0)
    each = envcache.size_of(newest)
    pruned = envcache.prune(tmp_path, budget=2 * each)
    assert [e.path for e in pruned.deleted] == [oldest]
    assert not oldest.exists()
    assert middle.is_dir()
    assert newest.is_dir()
    assert pruned.remaining == 2 * each
    assert envcache.prune(tmp_path, budget=None).deleted == ()


def test_prune_never_deletes_an_environment_a_build_holds(tmp_path: Path) -> None:
    held = environment(tmp_path, "torch-2.11.0-cu130-py3.11-a", 100_000, 1000.0)
    other = environment(tmp_path, "torch-2.14.1-cu130-py3.11-b", 100_000, 2000.0)
    # a build holds it as `hold` does, on a file description of its own
    handle = os.open(envcache.use_file(tmp_path, held.name), os.O_RDWR)
    fcntl.flock(handle, fcntl.LOCK_SH)
    try:
        pruned = envcache.prune(tmp_path, budget=0)
        assert [e.path for e in pruned.deleted] == [other]
        assert [e.path for e in pruned.in_use] == [held]
        assert held.is_dir()
    finally:
        os.close(handle)
    assert [e.path for e in envcache.prune(tmp_path, budget=0).deleted] == [held]


def test_holding_an_environment_marks_it_used_now_and_in_use(tmp_path: Path) -> None:
    stale = environment(tmp_path, "torch-2.11.0-cu130-py3.11-a", 10, 1000.0)
    envcache.hold(tmp_path, stale.name)  # held by this process until it exits
    (found,) = envcache.environments(tmp_path)
    assert found.last_used > 1000.0
    assert [e.path for e in envcache.prune(tmp_path, budget=0).in_use] == [stale]
