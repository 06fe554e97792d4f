"""The rules of matrix.yaml that look at more than one value: GPU targets per CUDA version,
local labels, build sections (release.backends.recipe), rules across cells, and the GPU gate. Each
reports to the document loader, at the key path of the value it is about; release.matrix.load
and release.matrix.cells run them."""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from collections.abc import Mapping, Sequence

from packaging.version import Version

from release.backends import BuildRecipe, BuildSpec, merge, prepare_problems, spec_problems
from release.errors import shown
from release.matrix.model import GATE_PLACEHOLDERS, Cell, GpuGate, GpuRunner
from release.matrix.spec import MatrixSpec, PtxSpec
from release.targets import CudaVersion, GpuTarget, target_problem
from release.yamlspec import DocumentLoader, Position, join_path


def at(filename: str, position: Position | None) -> str:
    return f"{filename}:{position.line}:{position.column}" if position else filename


_GATE_PLACEHOLDERS = re.compile(r"\{([^{}]*)\}")


def gpu_gate(spec: MatrixSpec, loader: DocumentLoader, cells: Sequence[Cell]) -> GpuGate | None:
    gate = spec.gpu_gate
    if gate is None:
        return None
    placeholders = set(_GATE_PLACEHOLDERS.findall(gate.command))
    unknown = sorted(placeholders - set(GATE_PLACEHOLDERS))
    # a torch cell's wheel is installed for the command (release.building.gate); any other
    # cell's wheel reaches the tests through {wheel} only
    if "wheel" not in placeholders and any(c.torch is None for c in cells):
        loader.problem("gpu-gate.command", "the command must name the wheel as {wheel}")
    if unknown:
        loader.problem(
            "gpu-gate.command",
            f"unknown placeholder {{{shown(unknown[0])[1:-1]}}} "
            "(use {wheel}, {expect_arch}, {torch})",
        )
    try:
        shlex.split(gate.command)
    except ValueError as error:  # an unclosed quote: the run would stop there, not the load
        loader.problem("gpu-gate.command", f"the command cannot be split into words ({error})")
    if not gate.runners:
        loader.problem("gpu-gate.runners", "no runner: name at least one, or drop gpu-gate")
    runners = []
    named: dict[str, int] = {}
    for index, runner in enumerate(gate.runners):
        path = join_path(join_path("gpu-gate.runners", index), "labels")
        if problem := labels_problem(runner.labels):
            loader.problem(path, problem)
        # runs-on takes a set of labels, in any order and case
        name = "/".join(sorted(label.lower() for label in runner.labels))
        if name in named:
            loader.problem(
                path,
                f"runner {index} has the labels of runner {named[name]} ({shown(name)}, in "
                "any order and case): the gate's jobs find a runner by its labels, so each "
                "names another one",
            )
        named.setdefault(name, index)
        if not runner.sms:
            loader.problem(
                join_path(join_path("gpu-gate.runners", index), "sms"),
                "name the SMs of its GPUs, e.g. [90]",
            )
        if cells and not any(c.arch == runner.arch for c in cells):
            loader.problem(
                join_path(join_path("gpu-gate.runners", index), "arch"),
                f"no cell builds for {runner.arch}: this runner would test nothing",
            )
        runners.append(
            GpuRunner(labels=tuple(runner.labels), sms=tuple(runner.sms), arch=runner.arch)
        )
    return GpuGate(runners=tuple(runners), command=gate.command)


def labels_problem(labels: object) -> str | None:
    """Why `labels` are not a GPU runner's `runs-on` labels, or None: a list of strings, each
    without white space, a control character or a / (a line break would print a line of its
    own, an Actions workflow command; a runner's name joins its labels with `/`). matrix.yaml's
    gpu-gate and `matrix --runner-labels` are held to it alike."""
    if not (
        isinstance(labels, list | tuple)
        and labels
        and all(isinstance(label, str) and label.strip() for label in labels)
    ):
        return "name the runner's labels, as `runs-on` takes them (a list of strings)"
    odd = next((label for label in labels if _odd_label(label)), None)
    if odd is not None:
        return (
            f"the label {shown(odd)} holds white space, a control character or a /, which a "
            "runner's label does not"
        )
    return None


def _odd_label(label: str) -> bool:
    return "/" in label or any(c.isspace() or not c.isprintable() for c in label)


