"""Habitat's version and the torch releases it supports: one source, read by pyproject.toml,
cmake/python_build_info.py and habitat/__init__.py."""
__version__ = "0.1.0"
#: The torch releases the capture plugin supports, oldest and newest (minor versions):
#: the build refuses an older one, `import habitat` refuses to load into one.
SUPPORTED_TORCH = ((2, 4), (2, 15))
