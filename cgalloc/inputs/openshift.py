"""An OpenShift 3.x ``node-config.yaml`` (``--node-config``): its ``kubeletArguments`` as a flag
layer."""

from __future__ import annotations

from cgalloc.inputs.fields import (
    KUBELET_FLAGS,
)
from cgalloc.inputs.flags import (
    flag_layer,
)
from cgalloc.inputs.kubeletconfig import (
    check_kind,
    read_document,
    scalar_text,
)

NODE_CONFIG_API_VERSION = "v1"
NODE_CONFIG_KIND = "NodeConfig"

def node_config_layer(path: str, problems: list[str]) -> dict[str, object]:
    """Flag values from the ``kubeletArguments`` of an OpenShift 3.x node-config.yaml."""
    expected = f"an OpenShift {NODE_CONFIG_KIND} document (apiVersion {NODE_CONFIG_API_VERSION})"
    doc = read_document(path, "--node-config", expected, problems)
    if doc is None or not check_kind(
        doc, path, "--node-config", NODE_CONFIG_API_VERSION, NODE_CONFIG_KIND, problems
    ):
        return {}
    arguments = doc.get("kubeletArguments") or {}
    if not isinstance(arguments, dict):
        problems.append(
            f"--node-config: kubeletArguments in {path} is not a mapping; expected flag names"
            " mapped to lists of strings."
        )
        return {}
    args: dict[str, list[str]] = {}
    for flag, values in arguments.items():
        items = values if isinstance(values, list) else [values]
        texts = [scalar_text(v) for v in items]
        if any(t is None for t in texts):
            problems.append(
                f"--node-config: kubeletArguments.{flag} in {path} is not a list of strings;"
                ' expected a list such as ["cpu=200m,memory=512Mi"].'
            )
            continue
        args[str(flag)] = [t for t in texts if t is not None]
    return flag_layer(args, problems, allowed=KUBELET_FLAGS)
