"""Tests that run as root on a real kernel inside the qemu VM lanes (see tests/vm/README.md)."""
