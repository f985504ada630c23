"""``python -m bench``: run the read benchmark and print the comparison table."""

import os
import sys

import pytest

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(pytest.main([here, "--benchmark-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
