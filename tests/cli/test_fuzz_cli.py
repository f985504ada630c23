"""Fuzzing every command's inputs on fake trees: flags, config files, drop-ins, node-config,
pods files and state records. Whatever the input: exit 0, 1, 2 or 3, never an uncaught
exception (in-process, a traceback would surface as one and fail the test), every line printed
printable, and an exit 2 wrote nothing (the tree byte-identical, no state directory created).

Bounded: a fixed number of examples per command and no per-example deadline. Each test prints
how many cases it tried and the exits seen (``pytest -s``; docs/safety.md quotes
these figures).
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml
from clirun import keep_escapes, run_cli
from fakecgroup import fake_hierarchy, snapshot, use_fake_tree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# per test and tree version; raise it for a longer campaign (test-suite knob, not the tool's)
EXAMPLES = int(os.environ.get("CGALLOC_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    deadline=None,
    max_examples=EXAMPLES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
EXITS = {0, 1, 2, 3}

# Values near what the parsers expect, and hostile ones.
QUANTITY = st.one_of(
    st.sampled_from(["0", "1", "500m", "1Gi", "8Ei", "1e400", "1e-9999999", "-1", "9" * 40,
                     "18446744073709555712", "4194305", "1.5", "nan", "", "\x00", "1Gi\n"]),
    st.from_regex(r"\A-?[0-9]{1,25}(\.[0-9]{1,5})?([eE]-?[0-9]{1,4}|[kMGTPE]i?|m)?\Z"),
    st.text(max_size=12),
)  # fmt: skip
RESOURCE = st.sampled_from(["cpu", "memory", "pid", "ephemeral-storage", "hugepages-2Mi", "x"])
PAIRS = st.lists(st.tuples(RESOURCE, QUANTITY), max_size=4).map(
    lambda kv: ",".join(f"{k}={v}" for k, v in kv)
)
CGROUP = st.one_of(
    st.sampled_from(["/system.slice", "/kube.slice", "/", "", "relative", "/kubepods",
                     "/kubepods/x", "/a\nb", "/a\x00b", "/" + "a" * 300, "/..", "/x/../..",
                     "system.slice", "/" + "/".join(["a"] * 2100)]),
    st.text(max_size=20).map(lambda t: "/" + t),
)  # fmt: skip
ENFORCE = st.lists(
    st.sampled_from(["pods", "system-reserved", "kube-reserved", "none", "x"]), max_size=3
).map(",".join)
EVICTION = st.one_of(
    st.sampled_from(["memory.available<100Mi", "memory.available<1e-9999999%",
                     "nodefs.available<10%", "memory.available<1e400", "x<1"]),
    st.tuples(st.sampled_from(["memory.available", "nodefs.available"]), QUANTITY).map(
        lambda t: f"{t[0]}<{t[1]}"
    ),
)  # fmt: skip
FLAG = st.one_of(
    st.tuples(st.just("--kube-reserved"), PAIRS),
    st.tuples(st.just("--system-reserved"), PAIRS),
    st.tuples(st.just("--capacity"), PAIRS),
    st.tuples(st.just("--kube-reserved-cgroup"), CGROUP),
    st.tuples(st.just("--system-reserved-cgroup"), CGROUP),
    st.tuples(st.just("--cgroup-root"), CGROUP),
    st.tuples(st.just("--enforce-node-allocatable"), ENFORCE),
    st.tuples(st.just("--eviction-hard"), EVICTION),
    st.tuples(st.just("--reserved-cpus"), st.sampled_from(["0", "0-3", "99999", "3-1", "x", ""])),
    st.tuples(st.just("--cgroup-driver"), st.sampled_from(["cgroupfs", "systemd", "x"])),
    st.tuples(st.just("--pod-max-pids"), st.sampled_from(["-1", "100", "-5", "x", "9" * 30])),
)
BASE = ["--capacity", "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi"]
FLAGS = st.lists(FLAG, max_size=5).map(lambda fs: [x for f in fs for x in f])

# Documents: a KubeletConfiguration-shaped mapping, arbitrary YAML, or raw bytes.
JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)  # fmt: skip
# Each field well formed, or any JSON-shaped value (wrong types, nulls inside lists and maps:
# a null list item once gave a traceback).
_FIELD_VALUES = {
    "kubeReserved": st.dictionaries(RESOURCE, QUANTITY, max_size=3),
    "systemReserved": st.dictionaries(RESOURCE, QUANTITY, max_size=3),
    "evictionHard": st.dictionaries(st.sampled_from(["memory.available"]), QUANTITY),
    "enforceNodeAllocatable": st.lists(st.one_of(ENFORCE, st.none()), max_size=3),
    "systemReservedCgroup": CGROUP,
    "kubeReservedCgroup": CGROUP,
    "cgroupRoot": CGROUP,
    "podPidsLimit": st.one_of(st.integers(), st.text(max_size=5)),
    "featureGates": st.dictionaries(
        st.sampled_from(["MemoryQoS", "QOSReserved", "AllAlpha"]),
        st.one_of(st.booleans(), st.none()),
        max_size=2,
    ),
    "qosReserved": st.dictionaries(st.sampled_from(["memory", "cpu"]), st.text(max_size=5)),
    "maxPods": st.one_of(st.integers(), st.none()),
    "cgroupsPerQOS": st.one_of(st.booleans(), st.none()),
    "cpuManagerPolicy": st.sampled_from(["none", "static", "", "x"]),
    "reservedSystemCPUs": st.sampled_from(["0", "0-1", "", "9999", "a"]),
}
CONFIG_FIELDS = st.fixed_dictionaries(
    {},
    optional={**{k: st.one_of(v, JSONISH) for k, v in _FIELD_VALUES.items()}, "junk": JSONISH},
).map(lambda d: {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                 **d})  # fmt: skip


def _dump(doc) -> bytes:
    return yaml.safe_dump(doc, allow_unicode=True).encode("utf-8", "surrogatepass")


DOCUMENT = st.one_of(
    CONFIG_FIELDS.map(_dump),
    JSONISH.map(_dump),
    st.binary(max_size=200),
    st.sampled_from([b"[" * 5000, b"a: &a [1,2]\nb: [*a,*a,*a]\n", b"\xff\xfe", b"---\n---\n",
                     b"!!python/object:os.system x", b"a: " + b"1" * 5000]),
)  # fmt: skip
POD = st.fixed_dictionaries(
    {"uid": st.one_of(st.uuids().map(str), st.text(max_size=10)),
     "qos": st.sampled_from(["guaranteed", "burstable", "besteffort", "x"])},
    optional={k: QUANTITY for k in ("cpuRequest", "cpuLimit", "memoryRequest", "memoryLimit")},
)  # fmt: skip


# A v1 Pod as kubectl prints it, each part well formed or any JSON-shaped value (nulls inside).
def _either(strategy):
    # mostly well formed, so that whole pods reach planning too
    return st.one_of(strategy, strategy, strategy, JSONISH)


_RESOURCES = _either(st.dictionaries(st.sampled_from(["cpu", "memory", "hugepages-2Mi", "x/y"]),
                                     st.one_of(st.sampled_from(["100m", "1", "256Mi", "1Gi"]),
                                               QUANTITY, st.none()), max_size=3))  # fmt: skip
_CONTAINER = _either(st.fixed_dictionaries(
    {"name": _either(st.sampled_from(["c", "d"]))},
    optional={"resources": _either(st.fixed_dictionaries(
        {}, optional={"requests": _RESOURCES, "limits": _RESOURCES}))},
))  # fmt: skip
KUBE_POD = st.fixed_dictionaries(
    {"apiVersion": st.just("v1"), "kind": st.just("Pod"),
     "metadata": _either(st.fixed_dictionaries(
         {"name": _either(st.just("p")), "uid": _either(st.uuids().map(str))},
         optional={"namespace": _either(st.just("ns"))})),
     "spec": _either(st.fixed_dictionaries(
         {"containers": _either(st.lists(_CONTAINER, min_size=1, max_size=2))},
         optional={"initContainers": _either(st.lists(_CONTAINER, max_size=1)),
                   "overhead": _RESOURCES}))},
)  # fmt: skip
# Whole, well-formed pods whose resource values alone may be hostile, most of them sane or
# large but valid, so that most reach planning, where a value past the kernel's range meets the
# tree (the KUBE_POD documents above are mostly refused before it).
_SANE = st.sampled_from(["100m", "1", "2", "256Mi", "1Gi", "0"])
_LARGE = st.sampled_from(["1e15", "8Ei", "9223372036854775807", str(2**64 + 4096), "100000",
                          "1n", "1u", "999999999999m", "4096Pi", "1.5", "0.001"])  # fmt: skip
_VALUES = st.dictionaries(
    st.sampled_from(["cpu", "cpu", "memory", "memory", "hugepages-2Mi", "ephemeral-storage"]),
    st.one_of(_SANE, _SANE, _SANE, _LARGE, QUANTITY),
    max_size=2,
)


def _whole_pods(values, requests):
    """Lists of whole pods whose resources are drawn from ``values``: both requests and
    limits with ``requests``, else one of the two (the other defaults from it)."""
    both = st.builds(lambda r, lim: {"requests": r, "limits": lim}, values, values)
    one = st.builds(lambda key, v: {key: v}, st.sampled_from(["requests", "limits", "limits"]),
                    values)  # fmt: skip
    container = st.builds(
        lambda name, res: {"name": name, "resources": res},
        st.sampled_from(["c", "d", "e"]),
        both if requests else one,
    )
    pod = st.builds(
        lambda uid, cs, ics, overhead, prio: {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": uid},
            "spec": {
                "containers": cs,
                "initContainers": ics,
                "overhead": overhead,
                **({"priorityClassName": prio} if prio else {}),
            },
        },
        st.uuids().map(str),
        st.lists(container, min_size=1, max_size=3, unique_by=lambda c: c["name"]),
        st.lists(container.map(lambda c: {**c, "name": "i" + c["name"]}), max_size=1),
        st.one_of(st.just({}), values),
        st.sampled_from([None, "system-node-critical"]),
    )
    return st.lists(pod, min_size=1, max_size=4).map(
        lambda items: json.dumps({"apiVersion": "v1", "kind": "List", "items": items}).encode()
    )  # fmt: skip


WHOLE_PODS = _whole_pods(_VALUES, requests=True)
# Valid values only, often past the kernel's range (a 10^20 µs quota, a memory limit the kernel
# would wrap to 4096): all reach planning, many with several value refusals, so show's warnings
# and setup's refusals are compared value by value and in order.
_PAST_RANGE = st.sampled_from(["1e15", str(2**64 + 4096)])
_IN_SPEC = st.one_of(_SANE, _SANE, _PAST_RANGE, st.sampled_from(["8Ei", "4096Pi", "100000"]))
IN_SPEC_PODS = _whole_pods(
    st.fixed_dictionaries({"cpu": _IN_SPEC, "memory": _IN_SPEC}),
    requests=False,
)
PODS = st.one_of(
    WHOLE_PODS,
    st.lists(POD, max_size=4).map(lambda p: json.dumps(p).encode()),
    st.lists(KUBE_POD, max_size=3).map(
        lambda items: json.dumps({"apiVersion": "v1", "kind": "List", "items": items}).encode()
    ),
    DOCUMENT,
)

TALLY: dict[str, Counter] = {}


def _shown(c: str) -> bool:
    return c.isprintable() or "\udc80" <= c <= "\udcff"


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    for name, exits in sorted(TALLY.items()):
        total = sum(exits.values())
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(exits.items()))
        print(f"\nfuzz {name}: {total} cases ({shown})")


class Node:
    """A fake v1 or v2 tree with its state dir, reused across examples."""

    def __init__(self, base: Path, version: str, monkeypatch):
        self.base = base
        self.root, _ = fake_hierarchy(base, version)
        use_fake_tree(monkeypatch, base)
        keep_escapes(monkeypatch)  # or click deletes a raw colour code before the check sees it
        self.state = base / "state"
        self.files = base / "inputs"
        self.files.mkdir()

    def where(self) -> list[str]:
        return ["--cgroupfs", str(self.root), "--state-dir", str(self.state)]

    def write(self, name: str, data: bytes) -> str:
        path = self.files / name
        path.write_bytes(data)
        return str(path)

    def run(self, capsys, name: str, *argv: str):
        """(exit status, stdout, stderr) of ``cgalloc ARGV``, checked as the module says."""
        before = snapshot(self.root)
        had_state = self.state.exists()
        code, out, err = run_cli(capsys, *argv)
        TALLY.setdefault(name, Counter())[f"exit {code}"] += 1
        assert code in EXITS, (argv, code, err)
        assert "Traceback" not in err
        # nothing that acts on a terminal (cli.render.printable); non-UTF-8 bytes go out as bytes
        unshown = [x for x in (out + err).split("\n") if not all(map(_shown, x))]
        assert not unshown, (argv, unshown)
        if code == 2:
            assert snapshot(self.root) == before, (argv, err)
            assert self.state.exists() == had_state, (argv, err)
        return code, out, err


@pytest.fixture(params=["v1", "v2"])
def node(request, tmp_path, monkeypatch):
    return Node(tmp_path / request.param, request.param, monkeypatch)


@FUZZ
@given(flags=FLAGS, dry=st.booleans())
def test_fuzz_setup_flags(node, capsys, flags, dry):
    extra = ["--dry-run"] if dry else []
    node.run(capsys, "setup flags", "setup", *BASE, *flags, *extra, *node.where())


@FUZZ
@given(flags=FLAGS)
def test_fuzz_verify_and_show_flags(node, capsys, flags):
    node.run(capsys, "verify flags", "verify", *BASE, *flags, "--cgroupfs", str(node.root))
    node.run(capsys, "show flags", "show", *BASE, *flags)


@FUZZ
@given(config=DOCUMENT, dropin=DOCUMENT, flags=FLAGS)
def test_fuzz_config_and_dropins(node, capsys, config, dropin, flags):
    path = node.write("config.yaml", config)
    dropins = node.files / "conf.d"
    dropins.mkdir(exist_ok=True)
    (dropins / "10-a.conf").write_bytes(dropin)
    argv = ["--config", path, "--config-dir", str(dropins), *BASE, *flags]
    node.run(capsys, "setup --config/--config-dir", "setup", *argv, *node.where())


NODE_CONFIG = st.fixed_dictionaries(
    {
        "kubeletArguments": st.dictionaries(
            st.sampled_from(["kube-reserved", "system-reserved", "cgroup-root", "x"]),
            st.lists(st.text(max_size=12), max_size=2),
            max_size=3,
        )
    }
).map(lambda d: _dump({"apiVersion": "v1", "kind": "NodeConfig", **d}))


@FUZZ
@given(doc=st.one_of(DOCUMENT, NODE_CONFIG))
def test_fuzz_node_config(node, capsys, doc):
    argv = ["--node-config", node.write("node-config.yaml", doc), *BASE]
    node.run(capsys, "setup --node-config", "setup", *argv, *node.where())


@FUZZ
@given(pods=PODS)
def test_fuzz_pods_file(node, capsys, pods):
    argv = ["--pods", node.write("pods.json", pods), *BASE]
    node.run(capsys, "setup --pods", "setup", *argv, *node.where())


@pytest.fixture
def v1node(tmp_path, monkeypatch):
    return Node(tmp_path / "v1", "v1", monkeypatch)


@FUZZ
@given(pods=IN_SPEC_PODS)
def test_fuzz_show_warns_of_what_setup_refuses(v1node, capsys, pods):
    """show and a dry-run setup on a v1 tree agree on whole pods: the same input refusal, or
    show's value warnings are setup's refusals, in setup's order (tree.value_refusals beside
    plan.build)."""
    argv = ["--pods", v1node.write("pods.json", pods), *BASE]
    shown, out, show_err = v1node.run(capsys, "show --pods (whole pods)", "show", *argv,
                                      "-o", "json")  # fmt: skip
    setup, _, setup_err = v1node.run(capsys, "setup --dry-run --pods (whole pods)", "setup",
                                     *argv, "--dry-run", *v1node.where())  # fmt: skip
    if shown == 2:
        assert setup == 2 and setup_err == show_err, (show_err, setup_err)
        return
    prefix = "setup refuses this value: "
    warned = [w.removeprefix(prefix) for w in json.loads(out)["warnings"] if w.startswith(prefix)]
    refused = [line.removeprefix("cgalloc: ") for line in setup_err.splitlines()
               if not line.startswith("cgalloc: warning: ")]  # fmt: skip
    TALLY.setdefault("value refusals (whole pods)", Counter())[f"{len(warned)} values"] += 1
    assert setup == (2 if warned else 0), (warned, setup_err)
    assert not warned or warned == refused, (warned, refused)


RECORD = st.one_of(
    st.binary(max_size=120),
    JSONISH.map(lambda d: json.dumps(d).encode()),
    st.fixed_dictionaries(
        {"version": st.sampled_from([1, 2, "1"])},
        optional={
            "created": st.lists(st.lists(CGROUP, min_size=2, max_size=2), max_size=3),
            "changed": st.lists(st.lists(st.text(max_size=8), min_size=4, max_size=4), max_size=3),
            "enabled": st.lists(JSONISH, max_size=2),
            # what the record manages (version 2): entries outside it are refused
            "managed": st.fixed_dictionaries(
                {}, optional={"kubepods": st.lists(CGROUP, max_size=2),
                              "reserved": st.lists(CGROUP, max_size=2)},
            ) | JSONISH,
        },
    ).map(lambda d: json.dumps(d).encode()),
)
JOURNAL = st.one_of(
    st.binary(max_size=120),
    st.lists(
        st.fixed_dictionaries(
            {"kind": st.sampled_from(["mkdir", "write", "enable", "managed", "rm"]),
             "mount": CGROUP, "path": st.sampled_from(["", "kubepods", "../x", "a/b"])},
            optional={"file": st.text(max_size=8), "old": st.none() | st.text(max_size=4),
                      "controllers": st.lists(st.text(max_size=4), max_size=2),
                      "kubepods": st.lists(CGROUP, max_size=2)},
        ), max_size=3,
    ).map(lambda es: "".join(json.dumps(e) + "\n" for e in es).encode()),
)  # fmt: skip


@FUZZ
@given(
    record=st.none() | RECORD,
    journal=st.none() | JOURNAL,
    command=st.sampled_from(["setup", "teardown", "verify"]),
)
def test_fuzz_state_records(node, capsys, record, journal, command):  # fmt: skip
    shutil.rmtree(node.state, ignore_errors=True)
    node.state.mkdir()
    if record is not None:
        (node.state / "owned.json").write_bytes(record)
    if journal is not None:
        (node.state / "journal.jsonl").write_bytes(journal)
    extra = [*BASE] if command != "teardown" else []
    node.run(capsys, f"{command} with a state record", command, *extra, *node.where())
