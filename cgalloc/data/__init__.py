"""Files shipped with cgalloc: the boot unit and its configuration file (``cgalloc install-unit``)."""
