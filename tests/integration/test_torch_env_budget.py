"""The torch environments' budget across processes (release.toolchain.envcache): one that
another process builds with is never pruned, and is once that process has ended; and
`release doctor` shows what each part of the cache holds and the budget with its source.
Environments here are directories of one file; nothing is installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from release.toolchain import envcache

ROOT = Path(__file__).resolve().parents[2]
RELEASE = Path(sys.executable).with_name("release")

HOLDER = """\
import sys
from pathlib import Path
from release.toolchain import envcache
envcache.hold(Path(sys.argv[1]), sys.argv[2])
print("held", flush=True)
sys.stdin.read()  # until the test closes it
"""


def environment(toolchains: Path, name: str, size: int) -> Path:
    root = toolchains / name
    (root / "venv").mkdir(parents=True)
    (root / "venv" / "libtorch_cpu.so").write_bytes(b"\0" * size)
    return root


def test_an_environment_another_process_builds_with_is_pruned_only_after_it(
    tmp_path: Path,
) -> None:
    toolchains = tmp_path / "toolchains"
    used = environment(toolchains, "torch-2.11.0-cu130-py3.11-aaaa", 100_000)
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(toolchains), used.name],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as holder:  # fmt: skip
        assert holder.stdout is not None
        assert holder.stdin is not None
        assert holder.stdout.readline().strip() == "held"
        pruned = envcache.prune(toolchains, budget=0)
        assert [e.path for e in pruned.in_use] == [used]
        assert pruned.deleted == ()
        assert used.is_dir()
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    pruned = envcache.prune(toolchains, budget=0)
    assert [e.path for e in pruned.deleted] == [used]
    assert not used.exists()


def test_doctor_shows_the_cache_by_part_and_the_budget_with_its_source(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    environment(cache / "toolchains", "torch-2.11.0-cu130-py3.11-aaaa", 3 * 2**20)
    (cache / "wheels" / "key").mkdir(parents=True)
    (cache / "wheels" / "key" / "k3.whl").write_bytes(b"\0" * 2**20)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "RELEASE_CACHE_DIR": str(cache),
        "RELEASE_TORCH_ENV_BUDGET": "10GiB",
    }
    done = subprocess.run(
        [str(RELEASE), "doctor", "--json", "--matrix", str(ROOT / "matrix.yaml")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    usage = json.loads(done.stdout)["cache_usage"]
    parts = {p["part"]: p for p in usage["parts"]}
    assert list(parts) == [
        "toolchains", "torch environments", "wheels", "compile cache", "device code"
    ]  # fmt: skip
    assert parts["torch environments"]["entries"] == 1
    assert parts["torch environments"]["bytes"] >= 3 * 2**20
    assert parts["torch environments"]["path"] == str(cache / "toolchains")
    assert parts["toolchains"]["bytes"] < 2**20  # the environment is not counted twice
    assert parts["wheels"]["bytes"] >= 2**20
    assert usage["torch_environments_budget"] == {
        "budget": 10 * 2**30,
        "source": "$RELEASE_TORCH_ENV_BUDGET",
    }
    text = subprocess.run(
        [str(RELEASE), "doctor", "--matrix", str(ROOT / "matrix.yaml")],
        capture_output=True, text=True, env={**env, "COLUMNS": "200"}, cwd=ROOT, timeout=120,
        check=False,
    )  # fmt: skip
    assert f"cache in {cache}" in text.stdout
    assert "in 1 environment (budget 10 GiB, $RELEASE_TORCH_ENV_BUDGET;" in text.stdout


def test_a_budget_that_is_no_size_stops_doctor_naming_the_variable(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "RELEASE_CACHE_DIR": str(tmp_path / "cache"),
        "RELEASE_TORCH_ENV_BUDGET": "lots",
    }
    done = subprocess.run(
        [str(RELEASE), "doctor", "--matrix", str(ROOT / "matrix.yaml")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "error: RELEASE_TORCH_ENV_BUDGET: 'lots' is not a size" in done.stderr
    assert "Traceback" not in done.stderr
