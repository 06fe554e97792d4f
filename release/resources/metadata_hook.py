"""A project's metadata from its PEP 517 backend's prepare_metadata_for_build_wheel (never a
build), as one line of JSON: `{"metadata": TEXT}`, or `{"error": "no-prepare"}` where the
backend has no such hook.

    python metadata_hook.py SOURCE OUT isolated|venv

`isolated`: in an isolated environment of the project's build requirements (pypa/build's);
`venv`: in this interpreter's environment as it is (a torch cell's, whose setup.py imports
torch). Run by release.toolchain.projectmeta; the standard library and pypa/build only. A
backend that fails exits 1, its own words the last lines of the output.
"""

from __future__ import annotations

import json
import pathlib
import sys

from build import BuildBackendException, BuildException, ProjectBuilder
from build.env import DefaultIsolatedEnv


def metadata(builder: ProjectBuilder, out: str) -> dict[str, str]:
    found = builder.prepare("wheel", out)
    if found is None:
        return {"error": "no-prepare"}
    return {"metadata": (pathlib.Path(found) / "METADATA").read_text(encoding="utf-8")}


def main(source: str, out: str, isolated: bool) -> dict[str, str]:
    if not isolated:
        return metadata(ProjectBuilder(source, python_executable=sys.executable), out)
    with DefaultIsolatedEnv() as env:
        builder = ProjectBuilder.from_isolated_env(env, source)
        env.install(builder.build_system_requires)
        env.install(builder.get_requires_for_build("wheel"))
        return metadata(builder, out)


if __name__ == "__main__":
    try:
        answer = main(sys.argv[1], sys.argv[2], sys.argv[3] == "isolated")
    except (BuildBackendException, BuildException):
        sys.exit(1)  # the backend's own words are the last lines above
    print(json.dumps(answer))
