"""`release init`: a commented matrix.yaml and the release workflow for a kernel project,
from its files read statically (release.project). `detect` reads each value with its
source, `decide` makes the matrix of them, `render` fills the templates, `run` writes.
"""
