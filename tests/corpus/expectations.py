"""What difgen cannot build in the corpus today, and why (filled in below)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    """Why difgen refuses a (function, backend) pair today, and where it says so."""

    reason: str
    where: str = "source"
    """``"source"``: a DifgenError naming the corpus file and a line of the function;
    ``"config"``: a ConfigError naming the difgen.toml line (a dtype config refuses);
    ``"timeout"``: the build does not finish within ``harness.TIMEOUT``."""
    modes: tuple[str, ...] | None = None
    """The modes that refuse (None: every mode of the backend)."""
    mentions: tuple[str, ...] = ()
    """Fragments the message must contain (the NumPy name refused, say)."""


EXPECTED_REFUSALS: dict[tuple[str, str], Refusal] = {}
