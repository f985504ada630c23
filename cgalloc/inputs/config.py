"""``load_node_config``: node-allocatable settings merged from every input as the kubelet merges
them.

Layers, lowest first: the kubelet's defaults; a KubeletConfiguration file (``--config``); its
drop-in directory (``--config-dir``, every ``*.conf`` under it in the kubelet's walk order,
merged field by field with JSON-merge-patch semantics: maps merge key by key, lists are
replaced); the ``kubeletArguments`` of an OpenShift 3.x ``node-config.yaml``; and the
command-line flags. Each flag layer replaces a field as a whole. The kubelet minor matched
(``--kubelet-version``) decides the defaults (evictionHard), whether ``--config-dir`` exists and
which config fields the files may hold (a field newer than the minor is dropped, as the
kubelet's lenient decode drops it). Every problem of one run is
collected and raised together as one :class:`InputError`, one sentence per problem naming the
field and the accepted form."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from cgalloc.errors import InputError
from cgalloc.inputs.fields import (
    DEFAULTS,
    dedup,
)
from cgalloc.inputs.flags import (
    flag_layer,
)
from cgalloc.inputs.kubeletconfig import (
    config_file_layer,
)
from cgalloc.inputs.openshift import node_config_layer
from cgalloc.inputs.validate import (
    build,
)
from cgalloc.model.eviction import default_eviction_hard
from cgalloc.model.nodeconfig import (
    NodeConfig,
)
from cgalloc.model.versions import DEFAULT_KUBELET_VERSION, has, normalise

GATES = "feature-gates"


def _over(values: dict[str, object], layer: Mapping[str, object]) -> None:
    """``layer``'s values over ``values``. Feature gates merge key by key, the layer's winning:
    cmd/kubelet/app/server.go kubeletConfigFlagPrecedence adds back the config file's gates
    that the flags do not set, and MapStringBool.Set adds each occurrence's."""
    below, gates = values.get(GATES), layer.get(GATES)
    values.update(layer)
    if isinstance(below, dict) and isinstance(gates, dict):
        values[GATES] = {**below, **gates}


def load_node_config(
    flags: Mapping[str, Sequence[str]] | None = None,
    *,
    config: str | None = None,
    config_dir: str | None = None,
    node_config: str | None = None,
    online_cpus: Callable[[], frozenset[int]] | None = None,
) -> NodeConfig:
    """Merge every input into a NodeConfig; raise InputError with every problem found.

    ``flags`` maps a kubelet flag name (without ``--``) to its occurrences in order.
    ``online_cpus`` (this host's: :func:`cgalloc.host.capacity.online_cpus`) is asked only
    to check ``--reserved-cpus`` against the host; without it that check is left out.
    """
    problems: list[str] = []
    values: dict[str, object] = dict(DEFAULTS)
    # the kubelet minor decides the defaults and which fields the files may hold; an
    # unsupported value is refused in validation, and the files are read as the newest's
    given = (flags or {}).get("kubelet-version")
    version = (normalise(given[-1]) if given else None) or DEFAULT_KUBELET_VERSION
    values["eviction-hard"] = default_eviction_hard(version)
    if config_dir and not has(version, "config-dir"):
        problems.append(
            f"--config-dir: the kubelet {version} has no drop-in directory (--config-dir"
            " arrived in 1.28 and refuses to start there); merge the drop-ins into --config"
            " or match a kubelet of 1.28 or later."
        )
        config_dir = None
    _over(values, config_file_layer(config, config_dir, problems, version))
    if node_config:
        _over(values, node_config_layer(node_config, problems))
    _over(values, flag_layer(flags or {}, problems))
    cfg = build(values, online_cpus, problems)
    if cfg is None:
        raise InputError(dedup(problems))
    return cfg
