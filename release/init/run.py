"""One `release init`: read the project's files (never run them), ask the index for the
torch versions of a torch project (one small request), decide, render, check that the
matrix loads, then write matrix.yaml and the caller workflow together (release.writing).
Nothing is written when anything before or during the writes fails, and nothing is written
over an existing file without `force`. The project's own files are only read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from release import __version__, pep508
from release.backends import backend_for
from release.backends.recipe import BackendName
from release.credentials import mask
from release.defaults import CALLER_WORKFLOW, PYPI_SIMPLE
from release.errors import ConfigError, FileError, ToolchainError
from release.init.decide import Decision, decide
from release.init.detect import Finding, TorchLookup, backend_of
from release.init.render import TORCH_TODO, render_matrix, render_workflow
from release.init.toolref import tool_commit
from release.init.torchindex import excluded_by, torch_releases
from release.init.values import workflow_text_problem
from release.inspection.torchcuda import IndexGet, TorchIndex, fresh_get
from release.matrix import matrix_from_text
from release.project import Reading, read_project_files, reading
from release.project.layout import Layout, read_layout
from release.remote import httpclient as http
from release.remote.retry import RetryPolicy
from release.remote.simple_index import ACCEPT, parse_project_page
from release.writing import write_together
from release.yamlspec import MAX_DOCUMENT_BYTES as MAX_MATRIX_BYTES

MATRIX = "matrix.yaml"
WORKFLOWS = Path(".github") / "workflows"
# one small page (about 400 KB for torch on PyPI): a short budget, so offline is said soon
INDEX_POLICY = RetryPolicy(attempts=2, initial_delay=1.0, total=30.0, request_timeout=20.0)
TORCH_ARCH = "x86_64"  # the arch of the cells init writes


@dataclass(frozen=True, kw_only=True)
class InitSettings:
    directory: Path
    force: bool = False
    workflow: str = CALLER_WORKFLOW  # the caller workflow's file name in .github/workflows
    torch_index: str | None = None  # where the cells' torch comes from; None: PyPI
    offline: bool = False  # ask no index: the torch pin is left a TODO
    pypi_token_secret: str | None = None  # None: PyPI's trusted publishing
    # the secret of a destination in another repository (matrix.yaml's token-secret)
    destination_token_secret: str | None = None
    # the environment's secret values, written into no file (a version file that is a link
    # to /proc/self/environ read them all)
    hidden: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Written:
    path: Path
    what: str
    replaced: bool


@dataclass(frozen=True, kw_only=True)
class InitOutcome:
    directory: Path
    decision: Decision
    written: tuple[Written, ...]


TorchSource = Callable[[str, IndexGet], TorchLookup]


def init_project(settings: InitSettings, torch_source: TorchSource | None = None) -> InitOutcome:
    """Write matrix.yaml and the caller workflow for the project in `settings.directory`."""
    directory = settings.directory.resolve()
    if not directory.is_dir():
        raise FileError(
            f"{settings.directory}: no such directory", hint="give the project's directory"
        )
    root = repository_root(directory)
    matrix_path = directory / MATRIX
    workflow_path = root / WORKFLOWS / settings.workflow
    matrix_in_workflow = workflow_matrix(matrix_path, root)
    existing = [p for p in (matrix_path, workflow_path) if os.path.lexists(p)]  # a link too
    if existing and not settings.force:
        hint = f"pass --force to write over {'it' if len(existing) == 1 else 'them'}"
        if workflow_path in existing:  # often the project's own release workflow
            hint += ", or --workflow NAME.yml to write the caller beside it"
        raise FileError(
            f"{' and '.join(str(p) for p in existing)} already "
            f"{'exists' if len(existing) == 1 else 'exist'}: release init replaces nothing",
            hint=hint,
        )
    files = read_project_files(directory)
    read, layout = reading(files), read_layout(files)
    backend = backend_of(read, layout)
    lookup, torches = None, None
    if backend_for(backend[0]).torch_axes:
        index = settings.torch_index or PYPI_SIMPLE
        if settings.offline:
            lookup = TorchLookup(
                index_url=shown_url(index), releases=None, failure="--offline: no index was asked"
            )
        else:
            get = remembered(fresh_get(INDEX_POLICY))  # the torch page read once
            torches = TorchIndex(index, get)
            lookup = (torch_source or ask_index)(index, get)
            target = stable_target(read)
            if target is not None and lookup.releases is not None:
                lookup = with_built_for(lookup, torches, target)
    decision = decide(read, backend, lookup, torch_index=settings.torch_index, layout=layout)
    if torches is not None and lookup is not None:
        decision = _torch_beside_requirements(decision, lookup, torches, (read, backend, layout))
    matrix_text = mask(render_matrix(decision, __version__), settings.hidden)
    check_size(matrix_text, decision, directory)
    check_loads(matrix_text, matrix_path, decision.found)
    workflow_text = render_workflow(
        __version__,
        matrix_in_workflow,
        tool_commit(),
        settings.pypi_token_secret,
        destination_token_secret=settings.destination_token_secret,
        workflow=settings.workflow,
    )
    workflow_text = mask(workflow_text, settings.hidden)
    written = tuple(
        Written(path=path, what=what, replaced=os.path.lexists(path))
        for path, what in (
            (matrix_path, "the release matrix"),
            (workflow_path, "the release workflow, a caller of the tool's reusable one"),
        )
    )
    write_together([(matrix_path, matrix_text.encode()), (workflow_path, workflow_text.encode())])
    return InitOutcome(directory=directory, decision=decision, written=written)


# newer torch releases init reads the requirements of before it pins an older one
TORCH_REQUIREMENT_TRIES = 4


def _torch_beside_requirements(
    decision: Decision,
    lookup: TorchLookup,
    torches: TorchIndex,
    inputs: tuple[Reading, tuple[BackendName, str], Layout],
) -> Decision:
    """`decision`, its torch pin moved to an older release while the pinned one's own
    requirements exclude one of the project's build requirements (its build environment
    installs them beside torch: pip would refuse the pin). One METADATA file a release
    read; where it cannot be read, the pin stands and the build's install says more."""
    read, backend, layout = inputs
    build = _build_requirements(read, decision)
    if not build or decision.torch is None or lookup.releases is None:
        return decision
    if stable_target(read) is not None:  # pinned by its target, not the newest: another rule
        return decision
    for _ in range(TORCH_REQUIREMENT_TRIES):
        pinned = decision.torch
        if pinned is None or lookup.releases is None:
            break
        try:
            why = excluded_by(torches.requirements(pinned, TORCH_ARCH), build)
        except ToolchainError:
            break
        if why is None:
            break
        lookup = replace(
            lookup,
            releases={v: r for v, r in lookup.releases.items() if v != pinned},
            left_out=(*lookup.left_out, (pinned, why)),
        )
        decision = decide(read, backend, lookup, torch_index=decision.torch_index, layout=layout)
    return decision


