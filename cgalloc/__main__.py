"""Allow ``python -m cgalloc``."""

from cgalloc.cli import run

if __name__ == "__main__":
    run()
