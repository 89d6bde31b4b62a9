"""A sample package whose derivatives difgen generates at build time.

The generated module is ``sampledf.energy_derivatives``. This ``__init__`` does not
import it: difgen imports the package to trace ``sampledf.model.energy`` before
that module exists.
"""
