"""`release init`: a commented matrix.yaml and the release workflow for a kernel project,
from its files read statically (release.project). `detect` reads the backend and the GPU
targets, `native` what its native code makes of the wheel, `torchaxes` a torch project's
switch, Python axis and torch pin (the torch from an index page: `torchindex`), `decide`
makes the matrix of them, `render` puts its values into the templates' slots, which `emit`
dumps through ruamel.yaml (`values` says what no written file may hold), `run` writes both
files together (release.writing).

Its modules:

- `decide`: The matrix `release init` writes for a project.
- `detect`: What `release init` reads from a project's files (release.project).
- `emit`: The YAML `release init` writes, emitted by ruamel.yaml rather than pasted into text.
- `native`: What `release init` decides from a project's native code (release.project.native and
  the layout around it).
- `render`: matrix.yaml and the caller workflow as `release init` writes them: the templates
  under release/init/templates (package data) with a `Decision`'s values put into their slots
  and dumped by ruamel.yaml (release.init.emit), each value with a comment saying where it was
  read.
- `run`: One `release init`: read the project's files (never run them), ask the index for the
  torch versions of a torch project (one small request), decide, render, check that the matrix
  loads, then write matrix.yaml and the caller workflow together (release.writing).
- `toolref`: The commit the written caller pins the tool's workflows and action by: the one
  the tool's wheel records, else a git install's (PEP 610), else the checkout's.
- `torchaxes`: What `release init` takes from a torch project besides its backend and targets
  (release.init.detect).
- `torchindex`: Which torch `release init` pins: the newest final release on the index that the
  build requirement allows and that has a Linux wheel for the cells' CPU arch.
- `values`: What `release init` refuses to write, and why: the text of a value that the YAML
  emitter could carry but that a workflow or a matrix must not (release.init.emit carries the
  rest exactly).
"""
