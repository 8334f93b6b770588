"""Packaging beyond what pyproject.toml can say: every ``kvlab`` subpackage is found automatically (none is listed by
hand), and ``kvlab.assets`` is added because it is the top-level ``assets/`` folder (mapped by ``package-dir`` in
pyproject.toml), which discovery cannot reach. tests/test_wheel.py fails if a tracked file is missing from the wheel."""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["kvlab", "kvlab.*"]) + ["kvlab.assets"])
