"""Build, publish and verify the wheel matrix of a CUDA kernel project.

Its modules:

- `audit/`: `release audit`: the checks verify applies to a release's wheels and index, against
  any simple index or list of wheel URLs, with no matrix and no credentials.
- `backends/`: The build systems a cell can be built with, and what each receives.
- `building/`: The build stage: one cell pipeline (PEP 517 build, repair, relabel, inspect), the
  caches, --compare, and the GPU gate.
- `commands/`: One module per command: each parses its arguments, calls a stage's entry
  point, and prints.
- `destinations/`: Where a release goes: everything the stages ask of a destination, one module
  per kind.
- `downstream/`: Files for the users of a release: NCCL override files and hash-pinned
  requirement files.
- `init/`: `release init`: a commented matrix.yaml and the release workflow for a kernel
  project, from its files read statically (release.project).
- `inspection/`: What makes a wheel count as built: its files, auditwheel's verdict, and the
  device code it holds.
- `matrix/`: matrix.yaml, the input: its specification, loading with file:line errors, the
  rules, and the cells it expands to.
- `nightly/`: The nightly channel: each commit's wheels on an S3 destination under `/<commit>/`,
  and `/nightly/` moved to the newest complete, verified commit (docs/nightly.md).
- `project/`: A kernel project's build files, read statically (never run): setup.py with `ast`,
  pyproject.toml and setup.cfg, CMakeLists.txt.
- `provenance/`: Provenance: PEP 740 attestations and GitHub's build-provenance bundles of the
  files a release publishes, and whether their Sigstore signatures hold.
- `publish/`: Publishing the manifest's wheels to their destinations (release.destinations: PyPI,
  GitHub Releases), the pip index of the GitHub-hosted variants on GitHub Pages, and `release
  plan`.
- `records/`: The files the stages hand on: dist/manifest.json and the dist directory beside it,
  published.json, release-manifest.json.
- `remote/`: Talking to servers: the HTTP client, retries, the GitHub REST client and its model,
  and simple-index pages.
- `resources/`: Scripts that `release` runs in other interpreters (a toolchain's, a torch
  environment's, a PEP 517 build environment's).
- `toolchain/`: The tools a cell builds with: every pin (pins), the plan of a cell's toolchain
  (plan), and provisioning it into the cache (provision).
- `verify/`: Proving a release: every published URL serves the bytes that were built (checks),
  read from the publish record or re-derived from the destinations when there is no dist/
  (rederive); `run.verify_release` is the stage's one entry point.
- `cli`: The `release` command line: argument parsing only; each command lives in
  release.commands.
- `console`: Where every command's output goes, from one place.
- `credentials`: The one list of secrets: which values must never be shown, and how they are
  hidden.
- `defaults`: The defaults that a command's `--help` shows and its stage applies, importing
  nothing, so that `--help` loads no stage.
- `elfread`: What reading a damaged or hostile ELF file raises, in one tuple for every reader
  of one.
- `errors`: The one error family: every error a user can cause, with its exit code and a hint.
- `fsutil`: Small filesystem edges shared by every command.
- `github_names`: What this program takes from outside as a GitHub address: a repository's
  OWNER/NAME and a REST API's base URL, checked by one rule each wherever they come in.
- `pep508`: The one reader of requirement text this tool did not write (a wheel's or an
  index's METADATA, a project's files).
- `proc`: The one way this program runs a subprocess.
- `targets`: The targets a release builds for: CPU architectures, and GPU targets (SM numbers
  with their `a`/`f` suffixes) with what each CUDA version can build.
- `wheelfile`: What a wheel says about itself: its .dist-info, METADATA (read with `packaging`)
  and WHEEL.
- `wheelrewrite`: One writer for a wheel changed after its build (relabelled, its torch pinned,
  a build tag added).
- `workers`: Threads that read from servers for a command, which a stopped command leaves
  behind at once.
- `writing`: Files a command writes together, all or nothing (init's two, pins', nccl's).
- `yamlspec`: Typed loading of YAML documents into frozen dataclasses, with file:line:col
  errors.
- `ziparchive`: A zip archive from outside as it is read before anything inside it is trusted:
  whether every member reads back, and the bounds past which one is refused unread.
"""

__version__ = "0.1.0"
