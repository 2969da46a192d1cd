"""Imports every module that registers launchers for hand-written kernels."""
from . import movement  # noqa: F401
