"""The kubelet's command line as systemd builds it from a unit, and as the kubelet reads it.

Pure text in, values out; ``cgalloc/host/kubelet.py`` finds the files and processes on the
node, ``cgalloc/ops/kubelet_match.py`` puts the two together (``--match-kubelet``).

What systemd does, after its source (src/shared/conf-parser.c, src/core/load-fragment.c,
src/basic/extract-word.c, src/basic/env-file.c, src/basic/env-util.c):

- A unit file is read line by line: a line whose first non-blank character is ``#`` or ``;`` is
  a comment (also inside a continuation); a line ending in an unescaped backslash goes on with
  the next, the backslash becoming a space; ``[Section]`` headers; ``Key=value`` split at the
  first ``=``, both sides stripped. The fragment is read first, then the drop-ins in order;
  an empty ``ExecStart=``, ``Environment=`` or ``EnvironmentFile=`` empties that list.
- ``ExecStart=``: words split at blanks, quotes removed wherever they stand (``a"b c"`` is one
  word ``ab c``), C escapes decoded (an unknown one kept as written), ``%`` specifiers expanded;
  prefixes ``-@:+!`` before the path; a lone ``;`` separates commands. Unbalanced quotes make
  the setting invalid: systemd will not start the unit.
- ``Environment=``: assignments split as words (quotes and C escapes as above); invalid names
  ignored. ``EnvironmentFile=``: a path, ``-`` in front for an optional one, globs allowed;
  files override ``Environment=``, later files override earlier ones.
- An environment file: ``KEY=value`` per line, ``#``/``;`` comments, shell-like quoting
  (``'...'`` verbatim, ``"..."`` with ``\\"``, ``\\\\``, ``\\``` and ``\\$`` unescaped), a
  backslash-newline continues, surrounding blanks dropped; no ``$VAR`` expansion; a line that
  is no valid assignment (``export K=v``, ``1A=b``) is ignored.
- At start the command is expanded unless prefixed ``:``: a word that is exactly ``$NAME`` is
  replaced by the variable's value split into words (quotes respected and removed, no
  escapes), zero words when unset; elsewhere ``${NAME}`` becomes the value as is (one word),
  ``$$`` a ``$``; ``$NAME`` inside a word and ``${NAME:-x}`` stay as written.

The kubelet then parses its arguments with pflag (cmd/kubelet/app/server.go): ``--name=value``
or ``--name value``, except boolean flags, which never take the next argument; ``_`` in a
name reads as ``-`` (cliflag.WordSepNormalizeFunc).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from cgalloc.inputs.fields import KUBELET_FLAGS

WHITESPACE = " \t\n\r"
COMMENTS = "#;"
UNIT_NAME = "kubelet.service"


class UnitSyntaxError(ValueError):
    """A setting systemd refuses: the unit would not start."""


# ---- unit files -------------------------------------------------------------------------


def unit_assignments(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) of every assignment in a unit file's text, in order."""
    out: list[tuple[str, str, str]] = []
    section = ""
    continuation: str | None = None
    lines = text.split("\n")
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    for raw in lines:
        stripped = raw.lstrip(WHITESPACE)
        if stripped and stripped[0] in COMMENTS:
            continue
        line = raw if continuation is None else continuation + raw
        if _ends_escaped(line):
            continuation = line[:-1] + " "
            continue
        continuation = None
        section = _assignment(line, section, out)
    if continuation is not None:
        _assignment(continuation, section, out)
    return out


def _ends_escaped(line: str) -> bool:
    escaped = False
    for c in line:
        escaped = not escaped and c == "\\"
    return escaped


def _assignment(line: str, section: str, out: list[tuple[str, str, str]]) -> str:
    line = line.strip(WHITESPACE)
    if not line:
        return section
    if line[0] == "[":
        return line[1:-1] if line.endswith("]") else section
    key, sep, value = line.partition("=")
    key = key.strip(WHITESPACE)
    if sep and key:
        out.append((section, key, value.strip(WHITESPACE)))
    return section


class UnitSettings(NamedTuple):
    """The [Service] settings of a unit that build the kubelet's command line."""

    exec_start: list[str]  # the ExecStart= values in effect, in order
    environment: list[str]  # Environment= values in effect
    environment_files: list[str]  # EnvironmentFile= values in effect
    working_directory: str


