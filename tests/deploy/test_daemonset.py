"""deploy/daemonset/cgalloc.yaml: valid against the Kubernetes API schema of apps/v1 DaemonSet,
read-only on the node, and running cgalloc commands with options cgalloc has.

The schema, tests/data/daemonset-apps-v1-1.37-strict.json, is Kubernetes v1.37.0's (from
kubernetes/kubernetes api/openapi-spec/v3/apis__apps__v1_openapi.json at v1.37.0) as
kubernetes-validate 1.37.0 (PyPI, Apache-2.0) converts it to JSON Schema, strict
(additionalProperties: false, so an unknown or misspelt field fails). Trimmed: descriptions
removed, only the definitions DaemonSet reaches kept, refs made local. To regenerate:
``pip download --no-deps kubernetes-validate==1.37.0``, then from its
``kubernetes-json-schema/v1.37.0-local-strict/`` take ``daemonset-apps-v1.json`` and the
``$defs`` of ``_definitions.json`` it reaches, dropping every ``description``.
"""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

import jsonschema
import pytest
import typer.main
import yaml

from cgalloc.cli import app

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy/daemonset/cgalloc.yaml"
SCHEMA = ROOT / "tests/data/daemonset-apps-v1-1.37-strict.json"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@pytest.fixture
def daemonset() -> dict:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    assert [d["kind"] for d in docs] == ["DaemonSet"]
    return docs[0]


def test_the_schema_is_upstreams_daemonset():
    """What kubernetes/kubernetes' apps/v1 OpenAPI (v3) says of DaemonSet and its spec."""
    defs = json.loads(SCHEMA.read_text())["$defs"]
    spec = defs["io.k8s.api.apps.v1.DaemonSetSpec"]
    assert sorted(spec["properties"]) == [
        "minReadySeconds", "revisionHistoryLimit", "selector", "template", "updateStrategy",
    ]  # fmt: skip
    assert spec["required"] == ["selector", "template"]
    top = json.loads(SCHEMA.read_text())
    assert sorted(top["properties"]) == ["apiVersion", "kind", "metadata", "spec", "status"]


def test_the_manifest_is_a_valid_daemonset(validator, daemonset):
    errors = sorted(validator.iter_errors(daemonset), key=lambda e: list(e.path))
    assert [f"{list(e.path)}: {e.message}" for e in errors] == []


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        (["spec", "template", "spec", "containers", 0, "securityContext"],
         "readOnlyRootFileSystem", True),  # misspelt field
        (["spec", "template", "spec", "volumes", 0, "hostPath"], "path", 7),  # wrong type
        (["spec"], "replicas", 3),  # a Deployment's field
    ],
)  # fmt: skip
def test_the_schema_rejects_what_the_api_server_would(validator, daemonset, where, key, value):
    broken = copy.deepcopy(daemonset)
    node = broken
    for step in where:
        node = node[step]
    node[key] = value
    assert list(validator.iter_errors(broken))


def _pod(daemonset: dict) -> dict:
    return daemonset["spec"]["template"]["spec"]


def test_it_writes_nothing_on_the_node(daemonset):
    pod = _pod(daemonset)
    assert pod["automountServiceAccountToken"] is False
    assert not pod.get("hostPID") and not pod.get("hostNetwork") and not pod.get("hostIPC")
    host_volumes = {v["name"] for v in pod["volumes"] if "hostPath" in v}
    assert {v["name"] for v in pod["volumes"]} == host_volumes  # nothing but host paths
    for container in pod["containers"]:
        sc = container["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        for mount in container["volumeMounts"]:
            assert mount["readOnly"] is True, (container["name"], mount)
    types = {v["name"]: v["hostPath"]["type"] for v in pod["volumes"]}
    assert set(types.values()) <= {"Directory", "File"}  # never *OrCreate: no mkdir on the node


def _cgalloc_argv(container: dict) -> list[str]:
    command = container["command"]
    if command[0] == "cgalloc":
        return command
    assert command[:2] == ["/bin/sh", "-c"]
    words = shlex.split(command[2].replace(";", " ; "))
    start = words.index("cgalloc")
    return words[start : words.index(";", start)]


def test_the_containers_run_cgalloc_commands_with_options_it_has(daemonset):
    group = typer.main.get_command(app)
    seen = []
    for container in _pod(daemonset)["containers"]:
        argv = _cgalloc_argv(container)
        command = group.commands[argv[1]]
        known = {o for p in command.params for o in p.opts}
        given = [a.split("=", 1)[0] for a in argv[2:] if a.startswith("--")]
        assert set(given) <= known, (argv[1], set(given) - known)
        seen.append(argv[1])
    assert seen == ["exporter", "verify"]


def test_the_paths_the_commands_read_are_mounted(daemonset):
    for container in _pod(daemonset)["containers"]:
        mounted = [m["mountPath"] for m in container["volumeMounts"]]
        for arg in _cgalloc_argv(container)[2:]:
            flag, _, value = arg.partition("=")
            if flag in ("--cgroupfs", "--config", "--state-dir"):
                assert value in mounted, (container["name"], arg)
