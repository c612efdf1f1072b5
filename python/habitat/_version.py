"""Habitat's version and the torch releases it supports: one source, read by setup.py and
habitat/__init__.py."""
__version__ = "0.1.0"
#: The torch releases the capture plugin supports, oldest and newest (minor versions):
#: setup.py refuses to build against an older one, `import habitat` refuses to load into one.
SUPPORTED_TORCH = ((2, 4), (2, 15))