def _build_requirements(read: Reading, decision: Decision) -> list[tuple[Requirement, str]]:
    """What a torch cell's build environment installs beside torch, each with where it is
    written: the project's build requirements and matrix.yaml's build.requires."""
    build = [
        (r.requirement, str(r.place))
        for r in (read.pyproject.requires if read.pyproject else ())
        if canonicalize_name(r.requirement.name) != "torch"
    ]
    # one that does not parse is matrix.yaml's loader's to name
    build += [(r, "build.requires") for r in pep508.readable(decision.requires)]
    # one for another platform is none a Linux build installs (the cells' Pythons are not
    # known here: a marker on the Python counts as holding)
    linux = pep508.linux_environment(None, None)
    return [(r, where) for r, where in build if pep508.applies(r, linux)]


def workflow_matrix(matrix_path: Path, root: Path) -> str:
    """matrix.yaml's path as the workflow names it (from the repository's root); a
    ConfigError naming it where a workflow must not hold it."""
    path = matrix_path.relative_to(root).as_posix()
    problem = workflow_text_problem(path)
    if problem is None:
        return path
    said = path if path.isprintable() else repr(path)
    raise ConfigError(
        [f"the matrix's path {said} cannot be written into the workflow: {problem}"],
        hint="rename the directory DIR (or write the workflow by hand, docs/ci.md); nothing "
        "was written",
    )


def repository_root(directory: Path) -> Path:
    """The checkout `directory` is in (where `.git` is), else `directory`: GitHub reads
    workflows from the repository's root only."""
    for candidate in (directory, *directory.parents):
        if (candidate / ".git").exists():
            return candidate
    return directory


_QUOTED_FROM = re.compile(r"^[^\s:]+(?::\d+)?")  # `setup.py:12` of `setup.py:12: ...`


def check_size(text: str, decision: Decision, directory: Path) -> None:
    """matrix.yaml as rendered within the bound the loader reads: past it, a ConfigError
    naming the project file whose words init quotes at most length (a computed version of
    a megabyte, say), never init's bug. Nothing is written."""
    size = len(text.encode())
    if size <= MAX_MATRIX_BYTES:
        return
    quoted = [(len(n.place) + len(n.text) + len(n.fix), n.place) for n in decision.changes]
    quoted += [(len(n.place) + len(n.text) + len(n.fix), n.place) for n in decision.undecided]
    quoted += [(len(f.value) + len(f.source), f.source) for f in decision.found]
    place = _QUOTED_FROM.match(max(quoted)[1]) if quoted else None
    where = (
        f"{directory / place.group()}: what release init read there" if place else "release init"
    )
    raise ConfigError(
        [
            f"{where} would make matrix.yaml {size // 1024:,} KiB, past the "
            f"{MAX_MATRIX_BYTES // 1024:,} KiB a matrix may be (a matrix is a few KB)"
        ],
        hint="nothing was written; shorten what the project file says there, or write "
        "matrix.yaml by hand (docs/matrix.md)",
    )


