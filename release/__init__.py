"""Build, publish and verify the wheel matrix of a CUDA kernel project."""

__version__ = "0.1.0"
