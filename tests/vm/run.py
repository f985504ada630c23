"""Run one command in a VM lane: ``python -m tests.vm.run --lane v2 -- <command...>``.

Boots the lane, runs the command as root in this checkout inside the VM, prints its output as
it comes (from the serial console), and exits with the command's exit status (125 when the VM
could not run it: missing prerequisites, timeout, crash).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from . import initramfs, qemu
from .prereqs import MissingPrerequisite, find_prereqs

CHECKOUT = Path(__file__).resolve().parents[2]
VM_FAILED = 125  # like `env`/`git bisect run`: the command itself never ran to completion


class CommandOutput:
    """Passes on the serial console between the stage lines that start and end the command."""

    def __init__(self, lane: str, out=sys.stdout.buffer) -> None:
        self.start = f"cgalloc-vm: lane {lane}: running command".encode()
        self.end = f"cgalloc-vm: lane {lane}: command exited".encode()
        self.out = out
        self.inside = False
        self._partial = b""

    def __call__(self, chunk: bytes) -> None:
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            line = line.rstrip(b"\r")
            if self.start in line:
                self.inside = True
            elif self.end in line:
                self.inside = False
            elif self.inside:
                self.out.write(line + b"\n")
                self.out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.vm.run", description=__doc__)
    parser.add_argument("--lane", choices=qemu.LANES, default="v2")
    parser.add_argument(
        "--timeout",
        type=float,
        default=float(os.environ.get("CGALLOC_VM_TIMEOUT", qemu.DEFAULT_TIMEOUT)),
        help="seconds before the VM is killed (default $CGALLOC_VM_TIMEOUT or 2400)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --, e.g. -- python -m pytest tests/kernel -x")
    try:
        p = find_prereqs()
    except MissingPrerequisite as missing:
        print(f"vm-{args.lane}: VM lanes need: {missing}", file=sys.stderr)
        return VM_FAILED
    cache = initramfs.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    rundir = Path(tempfile.mkdtemp(prefix="run-", dir=cache)) / args.lane
    rundir.mkdir()
    (rundir / "job.env").write_text(qemu.job_env(args.lane, CHECKOUT, command, mode="command"))
    start = time.monotonic()
    error = qemu.boot(
        args.lane, p, initramfs.cached_initramfs(p), rundir, args.timeout, CommandOutput(args.lane)
    )
    seconds = time.monotonic() - start
    rc_file = rundir / f"{args.lane}.rc"
    if error is None and not rc_file.is_file():
        error = "the VM powered off without the command's exit status (crash or early failure)"
    if error is not None:
        print(f"vm-{args.lane}: {error}; serial log {rundir / 'serial.log'}", file=sys.stderr)
        return VM_FAILED
    rc = int(rc_file.read_text().strip() or VM_FAILED)
    print(f"vm-{args.lane}: exit status {rc}, {seconds:.1f} s wall (boot + run)", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
