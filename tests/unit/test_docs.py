"""README.md and docs/: the shipped matrix docs/matrix.md shows is matrix.yaml itself, every
relative link leads to a file (and heading) that exists, the README's first screen says how
to install the tool and start, and the docs say which commands read matrix.yaml as the
commands' options do."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from release import __version__
from release.cli import COMMANDS, command_module
from release.init.render import docs_url

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
FIRST_SCREEN = 60  # lines of README.md a newcomer reads before scrolling

_FENCE = re.compile(r"^ *(```|~~~)")
_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_HEADING = re.compile(r"^(#{1,6}) +(.*?) *#* *$")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # https:, mailto:, ...


def prose_lines(text: str) -> list[str]:
    """The lines of `text` outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation but - and _ dropped,
    spaces to -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of `page`, a repeated one with GitHub's -1, -2 ... suffix."""
    seen: Counter[str] = Counter()
    found = set()
    for line in prose_lines(page.read_text(encoding="utf-8")):
        heading = _HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading.group(2))
        found.add(f"{base}-{seen[base]}" if seen[base] else base)
        seen[base] += 1
    return found


def relative_links(page: Path) -> list[str]:
    """The targets of the relative links of `page`, outside code blocks and code spans."""
    targets = []
    for line in prose_lines(page.read_text(encoding="utf-8")):
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            if not _EXTERNAL.match(match.group(1)):
                targets.append(match.group(1))
    return targets


def broken(page: Path, target: str) -> str | None:
    """Why the link to `target` from `page` leads nowhere, or None."""
    path, _, anchor = target.partition("#")
    linked = (page.parent / path).resolve() if path else page
    if not linked.exists():
        return f"{linked} does not exist"
    if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
        return f"{linked.name} has no heading #{anchor}"
    return None


def fenced_block(text: str, after: str, language: str) -> str:
    """The first ```language block below the line `after` and above the next heading."""
    lines = text.splitlines(keepends=True)
    start = lines.index(after + "\n") + 1
    body: list[str] | None = None
    for line in lines[start:]:
        if body is None:
            if line.startswith("#"):
                break
            if line.rstrip("\n") == f"```{language}":
                body = []
        elif line.rstrip("\n") == "```":
            return "".join(body)
        else:
            body.append(line)
    raise AssertionError(f"no ```{language} block under {after!r}")


def test_the_shipped_matrix_docs_show_is_matrix_yaml() -> None:
    matrix = (ROOT / "docs" / "matrix.md").read_text(encoding="utf-8")
    shown = fenced_block(matrix, "## The shipped matrix", "yaml")
    assert shown == (ROOT / "matrix.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    problems = [
        f"{target}: {why}"
        for target in relative_links(page)
        if (why := broken(page, target)) is not None
    ]
    assert problems == []


def test_the_links_checks_see_what_github_sees() -> None:
    assert slug("Starting with `release init`") == "starting-with-release-init"
    assert slug("The project's name and version") == "the-projects-name-and-version"
    assert slug("Which commands read matrix.yaml") == "which-commands-read-matrixyaml"
    assert relative_links(ROOT / "README.md")  # the README links its docs pages
    assert broken(ROOT / "README.md", "docs/matrix.md#no-such-heading") is not None
    assert broken(ROOT / "README.md", "docs/no-such-page.md") is not None


def test_the_first_screen_says_how_to_install_and_start() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    first = "\n".join(lines[:FIRST_SCREEN])
    assert re.search(r"\bpip install cuda-wheel-release\b", first)
    assert "release init" in first
    assert "release build --dry-run" in first


def test_the_docs_release_init_links_to_exist() -> None:
    """matrix.yaml and release.yml as `release init` writes them link a docs page of the
    tool's release: the page must be in docs/."""
    for url in (docs_url(__version__), docs_url(__version__, "ci.md")):
        prefix = f"/blob/v{__version__}/"
        assert prefix in url
        assert (ROOT / url.split(prefix, 1)[1]).is_file(), url


def matrix_rows() -> dict[str, str]:
    """docs/commands.md's table of which commands read matrix.yaml: command -> its answer."""
    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    section = text.split("## Which commands read matrix.yaml\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        for command in re.findall(r"`([a-z-]+)`", cells[0]):
            assert command not in rows, f"{command} is in two rows"
            rows[command] = cells[1]
    return rows


def test_the_docs_say_which_commands_read_matrix_yaml_as_their_options_do() -> None:
    rows = matrix_rows()
    assert sorted(rows) == sorted(COMMANDS)
    for command in COMMANDS:
        takes_matrix = "matrix" in command_module(command).SHARED
        says_none = rows[command].startswith("never (no `--matrix`)")
        assert takes_matrix != says_none, command


def test_the_readme_lists_every_command() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `release ([a-z-]+)` \|", section, flags=re.MULTILINE)
    assert sorted(listed) == sorted(COMMANDS)
