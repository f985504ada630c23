"""cgalloc: Kubernetes Node Allocatable on a node — compute, enforce, and read the cgroup tree."""

__version__ = "0.1.0"
