"""`release init`: a commented matrix.yaml and the release workflow for a kernel project,
from its files read statically (release.project). `detect` reads the backend and the GPU
targets, `torchaxes` a torch project's switch, Python axis and torch pin (the torch from
an index page: `torchindex`), `decide` makes the matrix of them, `render` fills the
templates, `run` writes.

Its modules:

- `decide`: The matrix `release init` writes for a project.
- `detect`: What `release init` reads from a project's files (release.project).
- `render`: matrix.yaml and the caller workflow as `release init` writes them: the templates
  under release/init/templates (package data) filled with a `Decision`.
- `run`: One `release init`: read the project's files (never run them), ask the index for the
  torch versions of a torch project (one small request), decide, render, check that the matrix
  loads, then write matrix.yaml and the caller workflow.
- `toolref`: The commit the written caller pins the tool's workflows and action by: the one
  the tool's wheel records, else a git install's (PEP 610), else the checkout's.
- `torchaxes`: What `release init` takes from a torch project besides its backend and targets
  (release.init.detect).
- `torchindex`: Which torch `release init` pins: the newest final release on the index that the
  build requirement allows and that has a Linux wheel for the cells' CPU arch.
"""
