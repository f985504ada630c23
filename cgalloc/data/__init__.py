"""Files shipped with cgalloc: the boot unit and its config file (`cgalloc install-unit`)."""
