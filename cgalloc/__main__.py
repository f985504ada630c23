"""Allow ``python -m cgalloc``."""

from cgalloc.entry import run

if __name__ == "__main__":
    run()
