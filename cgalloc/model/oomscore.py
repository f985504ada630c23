"""OOM score adjustments: the kubelet's (``pkg/kubelet/qos/policy.go``), the kernel's use of
them (``mm/oom_kill.c`` ``oom_badness``), and the one the reserved cgroups' daemons should run
with so that a node out of memory kills pods first. Pure: no I/O.

The kubelet gives Guaranteed containers (and node-critical pods) -997 and itself -999; the
runtimes give pod sandboxes -998 (containerd's ``defaultSandboxOOMAdj``). A system daemon whose
unit sets nothing runs at 0, so in a node-wide OOM the kernel kills it before a Guaranteed
container many times its size (EKS AMI #2175: "the units in the system.slice are the critical
services"; the fix asked for is ``OOMScoreAdjust=`` below -997). cgalloc's value for them is
:data:`DAEMON`: under Guaranteed pods, above the kubelet, and never above what a unit already
asks for (``sshd`` ships with -1000, which means "never kill"; EKS AMI PR #2185's comment).

Where it is set: systemd applies ``OOMScoreAdjust=`` to a service's processes at every start,
so it belongs in the daemons' drop-ins (``install-unit --daemons``), not in a one-off write to
``/proc/<pid>/oom_score_adj`` that the next restart forgets. A slice cannot carry it (a slice
runs no process).
"""

from __future__ import annotations

OOM_SCORE_ADJ_MIN = -1000  # the kernel: never chosen
OOM_SCORE_ADJ_MAX = 1000
KUBELET = -999  # KubeletOOMScoreAdj, the kubelet's own (its oomScoreAdj setting's default)
KUBE_PROXY = -999  # KubeProxyOOMScoreAdj
SANDBOX = -998  # containerd's pod sandboxes (pause), defaultSandboxOOMAdj
GUARANTEED = -997  # guaranteedOOMScoreAdj: Guaranteed and node-critical pods' containers
BESTEFFORT = 1000  # besteffortOOMScoreAdj
DAEMON = -998  # cgalloc's, for the daemons of the reserved cgroups


def daemon_adjust(current: int | None) -> int | None:
    """The ``OOMScoreAdjust=`` for a daemon whose unit now runs it at ``current`` (None: not
    set, which is 0): :data:`DAEMON`, or None when ``current`` already is at or below it
    (a unit's own -999 or -1000 stays)."""
    if current is not None and current <= DAEMON:
        return None
    return DAEMON


def badness(rss_pages: int, swap_pages: int, pgtable_pages: int, adj: int, total_pages: int):
    """``oom_badness``: the points the kernel ranks a process by in an OOM (highest is
    killed), None for one it never chooses (``OOM_SCORE_ADJ_MIN``). ``total_pages`` is RAM
    plus swap for a node-wide OOM, the cgroup's limit for a cgroup's own."""
    if adj == OOM_SCORE_ADJ_MIN:
        return None
    points = rss_pages + swap_pages + pgtable_pages
    return points + adj * (total_pages // 1000)


def killed_before_guaranteed(adj: int) -> bool:
    """Whether a process at ``adj`` outranks, in a node-wide OOM, a Guaranteed container using
    as much memory: any adjustment above -997."""
    return adj > GUARANTEED


def outranking_note(found: list[tuple[int, str, str, int]]) -> str | None:
    """A warning naming the processes in the reserved cgroups (pid, name, cgroup, adj) that a
    node-wide OOM kills before Guaranteed pods' containers; None when there are none."""
    ranked = [p for p in found if killed_before_guaranteed(p[3])]
    if not ranked:
        return None
    shown = ", ".join(f"{name} (pid {pid}, {where}) {adj}" for pid, name, where, adj in ranked[:8])
    more = f" and {len(ranked) - 8} more" if len(ranked) > 8 else ""
    return (
        f"oom_score_adj above Guaranteed pods' {GUARANTEED}: {shown}{more}. In a node-wide OOM "
        "the kernel kills these daemons before a Guaranteed container of their size "
        f"(EKS AMI #2175); give their units OOMScoreAdjust={DAEMON} (docs/protect.md)."
    )
