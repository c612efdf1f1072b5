"""Habitat's version: one source, read by setup.py and habitat.__version__."""
__version__ = "0.1.0"
