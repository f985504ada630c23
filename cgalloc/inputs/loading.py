"""Reading input files as a hostile user may write them: bounded in size, depth and alias
expansion, strict UTF-8, regular files only. Every refusal is an :class:`InputError` naming
the field.

cgalloc runs as root; a config file, drop-in or pods list must not be able to hang it (a FIFO,
``/dev/zero``), exhaust its memory (a 30 MB file, a YAML alias bomb) or crash it (deep nesting,
bytes that are not UTF-8).
"""

from __future__ import annotations

import functools
import os
import re
import stat

from cgalloc.errors import InputError

FILE_LIMIT = 4 << 20  # bytes: a KubeletConfiguration is a few KiB, 10,000 pods well under 4 MiB
MAX_DEPTH = 64  # nesting of mappings/sequences; a KubeletConfiguration needs 3
MAX_NODES = 1_000_000  # values after expanding every alias (what the program would walk)


def _yaml():  # imported here, not at the top: commands without an input file never need it
    import yaml

    return yaml


GO_SCALAR_TAG = "tag:cgalloc,2026:go-yaml-scalar"
_REPLACED_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float")}


@functools.cache
def _loader(yaml):
    """YAML's safe loader (libyaml's parser when built in: the pure-Python one is ~10x slower
    on large pods lists) with bools, ints and floats resolved as the kubelet's go-yaml v2
    resolves them (:func:`cgalloc.inputs.gostrconv.go_yaml_scalar`), not by PyYAML's YAML 1.1 rules:
    "cpu: 1e3" is a number to the kubelet, which then refuses it where a string belongs."""
    from cgalloc.inputs.gostrconv import GO_YAML_WORDS, go_yaml_scalar

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class GoYamlLoader(base):  # type: ignore[misc,valid-type]
        pass

    GoYamlLoader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in _REPLACED_TAGS]
        for first, resolvers in base.yaml_implicit_resolvers.items()
    }

    words = "|".join(re.escape(w) for w in GO_YAML_WORDS)
    # after the timestamp resolver (go-yaml also tries a timestamp first)
    GoYamlLoader.add_implicit_resolver(
        GO_SCALAR_TAG,
        re.compile(rf"^(?:[-+0-9.].*|{words})$", re.DOTALL),
        list("-+0123456789.yYnNtTfFoO"),
    )
    GoYamlLoader.add_constructor(
        GO_SCALAR_TAG, lambda loader, node: go_yaml_scalar(loader.construct_scalar(node))
    )
    return GoYamlLoader


class NotRegularFile(OSError):
    """A path that names a FIFO, device, directory or socket where a file belongs."""


def read_regular(path: str, limit: int) -> bytes:
    """At most ``limit`` + 1 bytes of the regular file ``path`` (one more tells it is larger);
    OSError when it cannot be read or is not a regular file (a FIFO would block a read)."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer; regular files ignore it
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"{path} is not a regular file")
        return read_fd(fd, limit)
    finally:
        os.close(fd)


def read_fd(fd: int, limit: int) -> bytes:
    """At most ``limit`` + 1 bytes from the open regular file ``fd`` (one more tells it is
    larger), for a caller that opened it its own way (without following a symlink)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_bounded(
    path: str, field: str, limit: int = FILE_LIMIT, kind: str = "YAML or JSON file"
) -> str:
    """The text of the regular file ``path``, at most ``limit`` bytes, strictly UTF-8;
    refusals name ``field`` and ask for a ``kind``."""
    try:
        data = read_regular(path, limit)
    except NotRegularFile as exc:
        raise InputError(f"{field}: {exc}; give a {kind}.") from None
    except OSError as exc:
        raise InputError(f"{field}: cannot read {path} ({exc.strerror or exc}).") from None
    return bounded_text(data, path, field, limit, kind)


def bounded_text(
    data: bytes, path: str, field: str, limit: int = FILE_LIMIT, kind: str = "YAML or JSON file"
) -> str:
    """What :func:`read_bounded` makes of the bytes read from ``path`` (at most ``limit`` + 1
    of them), for a caller that opened the file its own way."""
    size = len(data)
    if size > limit:
        raise InputError(
            f"{field}: {path} is larger than {_size(limit)}; give a file of at most that size."
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{field}: {path} is not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x}); "
            f"give a UTF-8 {kind}."
        ) from None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def load_yaml_documents(text: str, field: str) -> list[object]:
    """Every YAML (or JSON) document in ``text``, with YAML's safe types only.

    Before anything is built, one pass over the parser's events refuses nesting deeper than
    :data:`MAX_DEPTH` and documents whose aliases expand to more than :data:`MAX_NODES`
    values (an alias bomb builds cheaply but exhausts memory when walked).
    """
    if len(text) > FILE_LIMIT:
        raise InputError(f"{field} is larger than {_size(FILE_LIMIT)}; give at most that.")
    yaml = _yaml()
    try:
        _check_shape(yaml, text, field)
        return list(yaml.load_all(text, Loader=_loader(yaml)))
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):  # libyaml's own bound (PyYAML 6.0.4's, 1000)
            raise _too_deep(field) from None
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{field} is not valid YAML or JSON{where}.") from None
    except (ValueError, OverflowError, RecursionError) as exc:
        # safe types that Python cannot hold: a 5000-digit integer, a timestamp in year 0
        reason = str(exc).split(":")[0] or type(exc).__name__
        raise InputError(f"{field} holds a value out of range ({reason}).") from None


def _too_deep(field: str) -> InputError:
    return InputError(f"{field} nests deeper than {MAX_DEPTH} levels; give a flatter document.")


def _check_shape(yaml, text: str, field: str) -> None:
    sizes: dict[str, int] = {}  # anchor -> values it expands to
    stack: list[list] = []  # open collections: [anchor, values so far]
    total = 0
    for event in yaml.parse(text, Loader=_loader(yaml)):
        if isinstance(event, yaml.DocumentStartEvent):
            sizes.clear()
            continue
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise _too_deep(field)
            stack.append([event.anchor, 1])
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, count = stack.pop()
        elif isinstance(event, yaml.AliasEvent):
            if any(open_anchor == event.anchor for open_anchor, _ in stack):
                # go-yaml: "anchor 'a' value contains itself"; PyYAML builds a cycle that
                # every walk of it recurses through
                raise InputError(
                    f"{field}: the YAML anchor {event.anchor!r} value contains itself; give"
                    " the document without an alias inside its own anchor."
                )
            anchor, count = None, sizes.get(event.anchor, 1)
        elif isinstance(event, yaml.ScalarEvent):
            anchor, count = event.anchor, 1
        else:
            continue
        if anchor is not None:
            sizes[anchor] = count
        if stack:
            stack[-1][1] += count
        total += count if not stack else 0
        if total > MAX_NODES or (stack and stack[-1][1] > MAX_NODES):
            raise InputError(
                f"{field} holds more than {MAX_NODES:,} values (YAML aliases expanded); "
                "give a smaller document, without aliases repeating large parts."
            )
