"""The adversarial suite of issue 8 (see conftest.py): a package, so that its
conftest and helpers never shadow the ``conftest`` module of tests/."""
