"""Backends: SymPy (symbolic, scalar code) and trace (array-level AD on the IR)."""
