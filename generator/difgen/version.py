"""difgen's version, in a module of its own so that anything can import it."""

from __future__ import annotations

VERSION = "0.1.0"
"""Written into every generated module and into its SOURCE_HASH."""
