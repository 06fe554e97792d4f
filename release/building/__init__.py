"""The build stage: one cell pipeline (PEP 517 build, repair, relabel, inspect), the caches,
--compare, and the GPU gate.
"""
