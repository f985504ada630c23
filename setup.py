"""Build hook: compiles the C core (csrc/) with cffi in API mode at install time."""

from setuptools import setup

setup(cffi_modules=["csrc/build_core.py:ffibuilder"])
