"""Allow ``python -m cgalloc``."""

from cgalloc.cli import main

if __name__ == "__main__":
    main()
