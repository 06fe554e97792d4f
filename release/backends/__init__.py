"""The build systems a cell can be built with (csrc's contract, CMake, torch), and what each
receives.
"""
