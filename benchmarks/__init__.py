"""difgen's benchmark suite: ``python -m benchmarks`` from the repository root.

Times every difgen module of ``benchmarks/difgen.toml`` against hand-written NumPy
derivatives, ``f`` itself, and the peers that are installed (JAX, torch.func,
autograd, SymPy, finite differences, SciPy). See ``python -m benchmarks --help``.
"""