def check_targets(
    *,
    cuda: CudaVersion,
    key: str,
    sms: list[GpuTarget],
    sms_path: str,
    ptx_spec: PtxSpec | None,
    ptx_path: str,
    loader: DocumentLoader,
) -> bool:
    before = len(loader.problems)
    inherited = sms_path.startswith("defaults")
    seen: set[GpuTarget] = set()
    repeated: set[GpuTarget] = set()
    for index, target in enumerate(sms):
        item_path = join_path(sms_path, index)
        if target in seen:
            if target not in repeated:
                repeated.add(target)
                loader.problem(item_path, f"{target} is listed more than once")
            continue
        seen.add(target)
        problem = target_problem(target, cuda)
        if problem:
            if inherited and f"CUDA {key}" not in problem:
                problem = f"for CUDA {key}: {problem}"
            loader.problem(item_path, problem)
    ptx = ptx_spec.target if ptx_spec is not None else None
    if ptx is not None:
        if ptx.suffix:
            loader.problem(
                ptx_path,
                f"PTX for {ptx} runs only on that exact GPU, so it cannot cover newer ones "
                f"(write {ptx.number})",
            )
        problem = target_problem(GpuTarget(ptx.number), cuda)
        if problem:
            loader.problem(ptx_path, problem)
        highest = max((t.number for t in sms), default=0)
        if ptx.number < highest:
            loader.problem(
                ptx_path,
                f"PTX target {ptx.number} is below the highest SM {highest} for CUDA {key}: "
                f"GPUs newer than sm_{highest} would JIT code older than what sm_{highest} "
                f"gets (raise it to {highest} or more)",
            )
    return len(loader.problems) == before


def release_build(
    spec: MatrixSpec, loader: DocumentLoader, *, matrix_name: str = "matrix.yaml"
) -> None:
    """The release's `build` section, held to the backend it names."""
    if spec.build is not None:
        for key, message in spec_problems(spec.build, merge(spec.build, None).backend, "build"):
            loader.problem(key, message)
        if spec.build.prepare is not None:
            for key, message in prepare_problems(
                spec.build.prepare, "build.prepare", project=spec.project, matrix_name=matrix_name
            ):
                loader.problem(key, message)


def cuda_build(
    release: BuildSpec | None, entry: BuildSpec | None, cuda_path: str, loader: DocumentLoader
) -> BuildRecipe:
    """A CUDA version's recipe (its `build` over the release's); its own section is held to
    the backend in force for it, which may come from the release's."""
    recipe = merge(release, entry)
    if entry is not None:
        where = join_path(cuda_path, "build")
        for key, message in spec_problems(entry, recipe.backend, where):
            loader.problem(key, message)
        if entry.prepare is not None:
            for key, message in prepare_problems(
                entry.prepare, join_path(where, "prepare"), project=None
            ):
                loader.problem(key, message)
    return recipe


def check_label(label: str | None, path: str, loader: DocumentLoader) -> bool:
    if label is None:
        return True
    try:
        local = Version(f"0+{label}").local
    except ValueError:  # InvalidVersion, or a number of more digits than int() reads
        loader.problem(
            path,
            f"{shown(label)} is not a valid PEP 440 local version label "
            "(letters, digits and dots, e.g. cu129)",
        )
        return False
    if local != label:
        loader.problem(
            path,
            f"{label!r} is written {local!r} in wheel filenames (write {local!r})",
        )
        return False
    return True


def check_cells(
    cells: list[Cell], keys: Mapping[CudaVersion, str], filename: str, loader: DocumentLoader
) -> None:
    """Rules across cells: one filename per release (whatever the destinations: the copies
    of one cell may share one, being one build), one NCCL pin per CUDA major."""
    by_file: dict[str, dict[str, Cell]] = defaultdict(dict)
    for cell in cells:
        for copy in cell.copies:
            copied = cell.as_copy(copy)
            by_file[copied.wheel_filename].setdefault(cell.id, copied)
    for wheel, of_cells in by_file.items():
        same = list(of_cells.values())
        first = {str(c.cuda): c for c in reversed(same)}
        if len(first) < len(same) and len(first) == 1:
            loader.problem(
                join_path("cuda", keys[same[0].cuda]),
                f"cells {' and '.join(c.id for c in same)} both produce {wheel} (torch "
                "versions of one minor share a {torch} label: list one per minor)",
            )
            continue
        if len(first) < 2:
            continue
        ordered = sorted(first.values(), key=lambda c: list(keys).index(c.cuda))
        versions = " and ".join(str(c.cuda) for c in ordered)
        paths = [join_path("cuda", keys[c.cuda]) for c in ordered]
        elsewhere = [at(filename, loader.position(p)) for p in paths[:-1]]
        also = f" (also at {', '.join(elsewhere)})"
        destinations = list(dict.fromkeys(c.destination.name for c in ordered))
        if len(destinations) > 1:
            named = " and ".join(repr(d) for d in destinations)
            message = (
                f"CUDA {versions} both produce {wheel}, for {named}: one release cannot "
                "hold two files of one name (give each variant its own local-label)"
            )
        elif (twin := ordered[0].destination.twin_problem(versions, wheel)) is not None:
            message = twin
        else:
            message = (
                f"CUDA {versions} would both publish {wheel} to {destinations[0]!r} "
                "(give them different local labels)"
            )
        loader.problem(paths[-1], message + also)
    pins: dict[int, tuple[Version, str]] = {}
    for cell in cells:
        if cell.nccl is None:
            continue
        seen = pins.setdefault(cell.cuda.major, (cell.nccl, str(cell.cuda)))
        if seen[0] != cell.nccl:
            loader.problem(
                join_path(join_path("cuda", str(cell.cuda)), "nccl"),
                f"CUDA {cell.cuda} pins NCCL {cell.nccl} but CUDA {seen[1]} pins {seen[0]}: "
                f"one override file serves all of CUDA {cell.cuda.major}.x (use one version)",
            )