def unit_settings(texts: Iterable[str]) -> UnitSettings:
    """The settings of a unit from its fragment's and drop-ins' texts, in systemd's order."""
    settings = UnitSettings([], [], [], "")
    lists = {
        "ExecStart": settings.exec_start,
        "Environment": settings.environment,
        "EnvironmentFile": settings.environment_files,
    }
    working = ""
    for text in texts:
        for section, key, value in unit_assignments(text):
            if section != "Service":
                continue
            if key == "WorkingDirectory":
                working = value
            elif key in lists:
                if value:
                    lists[key].append(value)
                else:  # an empty assignment resets the list
                    lists[key].clear()
    return settings._replace(working_directory=working)


def parse_systemctl_show(text: str) -> dict[str, str]:
    """``systemctl show -p A -p B`` output (``A=value`` lines) as a dict."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


# ---- words --------------------------------------------------------------------------------

_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", '"': '"', "'": "'", "s": " ",
}  # fmt: skip


def _cunescape_one(text: str, i: int) -> tuple[str, int] | None:
    """systemd's cunescape_one at ``text[i]`` (after the backslash): (char, length) or None."""
    c = text[i] if i < len(text) else ""
    if c in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[c], 1
    widths = {"x": 2, "u": 4, "U": 8}
    if c in widths:
        digits = text[i + 1 : i + 1 + widths[c]]
        if len(digits) != widths[c] or not all(d in "0123456789abcdefABCDEF" for d in digits):
            return None
        code = int(digits, 16)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return None
        return chr(code), 1 + widths[c]
    if c in "0123":
        digits = text[i : i + 3]
        if len(digits) != 3 or not all(d in "01234567" for d in digits):
            return None
        code = int(digits, 8)
        return (chr(code), 3) if code else None
    return None


def extract_words(
    text: str, *, cunescape: bool = False, relax: bool = False
) -> list[str]:
    """systemd's extract_first_word with EXTRACT_UNQUOTE (and EXTRACT_CUNESCAPE, retried
    relaxed as extract_first_word_and_warn does: an unknown escape is kept as written) over
    the whole text. Without ``relax`` unbalanced quotes raise UnitSyntaxError; with it
    (EXTRACT_RELAX) the word ends there and a trailing backslash is dropped."""
    words: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in WHITESPACE:
            i += 1
        if i >= n:
            return words
        word, i = _one_word(text, i, cunescape, relax)
        words.append(word)


def _one_word(text: str, i: int, cunescape: bool, relax: bool) -> tuple[str, int]:
    out: list[str] = []
    quote = ""
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 >= n:
                if cunescape and (not quote or relax):
                    out.append("\\")  # EXTRACT_CUNESCAPE_RELAX keeps a trailing backslash
                elif not relax:
                    raise UnitSyntaxError(f"a trailing backslash in {text!r}")
                return "".join(out), n
            if cunescape:
                decoded = _cunescape_one(text, i + 1)
                if decoded is None:
                    out.append("\\" + text[i + 1])
                    i += 2
                else:
                    out.append(decoded[0])
                    i += 1 + decoded[1]
            else:
                out.append(text[i + 1])
                i += 2
            continue
        if quote:
            if c == quote:
                quote = ""
            else:
                out.append(c)
        elif c in "'\"":
            quote = c
        elif c in WHITESPACE:
            return "".join(out), i
        else:
            out.append(c)
        i += 1
    if quote and not relax:
        raise UnitSyntaxError(f"unbalanced quoting in {text!r}")
    return "".join(out), n


# systemd's specifiers (systemd.unit(5)) that have one value for kubelet.service under the
# system manager; the others (host, machine, boot, ...) make cgalloc give up on the command.
_PATH_SPECIFIERS = {
    "t": "/run", "S": "/var/lib", "C": "/var/cache", "L": "/var/log", "E": "/etc",
    "T": "/tmp", "V": "/var/tmp", "h": "/root", "u": "root", "U": "0", "g": "root", "G": "0",
    "s": "/bin/sh", "i": "", "I": "",
}  # fmt: skip


def expand_specifiers(text: str, unit: str = UNIT_NAME) -> str:
    """``%`` specifiers of ``unit`` in ``text``; UnitSyntaxError for one cgalloc cannot know."""
    prefix = unit.rpartition(".")[0]
    values = {
        **_PATH_SPECIFIERS,
        "n": unit, "N": prefix, "p": prefix, "P": prefix, "j": prefix.rpartition("-")[2],
        "J": prefix.rpartition("-")[2], "f": "/" + prefix, "%": "%",
    }  # fmt: skip
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        spec = text[i + 1 : i + 2]
        if spec not in values:
            raise UnitSyntaxError(
                f"the specifier %{spec} in {text!r} depends on the machine; cgalloc expands"
                f" only {', '.join('%' + k for k in sorted(values))}"
            )
        out.append(values[spec])
        i += 2
    return "".join(out)


