"""`release init`: a commented matrix.yaml and the release workflow for a kernel project,
from its files read statically (release.project). `detect` reads the backend and the GPU
targets, `torchaxes` a torch project's switch, Python axis and torch pin (the torch from
an index page: `torchindex`), `decide` makes the matrix of them, `render` fills the
templates, `run` writes.
"""
