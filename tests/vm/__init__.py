"""Host side of the qemu VM lanes: boot the distro kernel, run tests/kernel inside, report back."""
