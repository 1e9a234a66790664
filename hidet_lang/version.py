"""The package version, kept in one place (read by the build system and by the compilation cache key)."""

__version__ = "0.1.0"
