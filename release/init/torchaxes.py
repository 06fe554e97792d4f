"""What `release init` takes from a torch project besides its backend and targets
(release.init.detect): the force-CUDA or opt-in switch for build.env, the abi3 floor or the CPython
list, and the exact torch to pin from an index's torch releases. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.backends.registry import backend_for
from release.backends.rules import env_problem
from release.errors import ConfigError, as_given, shown
from release.init.detect import CUDA, Finding, Note, TorchLookup, note_of
from release.init.torchindex import newest_allowed
from release.init.values import env_value_problem, process_variable_problem
from release.inspection.stabletorch import NoTorchForCuda, oldest_admitted
from release.project import EnvRead, Place, PyProject, Reading, Said, SetupPy
from release.project.optin import OptIn, OptIns
from release.project.stableabi import stable_abi_crossing, stable_abi_note
from release.yamlspec import scalar_problem

CPYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13", "3.14")  # offline: the Python list's range
# torch 2.14's ATen.h: "#error C++20 or later compatible compiler is required to use ATen."
CXX20_SINCE = Version("2.14")
OTHERS_SHOWN = 8  # the opt-in switches a check names before "and N more"


@dataclass(frozen=True, kw_only=True)
class PythonAxis:
    abi3: str | None
    python: tuple[str, ...]
    found: Finding
    undecided: tuple[Note, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TorchPin:
    version: Version | None  # None: left a TODO
    pythons: tuple[str, ...]  # what that torch has wheels for
    found: Finding | None
    undecided: tuple[Note, ...] = ()


# - the force-CUDA switch -


@dataclass(frozen=True, kw_only=True)
class Switches:
    """What build.env gets for a project's switches, what is said of them, what must change
    and what could not be decided (a switch whose test init cannot work out, or one on a
    variable the build's own processes read)."""

    env: tuple[tuple[str, str], ...] = ()
    found: tuple[Finding, ...] = ()
    changes: tuple[Note, ...] = ()
    undecided: tuple[Note, ...] = ()


def force_cuda(setup_py: SetupPy | None) -> Switches:
    """build.env for each `torch.cuda.is_available()` gate a switch forces past, and a
    change for each gate nothing forces (a GPU-less build machine builds CPU-only)."""
    env: dict[str, str] = {}
    found: list[Finding] = []
    changes: list[Note] = []
    undecided: list[Note] = []
    for gate in setup_py.gates if setup_py else ():
        if gate.forced_by:
            what = "CUDA is built past torch.cuda.is_available()"
            switch, on = gate.forced_by[0], writable(gate.forced_by[0])
            if on is None:
                undecided.append(unset(switch, what))
                continue
            env.setdefault(switch.name, on)
            found.append(
                Finding(
                    key="build.env",
                    value=_set(switch.name, on),
                    source=f"{gate.place}: CUDA is built when torch.cuda.is_available() or "
                    f"{_set(switch.name, on)}, and a build machine has no GPU",
                )
            )
            continue
        changes.append(
            Note(
                place=str(gate.place),
                text="builds CUDA only when torch.cuda.is_available(): on a build machine "
                "without a GPU it builds the CPU extension alone (`release build` then fails "
                "the cell), and no environment variable forces it",
                fix="let one force it, e.g. `torch.cuda.is_available() or os.environ.get("
                '"FORCE_CUDA") == "1"`, then set build.env FORCE_CUDA: "1" in matrix.yaml',
            )
        )
    opted = opt_in(setup_py)
    for name, on in opted.env:
        env.setdefault(name, on)
    return Switches(
        env=tuple(sorted(env.items())),
        found=(*found, *opted.found),
        changes=tuple(changes),
        undecided=(*undecided, *opted.undecided),
    )


def opt_in(setup_py: SetupPy | None) -> Switches:
    """build.env for the switch that builds the most CUDA extensions, where every one is
    built only when a switch is on (apex's APEX_CUDA_EXT): a build that sets none builds no
    CUDA; a check naming the switches left off."""
    opt_ins = setup_py.opt_ins if setup_py else None
    chosen = opt_ins.chosen if opt_ins else None
    if opt_ins is None or chosen is None or chosen.name in backend_for("torch").owned_env:
        return Switches()  # where the cell gives the variable (CUDA_HOME), it is set
    what = f"{chosen.cuda_extensions} CUDA extensions are built"
    on = writable(EnvRead(name=chosen.name, place=chosen.read, on=chosen.on))
    if on is None:
        return Switches(undecided=(unset(EnvRead(name=chosen.name, place=chosen.place), what),))
    via = f"{chosen.via}() ({chosen.read}) is" if chosen.via else "its test is"
    found = Finding(
        key="build.env",
        value=_set(chosen.name, on),
        source=f"{chosen.place}: every CUDA extension is built only when a switch is on; "
        f"{via} on with {_set(chosen.name, on)}, which builds {_share(chosen, opt_ins)}",
    )
    others = opt_ins.others
    if not others:
        return Switches(env=((chosen.name, on),), found=(found,))
    named = ", ".join(f"{s.name} ({s.place.line})" for s in others[:OTHERS_SHOWN])
    more = f" and {len(others) - OTHERS_SHOWN} more" if len(others) > OTHERS_SHOWN else ""
    check = Note(
        place=str(others[0].place),
        text=f"{named}{more} each build extensions only when on, and build.env leaves "
        f"{'it' if len(others) == 1 else 'them'} off (release init turns on {chosen.name} alone)",
        fix="add to build.env each one the release ships, with what its extensions link",
    )
    return Switches(env=((chosen.name, on),), found=(found,), undecided=(check,))


def _share(chosen: OptIn, opt_ins: OptIns) -> str:
    """How many of the CUDA extensions the chosen switch builds, said."""
    total = sum(switch.cuda_extensions for switch in opt_ins.switches)
    if chosen.cuda_extensions == total:
        return "it" if total == 1 else f"all {total} of them"
    return f"{chosen.cuda_extensions} of the {total} (the most)"


def force_build(setup_py: SetupPy | None) -> Switches:
    """build.env for a bdist_wheel whose run() downloads a prebuilt wheel unless a variable
    forces the build (flash-attention's FLASH_ATTENTION_FORCE_BUILD=TRUE), and a change
    where nothing forces it: a wheel the build did not compile fails its cell."""
    prebuilt = setup_py.prebuilt if setup_py else None
    if prebuilt is None or setup_py is None:
        return Switches()
    where = f"{prebuilt.command}.run() downloads a prebuilt wheel"
    # a switch that opts an extension in builds only by leaving the extension out
    opting = {switch.name for switch in setup_py.opt_ins.switches}
    forcing = [read for read in prebuilt.forced_by if read.name not in opting]
    if not forcing:
        change = Note(
            place=str(prebuilt.place),
            text=f"{where} instead of building, and no environment variable skips the "
            "download: `release build` fails a cell whose binaries it did not compile (exit 4)",
            fix='let one force the build, e.g. `if os.getenv("<NAME>_FORCE_BUILD") == '
            '"TRUE": return super().run()`, then set it in build.env',
        )
        return Switches(changes=(change,))
    undecided: list[Note] = []
    for read in forcing:  # one switch that builds is enough
        on = writable(read)
        if on is None:
            undecided.append(unset(read, f"{prebuilt.command}.run() builds instead of downloading"))
            continue
        found = Finding(
            key="build.env",
            value=_set(read.name, on),
            source=f"{prebuilt.place}: {where} unless {_set(read.name, on)} ({read.place}), and a "
            "release ships the wheel its own build compiled",
        )
        return Switches(env=((read.name, on),), found=(found,))
    return Switches(undecided=tuple(undecided))


def _set(name: str, value: str) -> str:
    """`NAME=value` as init's report says it: a value with a line break or a space escaped
    on one line (matrix.yaml holds it exactly)."""
    return (
        f"{name}={as_given(value) if value.strip() == value and ' ' not in value else shown(value)}"
    )


def unset(switch: EnvRead, what: str) -> Note:
    """Why the switch `switch` is not set in build.env, at its line."""
    process = process_variable_problem(switch.name)
    why = process or (
        f"no value of {switch.name} was found that its test is true with (release init "
        "writes a value only where it works the test out: a literal it is compared with, "
        "or 1)"
    )
    return Note(
        place=str(switch.place),
        text=f"{what} when {switch.name} is on, but matrix.yaml sets no {switch.name}: {why}",
        fix=f"set build.env {switch.name} in matrix.yaml to the value that turns it on"
        if process is None
        else "read a variable of the project's own there, then set it in build.env",
    )


def writable(switch: EnvRead) -> str | None:
    """The value build.env will carry for `switch` (None: none is set, `unset` says why);
    a ConfigError at its line where the matrix could not hold it (a name that is no
    variable's, or a credential's; a value with a NUL; what the matrix's loader refuses)."""
    if switch.on is None or process_variable_problem(switch.name) is not None:
        return None
    problem = (
        env_problem(switch.name, "torch")
        or scalar_problem(switch.name)
        or env_value_problem(switch.on)
    )
    if problem is None:
        return switch.on
    raise ConfigError(
        [
            f"{switch.place}: the switch {shown(switch.name)}={shown(switch.on)} cannot be "
            f"build.env: {problem}"
        ],
        hint="release init writes nothing; set build.env in matrix.yaml by hand (docs/matrix.md)",
    )


def stable_abi(setup_py: SetupPy | None) -> tuple[list[Finding], list[Note]]:
    """What init says of a stable-ABI project (the dry run says the same): its target and
    the requirement its wheel gets, and a change where the define misses a compiler."""
    abi = setup_py.stable_abi if setup_py else None
    if abi is None:
        return [], []
    found = Finding(key="torch ABI", value="stable", source=stable_abi_note(abi))
    crossing = stable_abi_crossing(abi)
    return [found], [note_of(crossing)] if crossing is not None else []


# - the Python axis -


def python_axis(read: Reading, torch: TorchPin) -> PythonAxis:
    """abi3 and its floor where the wheel is tagged abi3 (bdist_wheel's py_limited_api is
    set, and the extension's is not off), else the CPython list."""
    limited = read.setup_py.limited_api if read.setup_py else None
    tag = _limited_api_tag(read)
    notes: list[Note] = []
    abi3 = tag is not None and (limited is None or limited.on is not False)
    if limited is not None and limited.on is None:
        assigned = ", ".join(str(p) for p in limited.assigned) or str(limited.place)
        notes.append(
            Note(
                place=str(limited.place),
                text=f"py_limited_api is computed ({limited.expression}, set at {assigned}): "
                f"matrix.yaml takes it as {'on' if abi3 else 'off'}",
                fix="if the wheel's tags say otherwise, the build fails naming the key to "
                "change (abi3 or python)",
            )
        )
    if abi3 and tag is not None:
        floor = _abi3_floor(read, tag, torch)
        if floor is not None:
            value, source, computed = floor
            return PythonAxis(
                abi3=value,
                python=(),
                found=Finding(key="abi3", value=value, source=source),
                undecided=(*notes, *computed),
            )
        notes.append(
            Note(
                place=str(tag.place),
                text=f"bdist_wheel's py_limited_api is computed ({tag.expression}) and no "
                "floor was found elsewhere: matrix.yaml lists Pythons",
                fix='write abi3: "3.X" in matrix.yaml for the floor it gives',
            )
        )
    elif limited is not None and limited.on:
        notes.append(
            Note(
                place=str(limited.place),
                text="the extension is py_limited_api, but nothing sets bdist_wheel's "
                "py_limited_api, so the wheel is tagged cp3X-cp3X: matrix.yaml lists Pythons",
                fix='for one abi3 wheel a cell: options={"bdist_wheel": {"py_limited_api": '
                '"cp310"}} in setup(), and abi3: "3.10" in matrix.yaml',
            )
        )
    pythons, source = _python_list(read, torch)
    return PythonAxis(
        abi3=None,
        python=pythons,
        found=Finding(key="python", value=" ".join(pythons), source=source),
        undecided=tuple(notes),
    )


def _limited_api_tag(read: Reading) -> Said | None:
    """bdist_wheel's py_limited_api (setup.py's `options`, else setup.cfg): what tags the
    wheel abi3."""
    for said in (
        read.setup_py.limited_api_floor if read.setup_py else None,
        read.setup_cfg.limited_api_floor if read.setup_cfg else None,
    ):
        if said is not None:
            return said
    return None


def _abi3_floor(read: Reading, tag: Said, torch: TorchPin) -> tuple[str, str, list[Note]] | None:
    """The abi3 floor ("3.9") and where it was read: the tag's literal (cp39), else, where
    the tag is computed, a literal -DPy_LIMITED_API, requires-python, or the oldest CPython
    the pinned torch has wheels for (said as not decided)."""
    if tag.value is not None and re.fullmatch(r"cp3\d+", tag.value):
        return f"3.{tag.value[3:]}", f"{tag.place}: bdist_wheel's py_limited_api {tag.value}", []
    define = read.setup_py.limited_api_define if read.setup_py else None
    found: tuple[str, str] | None = None
    if define is not None and define.value:
        hexversion = int(define.value, 16)
        value = f"{hexversion >> 24}.{(hexversion >> 16) & 0xFF}"
        found = value, f"{define.place}: -DPy_LIMITED_API={define.value}"
    found = found or _requires_python_floor(read)
    if found is None and torch.pythons:
        found = torch.pythons[0], f"the oldest CPython torch {torch.version} has wheels for"
    if found is None:
        return None
    note = Note(
        place=str(tag.place),
        text=f"bdist_wheel's py_limited_api is computed ({tag.expression or tag.value}): "
        f"matrix.yaml takes the floor {found[0]} from {found[1].split(': ')[0]}",
        fix=f"check that it gives cp{found[0].replace('.', '')}",
    )
    return found[0], found[1], [note]


def _requires_python_floor(read: Reading) -> tuple[str, str] | None:
    said: Said | None = read.pyproject.requires_python if read.pyproject else None
    if said is None and read.setup_cfg is not None:
        said = read.setup_cfg.python_requires
    if said is None or said.value is None:
        return None
    match = re.search(r">=\s*(3\.\d+)", said.value)
    return (match.group(1), f"{said.place}: requires-python {said.value}") if match else None


def _python_list(read: Reading, torch: TorchPin) -> tuple[tuple[str, ...], str]:
    classifiers = read.pyproject.pythons if read.pyproject else ()
    requires = _requires_python_floor(read)
    floor = int(requires[0].split(".")[1]) if requires else 0
    if classifiers:
        kept = tuple(p for p in classifiers if not torch.pythons or p in torch.pythons)
        if kept:
            return kept, "pyproject.toml's Python classifiers" + (
                f" that torch {torch.version} has wheels for" if torch.pythons else ""
            )
    candidates = torch.pythons or CPYTHONS
    kept = tuple(p for p in candidates if int(p.split(".")[1]) >= floor) or candidates
    where = f" from {requires[1]}" if requires else ""
    if torch.pythons:
        return kept, f"the CPythons torch {torch.version} has wheels for{where}"
    return kept, f"the CPythons {kept[0]} to {kept[-1]}{where} (no torch listing to narrow them)"


# - the torch pin -


def torch_pin(
    pyproject: PyProject | None,
    lookup: TorchLookup | None,
    standard: Said | None = None,
    setup_py: SetupPy | None = None,
) -> TorchPin:
    """The exact torch the cells build against: for a libtorch stable-ABI project (its
    define unconditional), the oldest its wheel admits on the cells' CUDA major
    (`stable_pin`); else the newest the index has that the build requirement allows, and
    that compiles the project's C++ `standard` (a year, where its flags give one: torch 2.14
    and later need C++20); a TODO where the index was not asked or has none."""
    abi = setup_py.stable_abi if setup_py else None
    if abi is not None and abi.target is not None and abi.condition is None and lookup:
        return stable_pin(abi.target, abi.place, lookup)
    required = pyproject.requirement("torch") if pyproject else None
    specifier = required.requirement.specifier if required else SpecifierSet()
    place = str(required.place) if required else ("pyproject.toml" if pyproject else "setup.py")
    wanted = f"{required.requirement} ({place})" if required else "no build requirement"
    older = standard is not None and int(standard.value or 0) < 20
    if older and standard is not None:
        specifier &= SpecifierSet(f"<{CXX20_SINCE}")
        wanted += (
            f" and the project's C++{standard.value} ({standard.place}: {standard.expression}; "
            f"torch {CXX20_SINCE} and later need C++20)"
        )
    todo = "write the exact torch version to build against on matrix.yaml's TODO line"
    if lookup is None or lookup.releases is None:
        why = lookup.failure if lookup is not None else "no index was asked"
        note = Note(place=place, text=f"no exact torch pinned: {why}", fix=todo)
        if older and standard is not None:
            note = replace(
                note,
                fix=f"{todo}, older than {CXX20_SINCE} (the project compiles C++{standard.value})",
            )
        return TorchPin(version=None, pythons=(), found=None, undecided=(note,))
    chosen = newest_allowed(lookup.releases, specifier)
    if chosen is None:
        note = Note(place=place, text=f"no torch on {lookup.index_url} fits {wanted}", fix=todo)
        return TorchPin(version=None, pythons=(), found=None, undecided=(note,))
    source = f"the newest torch on {lookup.index_url} that {wanted} allows"
    newer = [(v, why) for v, why in lookup.left_out if v > chosen.version]
    if newer:
        source += (
            ", and whose own requirements admit the build's ("
            + "; ".join(f"not {v}: {why}" for v, why in newer)
            + ")"
        )
    return TorchPin(
        version=chosen.version,
        pythons=chosen.pythons,
        found=Finding(key="torch", value=str(chosen.version), source=source),
    )


def stable_pin(target: Version, place: Place, lookup: TorchLookup) -> TorchPin:
    """The torch a stable-ABI project's cells build against: the oldest its wheel admits
    on CUDA 13 (release.inspection.stabletorch), or a TODO saying why it is not known."""
    todo = "write the exact torch version to build against on matrix.yaml's TODO line"
    why = lookup.built_for_failure or lookup.failure or "the index was not asked"
    if lookup.built_for is not None and lookup.releases is not None:
        try:
            oldest = oldest_admitted(lookup.built_for, target, CUDA.major)
        except NoTorchForCuda as error:
            why = str(error)
        else:
            release = lookup.releases.get(oldest.version)
            return TorchPin(
                version=oldest.version,
                pythons=release.pythons if release is not None else (),
                found=Finding(key="torch", value=str(oldest.version), source=oldest.reason),
            )
    note = Note(
        place=str(place),
        text=f"no exact torch pinned: the oldest torch a stable-ABI wheel admits is not "
        f"known ({why})",
        fix=todo,
    )
    return TorchPin(version=None, pythons=(), found=None, undecided=(note,))