def check_loads(text: str, path: Path, found: Sequence[Finding] = ()) -> None:
    """The matrix as written must load (a TODO torch aside, which is refused at its line
    until it is replaced); otherwise nothing is written. A value the loader refuses is said
    with where init read it (a setup.py line); only one init made up itself is init's bug."""
    try:
        matrix_from_text(text.replace(TORCH_TODO, '"0.0"'), path, named=("project", Version("0")))
    except ConfigError as error:
        origin = refused_finding(error.problems[0], found)
        if origin is not None:
            finding, message = origin
            raise ConfigError(
                [
                    f"{finding.source}: matrix.yaml cannot take {finding.key} {finding.value}: "
                    + message
                ],
                hint="nothing was written; change the project file there, or write matrix.yaml "
                "by hand (docs/matrix.md)",
            ) from None
        raise ConfigError(
            [f"release init: the matrix for {path.parent} does not load: {error.problems[0]}"],
            hint="nothing was written; this is release init's bug, please report it",
        ) from None


_LOADER_PROBLEM = re.compile(r"^[^:]*:\d+:\d+: (?P<path>\S+): (?P<message>.*)$")
_FOUND_KEYS = ("abi3", "python", "sms", "ptx", "torch")


def refused_finding(problem: str, found: Sequence[Finding]) -> tuple[Finding, str] | None:
    """The value init read from the project that the loader's `problem` is about (by its
    key path), and the loader's message."""
    match = _LOADER_PROBLEM.match(problem)
    if match is None:
        return None
    keys = [k for k in re.split(r'[.\[\]"]+', match.group("path")) if k]
    if "env" in keys[:-1]:
        name = keys[keys.index("env") + 1]
        wanted = [f for f in found if f.key == "build.env" and f.value.startswith(f"{name}=")]
    else:
        key = next((k for k in reversed(keys) if k in _FOUND_KEYS), None)
        wanted = [f for f in found if f.key == key]
    return (wanted[0], match.group("message")) if wanted else None


def shown_url(url: str) -> str:
    """`url` without the credentials it may hold."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def stable_target(read: Reading) -> Version | None:
    """The TORCH_TARGET_VERSION release of a stable-ABI project whose define holds
    unconditionally (None: not such a project)."""
    abi = read.setup_py.stable_abi if read.setup_py else None
    return abi.target if abi is not None and abi.condition is None else None


def with_built_for(lookup: TorchLookup, torches: TorchIndex, target: Version) -> TorchLookup:
    """`lookup` with the CUDA each torch from `target` on is built for (one small file a
    release, release.inspection.torchcuda), or why that is not known."""
    try:
        built_for = torches.releases(TORCH_ARCH, SpecifierSet(f">={target}"))
    except ToolchainError as error:
        return replace(lookup, built_for_failure=error.message)
    return replace(lookup, built_for=built_for)


def remembered(get: IndexGet) -> IndexGet:
    """`get`, each whole answer it gave kept for the run (no range or streamed read): the
    torch page that init's lookup, the stable-ABI pin and the requirements' check each read
    is asked for once."""
    answers: dict[tuple[str, str | None], http.Download] = {}

    def remembering(
        url: str,
        *,
        keep: bool = False,
        accept: str | None = None,
        byte_range: tuple[int, int] | None = None,
    ) -> http.Download:
        if byte_range is not None or not keep:
            return get(url, keep=keep, accept=accept, byte_range=byte_range)
        if (url, accept) not in answers:
            answers[(url, accept)] = get(url, keep=True, accept=accept)
        return answers[(url, accept)]

    return remembering


def torch_page(index_url: str) -> str:
    """The index's torch page: `torch/` under its path, its query (if any) kept."""
    parts = urlsplit(index_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/torch/", fragment=""))


def ask_index(index_url: str, get: IndexGet) -> TorchLookup:
    """The torch releases `index_url` has: one request for its torch page."""
    page = torch_page(index_url)
    shown = shown_url(index_url)
    got = get(page, keep=True, accept=ACCEPT)
    if got.status == 404:
        return TorchLookup(index_url=shown, releases=None, failure=f"{shown} has no torch")
    if not got.ok or got.body is None:
        why = got.error or f"HTTP {got.status}"
        return TorchLookup(
            index_url=shown, releases=None, failure=f"cannot read {shown_url(page)} ({why})"
        )
    try:
        files = parse_project_page(got.body, got.content_type, page)
    except ValueError as error:
        return TorchLookup(
            index_url=shown, releases=None, failure=f"{shown_url(page)}: not an index page: {error}"
        )
    return TorchLookup(index_url=shown, releases=torch_releases(files, TORCH_ARCH))