class Command(NamedTuple):
    """One ExecStart= command: the program's path, its argv and whether ``$`` expands."""

    path: str
    argv: list[str]
    expand_env: bool


def exec_commands(rvalue: str, unit: str = UNIT_NAME) -> list[Command]:
    """The commands of one ExecStart= value (config_parse_exec); UnitSyntaxError where
    systemd refuses the setting."""
    commands: list[Command] = []
    i, n = 0, len(rvalue)
    while True:
        words: list[str] = []
        while True:
            while i < n and rvalue[i] in WHITESPACE:
                i += 1
            if i >= n:
                break
            end = i + 1
            if rvalue[i] == ";" and (end >= n or rvalue[end] in WHITESPACE):
                i = end
                break
            if rvalue.startswith("\\;", i) and (i + 2 >= n or rvalue[i + 2] in WHITESPACE):
                words.append(";")
                i += 2
                continue
            word, i = _one_word(rvalue, i, True, False)
            words.append(word)
        if words:
            commands.append(_command(words, unit))
        if i >= n:
            return commands


def _command(words: list[str], unit: str) -> Command:
    first, rest = words[0], words[1:]
    seen: list[str] = []  # each prefix once, "!" twice ("!!")
    while first and first[0] in "-@:+!" and seen.count(first[0]) < 1 + (first[0] == "!"):
        seen.append(first[0])
        first = first[1:]
    separate_argv0, expand = "@" in seen, ":" not in seen
    path = expand_specifiers(first, unit)
    if not path or path.endswith("/"):
        raise UnitSyntaxError(f"no executable path in ExecStart={' '.join(words)!r}")
    args = [expand_specifiers(w, unit) for w in rest]
    argv = args if separate_argv0 else [path, *args]
    if not argv:
        raise UnitSyntaxError(f"no argv[0] in ExecStart={' '.join(words)!r}")
    return Command(path, argv, expand)


# ---- environment ------------------------------------------------------------------------

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def env_name_valid(name: str) -> bool:
    return bool(_ENV_NAME.match(name))


def _env_value_valid(value: str) -> bool:
    return all(c in "\t\n" or (ord(c) >= 32 and c != "\x7f") for c in value)


def environment_assignments(rvalue: str, unit: str = UNIT_NAME) -> list[tuple[str, str]]:
    """The valid (name, value) pairs of one Environment= value (config_parse_environ, which
    ignores the whole value when its quoting is unbalanced, and a word whose specifiers it
    cannot resolve)."""
    try:
        words = extract_words(rvalue, cunescape=True)
    except UnitSyntaxError:
        return []
    out = []
    for word in words:
        try:
            word = expand_specifiers(word, unit)
        except UnitSyntaxError:
            continue
        name, sep, value = word.partition("=")
        if sep and env_name_valid(name) and _env_value_valid(value):
            out.append((name, value))
    return out


def environment_file(text: str) -> dict[str, str]:
    """The assignments of an EnvironmentFile= file (parse_env_file_internal, then
    strv_env_clean's refusal of invalid names and values); later ones win."""
    out: dict[str, str] = {}
    for key, value in _env_file_pairs(text):
        if env_name_valid(key) and _env_value_valid(value):
            out.pop(key, None)
            out[key] = value
    return out


