"""The kubelet's command line as systemd builds it from a unit and the kubelet parses it
(cgalloc/inputs/kubeletunit.py): tables after systemd's parsers (conf-parser.c,
load-fragment.c config_parse_exec, extract-word.c, env-file.c, env-util.c replace_env_argv)
and pflag."""

from __future__ import annotations

import pytest

from cgalloc.inputs import kubeletunit as ku

# kubeadm's drop-in as the kubeadm package installs it
# (kubernetes/release cmd/krel/templates/latest/kubeadm: %{_unitdir}/kubelet.service.d)
KUBEADM_DROPIN = """\
# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generate at runtime
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""  # noqa: E501
PACKAGE_UNIT = "[Unit]\nDescription=k\n[Service]\nExecStart=/usr/bin/kubelet\nRestart=always\n"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("[Service]\nExecStart=/a b\n", [("Service", "ExecStart", "/a b")]),
        # keys and values stripped; a line without '=' or without a key is ignored
        ("[Service]\n  ExecStart =  /a  \nnonsense\n=x\n", [("Service", "ExecStart", "/a")]),
        # comments only at the start of a line (after blanks); '#' later is text
        ("[Service]\n  # ExecStart=/no\n;x=1\nA=b # c\n", [("Service", "A", "b # c")]),
        # a trailing backslash continues the line, the backslash becoming a space
        ("[Service]\nExecStart=/a \\\n  --b \\\n  --c\n",
         [("Service", "ExecStart", "/a    --b    --c")]),
        # comment lines inside a continuation are skipped
        ("[Service]\nExecStart=/a \\\n# --no \\\n  --c\n", [("Service", "ExecStart", "/a    --c")]),
        # an escaped backslash at the end is no continuation
        ("[Service]\nA=x\\\\\nB=y\n", [("Service", "A", "x\\\\"), ("Service", "B", "y")]),
        # sections switch; a byte order mark before the first line is skipped
        ("\ufeff[Unit]\nA=1\n[Service]\nA=2\n", [("Unit", "A", "1"), ("Service", "A", "2")]),
        # a continuation at the end of the file still counts
        ("[Service]\nA=x \\", [("Service", "A", "x")]),
    ],
)  # fmt: skip
def test_unit_file_lines(text, want):
    assert ku.unit_assignments(text) == want


def test_dropins_reset_and_extend_lists_in_order():
    settings = ku.unit_settings(
        [
            PACKAGE_UNIT + "Environment=A=1\nEnvironmentFile=/etc/one\n",
            KUBEADM_DROPIN,
            "[Service]\nEnvironment=\nEnvironment=B=2\nEnvironmentFile=\n[Unit]\nExecStart=\n",
        ]
    )
    # the drop-in's empty ExecStart= dropped the package's; [Unit]'s ExecStart= is not one
    assert settings.exec_start == [
        "/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS"
        " $KUBELET_EXTRA_ARGS"
    ]
    assert settings.environment == ["B=2"]
    assert settings.environment_files == []


@pytest.mark.parametrize(
    ("value", "argv"),
    [
        ("/usr/bin/kubelet --a=1   --b 2", ["/usr/bin/kubelet", "--a=1", "--b", "2"]),
        # quotes anywhere in a word join it; both kinds; removed
        ('/k --x="a b" \'c d\' e"f g"h', ["/k", "--x=a b", "c d", "ef gh"]),
        # C escapes decoded; an unknown one kept as written (a blank after it too)
        (r"/k \x41 \t \q a\ b", ["/k", "A", "\t", "\\q", "a\\ b"]),
        (r'/k "q\"uote"', ["/k", 'q"uote']),
        # specifiers, %% a percent
        ("/k --name=%n --n=%N --p=%%x --d=%t/x", ["/k", "--name=kubelet.service",
                                                   "--n=kubelet", "--p=%x", "--d=/run/x"]),
        # prefixes before the path; @ makes the next word argv[0]
        ("-/usr/bin/kubelet --a", ["/usr/bin/kubelet", "--a"]),
        ("@/usr/bin/kubelet kubelet --a", ["kubelet", "--a"]),
        ("+!!/usr/bin/kubelet", ["/usr/bin/kubelet"]),
        # $ is left for the start
        ("/k $A ${B} $$", ["/k", "$A", "${B}", "$$"]),
        ('/k "$A"', ["/k", "$A"]),  # quoted: still a whole-word $A (split at start)
    ],
)  # fmt: skip
def test_exec_start_words(value, argv):
    [command] = ku.exec_commands(value)
    assert command.argv == argv


def test_exec_start_commands_split_at_lone_semicolons():
    commands = ku.exec_commands("/a x ; /b \\; y;z")
    assert [c.argv for c in commands] == [["/a", "x"], ["/b", ";", "y;z"]]


def test_exec_start_colon_prefix_disables_expansion():
    [command] = ku.exec_commands(":/usr/bin/kubelet $A")
    assert (command.path, command.expand_env) == ("/usr/bin/kubelet", False)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('/k "unbalanced', "unbalanced quoting"),
        ("/k --host=%H", "the specifier %H"),
        ("-", "no executable path"),
        ("@/k", "no argv"),
    ],
)
def test_exec_start_systemd_refuses(value, message):
    with pytest.raises(ku.UnitSyntaxError, match=message):
        ku.exec_commands(value)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ('"A=x y" B=z "C=a b c"', [("A", "x y"), ("B", "z"), ("C", "a b c")]),
        (r'"A=tab\there" 1B=no C-D=no E=%n', [("A", "tab\there"), ("E", "kubelet.service")]),
        ("NOEQUALS A=", [("A", "")]),
        # unbalanced quoting: systemd ignores the whole value; an unknown specifier its word
        ('A=1 "B=2', []),
        ("A=%H B=2", [("B", "2")]),
    ],
)
def test_environment_assignments(value, want):
    assert ku.environment_assignments(value) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # kubeadm's file: a double-quoted value
        ('KUBELET_KUBEADM_ARGS="--a=1 --b=2"\n', {"KUBELET_KUBEADM_ARGS": "--a=1 --b=2"}),
        # unquoted: inner blanks and quotes kept, outer blanks dropped
        ('  A =  x  "y z"  \n', {"A": 'x  "y z"'}),
        # single quotes: verbatim, over lines
        ("A='x \\n\ny'\n", {"A": "x \\n\ny"}),
        # double quotes: \" \\ \` \$ unescaped, other backslashes kept, \newline continues
        ('A="a\\"b\\\\c\\$d\\xe\\\nf"\n', {"A": 'a"b\\c$d\\xef'}),
        # unquoted backslash keeps the next character; backslash-newline continues
        ("A=a\\ b\\\nc\n", {"A": "a bc"}),
        # comments, blank lines, lines without '=' and invalid names are ignored
        ("# c\n; c\n\nNOEQ\nexport B=1\n1C=2\nD-E=3\nF=4\n", {"F": "4"}),
        # a comment ending in a backslash does not swallow the next line (systemd 254+)
        ("# c \\\nA=1\n", {"A": "1"}),
        # the last assignment of a name wins; an empty value is a value
        ("A=1\nA=2\nB=\n", {"A": "2", "B": ""}),
        # no newline at the end
        ("A=x ", {"A": "x"}),
        # a quoted part then more: joined
        ('A="x"y\n', {"A": "xy"}),
    ],
)  # fmt: skip
def test_environment_file(text, want):
    assert ku.environment_file(text) == want


def test_environment_files_override_environment():
    settings = ku.UnitSettings([], ["A=unit B=unit"], [], "")
    env = ku.unit_environment(settings, {"/one": "A=one\nC=one\n", "/two": "C=two\n"})
    assert env == {"A": "one", "B": "unit", "C": "two"}


ENV = {"ARGS": "--a=1  '--b=x y' \"--c\"", "ONE": "p q", "EMPTY": ""}


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        # $NAME as a word: split, quotes respected and removed
        (["/k", "$ARGS"], ["/k", "--a=1", "--b=x y", "--c"]),
        # unset or empty: no word at all
        (["/k", "$NOPE", "$EMPTY", "--z"], ["/k", "--z"]),
        # ${NAME}: one word with the value as is, anywhere in a word
        (["/k", "--x=${ONE}", "${ONE}"], ["/k", "--x=p q", "p q"]),
        (["/k", "--x=${NOPE}"], ["/k", "--x="]),
        # $$ is a dollar; $NAME inside a word and ${A:-b} stay as written
        (["/k", "a$$b", "--x=$ONE", "${ONE:-d}", "${ONE"], ["/k", "a$b", "--x=$ONE", "${ONE:-d}",
                                                            "${ONE"]),
        # an invalid name as a word: dropped, as unset
        (["/k", "$1", "$A-B"], ["/k"]),
    ],
)  # fmt: skip
def test_expand_argv(argv, want):
    assert ku.expand_argv(argv, ENV) == want


def test_split_value_keeps_backslashed_blank_and_drops_unbalanced_end():
    assert ku.expand_argv(["$V"], {"V": r"a\ b 'c d"}) == ["a b", "c d"]


@pytest.mark.parametrize(
    ("args", "flags", "config", "ignored", "stray"),
    [
        (["--config=/c", "--kube-reserved", "cpu=1", "--kube-reserved=memory=1Gi"],
         {"kube-reserved": ["cpu=1", "memory=1Gi"]}, "/c", [], []),
        # boolean flags never take the next argument; known value flags always do
        (["--fail-swap-on", "--cgroups-per-qos", "--pod-max-pids", "-1", "--config", "/c"],
         {"cgroups-per-qos": ["true"], "pod-max-pids": ["-1"]}, "/c", ["fail-swap-on"], []),
        # '_' reads as '-'; the last --config wins
        (["--kube_reserved=cpu=1", "--config=/a", "--config=/b"],
         {"kube-reserved": ["cpu=1"]}, "/b", [], []),
        # an unknown flag takes the next argument unless it looks like a flag
        (["--node-labels", "a=b", "--unknown", "--max-pods", "5"], {"max-pods": ["5"]}, None,
         ["node-labels", "unknown"], []),
        # klog's -v shorthand, with or without its value attached
        (["-v", "2", "-v=3", "-v4", "--v", "5"], {}, None, ["v"], []),
        # positional arguments (the kubelet refuses them) and everything after --
        (["stray", "--max-pods=3", "--", "--max-pods=9"], {"max-pods": ["3"]}, None, [],
         ["stray", "--max-pods=9"]),
        # --cgroups-per-qos=false is a value; a bare boolean at the end
        (["--cgroups-per-qos=false", "--cpu-cfs-quota"],
         {"cgroups-per-qos": ["false"], "cpu-cfs-quota": ["true"]}, None, [], []),
    ],
)  # fmt: skip
def test_kubelet_args(args, flags, config, ignored, stray):
    got = ku.kubelet_args(args)
    assert (got.flags, got.config, got.ignored, got.stray) == (flags, config, ignored, stray)


def test_kubelet_args_keeps_config_dir_and_runtime_endpoint():
    got = ku.kubelet_args(["--config-dir", "/d", "--container-runtime-endpoint=unix:///x.sock"])
    assert (got.config_dir, got.endpoint, got.flags) == ("/d", "unix:///x.sock", {})


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["/usr/bin/kubelet", "--a"], 1),
        (["/usr/bin/hyperkube", "kubelet", "--a"], 2),
        (["/usr/bin/systemd-inhibit", "--what=shutdown", "/opt/bin/kubelet", "--a"], 3),
        (["/bin/sh", "-c", "kubelet --a"], None),
    ],
)
def test_where_the_kubelets_arguments_start(argv, start):
    assert ku.kubelet_argv_start(argv) == start


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Kubernetes v1.36.2\n", ("v1.36.2", (1, 36))),
        ("Kubernetes v1.37.0-eks-4f2a1b", ("v1.37.0-eks-4f2a1b", (1, 37))),
        ("Kubernetes v1.31.4+k3s1", ("v1.31.4+k3s1", (1, 31))),
        ("no version here", None),
    ],
)
def test_kubelet_version(text, want):
    assert ku.kubelet_version(text) == want


# EKS's AL2 unit (awslabs/amazon-eks-ami templates/al2/runtime/kubelet.service) and the drop-in
# its bootstrap script writes
EKS_AL2_UNIT = """\
[Service]
ExecStart=/usr/bin/kubelet \\
    --config /etc/kubernetes/kubelet/kubelet-config.json \\
    --kubeconfig /var/lib/kubelet/kubeconfig \\
    --container-runtime docker \\
    $KUBELET_ARGS \\
    $KUBELET_EXTRA_ARGS

Restart=always
"""
EKS_AL2_DROPIN = """\
[Service]
Environment='KUBELET_ARGS=--node-ip=10.0.0.7 --pod-infra-container-image=p:3.5 --max-pods=29'
"""


def test_a_whole_unit_to_the_kubelets_flags():
    settings = ku.unit_settings([EKS_AL2_UNIT, EKS_AL2_DROPIN])
    [command] = ku.exec_commands(settings.exec_start[0])
    argv = ku.expand_argv(command.argv, ku.unit_environment(settings, {}))
    args = ku.kubelet_args(argv[ku.kubelet_argv_start(argv) :])
    assert (args.config, args.flags) == (
        "/etc/kubernetes/kubelet/kubelet-config.json",
        {"max-pods": ["29"]},
    )
    assert args.ignored == ["kubeconfig", "container-runtime", "node-ip",
                            "pod-infra-container-image"]  # fmt: skip