def _env_file_pairs(text: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    state = "pre_key"
    key: list[str] = []
    value: list[str] = []
    key_ws = value_ws = -1  # where trailing blanks start in key / value, -1 none

    def push(chomp: bool) -> None:
        k = "".join(key[:key_ws] if key_ws >= 0 else key)
        v = value[:value_ws] if chomp and value_ws >= 0 else value
        pairs.append((k, "".join(v)))

    for c in text:
        if state == "pre_key":
            if c in COMMENTS:
                state = "comment"
            elif c not in WHITESPACE:
                state, key, value, key_ws = "key", [c], [], -1
        elif state == "key":
            if c == "\n":
                state = "pre_key"
            elif c == "=":
                state, value_ws = "pre_value", -1
            else:
                key_ws = _add(key, c, key_ws)
        elif state == "pre_value":
            if c == "\n":
                push(False)
                state = "pre_key"
            elif c == "'":
                state = "single"
            elif c == '"':
                state = "double"
            elif c == "\\":
                state = "value_escape"
            elif c not in WHITESPACE:
                state = "value"
                value.append(c)
        elif state == "value":
            if c == "\n":
                push(True)
                state = "pre_key"
            elif c == "\\":
                state, value_ws = "value_escape", -1
            else:
                value_ws = _add(value, c, value_ws)
        elif state == "value_escape":
            state = "value"
            if c != "\n":
                value.append(c)
        elif state == "single":
            if c == "'":
                state = "pre_value"
            else:
                value.append(c)
        elif state == "double":
            if c == '"':
                state = "pre_value"
            elif c == "\\":
                state = "double_escape"
            else:
                value.append(c)
        elif state == "double_escape":
            state = "double"
            if c in '"\\`$':
                value.append(c)
            elif c != "\n":
                value.extend(("\\", c))
        elif state == "comment":
            if c == "\\":
                state = "comment_escape"
            elif c == "\n":
                state = "pre_key"
        elif state == "comment_escape":
            state = "pre_key" if c == "\n" else "comment"
    if state in ("pre_value", "value", "value_escape", "single", "double", "double_escape"):
        push(state == "value")
    return pairs


def _add(buf: list[str], c: str, blanks_from: int) -> int:
    """Append ``c`` to ``buf``; where the blanks that end ``buf`` start (-1: none)."""
    if c not in WHITESPACE:
        blanks_from = -1
    elif blanks_from < 0:
        blanks_from = len(buf)
    buf.append(c)
    return blanks_from


def unit_environment(
    settings: UnitSettings, files: Mapping[str, str], unit: str = UNIT_NAME
) -> dict[str, str]:
    """The variables ExecStart= sees: Environment= then the files' (``files`` maps each file
    read, in EnvironmentFile= order, to its text)."""
    env: dict[str, str] = {}
    for rvalue in settings.environment:
        for name, value in environment_assignments(rvalue, unit):
            env.pop(name, None)
            env[name] = value
    for text in files.values():
        for name, value in environment_file(text).items():
            env.pop(name, None)
            env[name] = value
    return env


def expand_argv(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """systemd's replace_env_argv: the command line the program gets."""
    out: list[str] = []
    for word in argv:
        if word.startswith("$") and word[1:2] not in ("{", "$"):
            name = word[1:]
            value = env.get(name) if env_name_valid(name) else None
            if value is not None:
                out.extend(extract_words(value, relax=True))
            continue
        out.append(_replace_braces(word, env))
    return out


def _replace_braces(word: str, env: Mapping[str, str]) -> str:
    """replace_env_full with no flags: ``${NAME}`` and ``$$``; anything else stays."""
    out: list[str] = []
    i, n = 0, len(word)
    while i < n:
        if word[i] != "$" or i + 1 >= n:
            out.append(word[i])
            i += 1
        elif word[i + 1] == "$":
            out.append("$")
            i += 2
        elif word[i + 1] == "{":
            end = word.find("}", i + 2)
            name = word[i + 2 : end] if end >= 0 else ""
            if end < 0 or ":" in name:  # unterminated, or ${A:-b}: left as written
                stop = n if end < 0 else end + 1
                out.append(word[i:stop])
                i = stop
                continue
            out.append(env.get(name, "") if env_name_valid(name) else "")
            i = end + 1
        else:
            out.append("$")
            i += 1
    return "".join(out)


# ---- the kubelet's arguments ------------------------------------------------------------

# The kubelet's boolean flags (pflag NoOptDefVal): they never take the next argument
# (cmd/kubelet/app/options/options.go; logsapi and verflag add the last ones; a few older
# releases' too, so an old unit still parses).
BOOL_FLAGS = frozenset({
    "seccomp-default", "exit-on-lock-contention", "register-schedulable",
    "keep-terminated-pod-volumes", "experimental-allocatable-ignore-eviction", "enable-server",
    "fail-swap-on", "anonymous-auth", "authentication-token-webhook",
    "rotate-server-certificates", "rotate-certificates", "enable-debugging-handlers",
    "contention-profiling", "cgroups-per-qos", "runonce", "cpu-cfs-quota",
    "enable-controller-attach-detach", "make-iptables-util-chains", "kernel-memcg-notification",
    "local-storage-capacity-isolation", "serialize-image-pulls", "protect-kernel-defaults",
    "register-node", "log-text-split-stream", "log-json-split-stream", "help", "version",
    "windows-service", "allow-privileged", "logtostderr", "alsologtostderr", "add-dir-header",
    "skip-headers", "skip-log-headers", "one-output",
    "experimental-check-node-capabilities-before-mount", "experimental-kernel-memcg-notification",
    "redirect-container-streaming", "enable-cadvisor-json-endpoints", "require-kubeconfig",
})  # fmt: skip
# Flags that always take a value, even one that starts with '-' (--pod-max-pids -1): those
# cgalloc reads and the kubelet's numeric ones; any other unknown flag takes the next argument
# unless that looks like a flag.
VALUE_FLAGS = (KUBELET_FLAGS - BOOL_FLAGS) | frozenset({
    "config", "config-dir", "container-runtime-endpoint", "oom-score-adj", "v",
    "eviction-max-pod-grace-period", "node-status-max-images", "maximum-dead-containers",
    "maximum-dead-containers-per-container", "volume-stats-agg-period", "port",
    "read-only-port", "healthz-port", "registry-qps", "registry-burst", "event-qps",
    "event-burst", "kube-api-qps", "kube-api-burst", "max-open-files",
})  # fmt: skip
# Read beside the modelled flags: the files, and the runtime for the driver check.
OWN_FLAGS = ("config", "config-dir", "container-runtime-endpoint")


class KubeletArgs(NamedTuple):
    """What cgalloc takes from a kubelet command line."""

    flags: dict[str, list[str]]  # modelled kubelet flag -> occurrences, in order
    config: str | None  # --config (the last one, as StringVar keeps it)
    config_dir: str | None
    endpoint: str | None  # --container-runtime-endpoint
    ignored: list[str]  # flags cgalloc does not model, each once, in order
    stray: list[str]  # positional arguments (the kubelet refuses them: "unknown command")


def kubelet_args(args: Sequence[str]) -> KubeletArgs:
    """The kubelet's arguments (argv without argv[0]) as pflag parses them."""
    flags: dict[str, list[str]] = {}
    own: dict[str, str] = {}
    ignored: list[str] = []
    stray: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            stray.extend(args[i:])
            break
        if not arg.startswith("-") or arg == "-":
            stray.append(arg)
            continue
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            name = name.replace("_", "-")
        else:  # shorthands: -v LEVEL (klog), -h
            name, value, eq = arg[1:2], arg[2:].removeprefix("="), "=" if arg[2:] else ""
            name = {"v": "v", "h": "help"}.get(name, name)
        if not eq:
            following = args[i] if i < len(args) else None
            takes = name in VALUE_FLAGS or (
                name not in BOOL_FLAGS and following is not None and not following.startswith("-")
            )
            if takes and following is not None:
                value, i = following, i + 1
            else:
                value = "true"
        if name in OWN_FLAGS:
            own[name] = value
        elif name in KUBELET_FLAGS:
            flags.setdefault(name, []).append(value)
        elif name not in ignored:
            ignored.append(name)
    return KubeletArgs(
        flags, own.get("config"), own.get("config-dir"), own.get("container-runtime-endpoint"),
        ignored, stray,
    )  # fmt: skip


def kubelet_argv_start(argv: Sequence[str]) -> int | None:
    """Where the kubelet's own arguments start in a command (the index after the kubelet
    program: ``/usr/bin/kubelet``, ``hyperkube kubelet``, a wrapper such as
    ``systemd-inhibit ... /usr/bin/kubelet``), None when it runs no kubelet."""
    for i, word in enumerate(argv):
        base = posixpath.basename(word)
        if base == "kubelet":
            return i + 1
        if base == "hyperkube" and argv[i + 1 : i + 2] == ["kubelet"]:
            return i + 2
    return None


_VERSION = re.compile(r"v?([0-9]+)\.([0-9]+)(?:\.[0-9]+)?\S*")


def kubelet_version(text: str) -> tuple[str, tuple[int, int]] | None:
    """``kubelet --version``'s output ("Kubernetes v1.36.2") as (the version as printed,
    (major, minor)); None when it names none."""
    for word in text.split():
        match = _VERSION.fullmatch(word)
        if match:
            return word, (int(match.group(1)), int(match.group(2)))
    return None


def resolve_path(path: str, cwd: str) -> str:
    """A path the kubelet was given, as the kubelet opens it from ``cwd``."""
    return posixpath.normpath(posixpath.join(cwd or "/", path))
