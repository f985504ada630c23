"""The documentation stays true to the code.

- README.md stays short (an operator reads it in two minutes), its quick start near the top;
- the README's test command is the line CI runs (``.ci/run``);
- docs/reference.md lists every option of every command, in blocks generated from the typer
  app's own help records (what ``--help`` prints): regenerate them with
  ``.venv/bin/python tests/test_docs.py`` after changing an option;
- docs/ARCHITECTURE.md names every module of the package;
- every relative link in README.md and docs/*.md points at a file (and heading) that exists.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference.md"
ARCHITECTURE = DOCS / "ARCHITECTURE.md"
PACKAGE = ROOT / "cgalloc"

# Files other engineers are writing now: links to them may point nowhere until they land.
# Empty this list as they do (a link to a file not listed here must resolve).
PENDING_FILES: set[str] = set()

README_MAX_LINES = 320
QUICK_START_WITHIN = 60  # the quick start's heading is among the README's first lines
NODE_INPUTS = "Node inputs (kubelet flags and files)"  # the help panel of the kubelet's inputs
BEGIN = "<!-- BEGIN generated: {} -->"
END = "<!-- END generated: {} -->"
REGENERATE = "run `.venv/bin/python tests/test_docs.py` to regenerate docs/reference.md's blocks"


# ---------------------------------------------------------------- the commands, from typer


def _commands():
    """(name, click command, context) for the root group and every sub-command, in --help
    order; the root's name is "cgalloc"."""
    import typer
    import typer.main

    import cgalloc.cli

    group = typer.main.get_command(cgalloc.cli.app)
    root_ctx = typer.Context(group, info_name="cgalloc", **group.context_settings)
    out = [("cgalloc", group, root_ctx)]
    for name in group.list_commands(root_ctx):
        cmd = group.get_command(root_ctx, name)
        out.append((name, cmd, typer.Context(cmd, info_name=name, parent=root_ctx)))
    return out


def _records(cmd, ctx) -> list[tuple[str, str, str, list[str]]]:
    """Each parameter as --help shows it: (panel, left column, help text, its flags)."""
    out = []
    for param in cmd.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        flags = [*param.opts, *param.secondary_opts] if param.param_type_name == "option" else []
        panel = getattr(param, "rich_help_panel", None) or "Options"
        out.append((panel, record[0], record[1], flags or [record[0]]))
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _prose(text: str) -> str:
    """Help text as a Markdown table cell: what Markdown would take for HTML or emphasis
    escaped, outside the help's own `code` spans."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")
    return _cell("`".join(parts))


def _table(rows: list[tuple[str, str]]) -> list[str]:
    lines = ["| option | what it does |", "|---|---|"]
    lines += [f"| `{_cell(left)}` | {_prose(help_)} |" for left, help_ in rows]
    return lines


def generated_blocks() -> dict[str, str]:
    """Block name -> its Markdown: one per command ("cgalloc" for the root options) and
    "node-inputs", the kubelet's inputs the commands share, listed once."""
    commands = _commands()
    node_inputs: dict[str, tuple[str, list[str]]] = {}  # left column -> help, commands
    blocks: dict[str, str] = {}
    for name, cmd, ctx in commands:
        own: dict[str, list[tuple[str, str]]] = {}
        takes_inputs = False
        for panel, left, help_, _flags in _records(cmd, ctx):
            if panel == NODE_INPUTS:
                takes_inputs = True
                node_inputs.setdefault(left, (help_, []))[1].append(name)
                continue
            own.setdefault(panel, []).append((left, help_))
        lines: list[str] = []
        for panel in sorted(own, key=lambda p: p != "Options"):  # as --help orders them
            if len(own) > 1 or panel != "Options":
                lines.append(f"{panel}:")
                lines.append("")
            lines += _table(own[panel])
            lines.append("")
        if takes_inputs:
            lines.append("And the [node inputs](#node-inputs).")
            lines.append("")
        blocks[name] = "\n".join(lines).rstrip("\n")
    with_inputs = sorted({c for _h, names in node_inputs.values() for c in names})
    rows = []
    for left, (help_, names) in node_inputs.items():
        if sorted(names) != with_inputs:
            help_ += f" (only: {', '.join(names)})"
        rows.append((left, help_))
    blocks["node-inputs"] = "\n".join(
        [f"Taken by {', '.join(f'`{c}`' for c in with_inputs)}.", "", *_table(rows)]
    )
    return blocks


def _block_span(text: str, name: str) -> tuple[int, int] | None:
    begin, end = BEGIN.format(name), END.format(name)
    start = text.find(begin)
    stop = text.find(end)
    if start < 0 or stop < start:
        return None
    return start + len(begin), stop


def regenerate(text: str) -> str:
    """``text`` (docs/reference.md) with every generated block replaced by its current form."""
    for name, body in generated_blocks().items():
        span = _block_span(text, name)
        if span is None:
            raise SystemExit(f"docs/reference.md has no block {BEGIN.format(name)} ... {END}")
        text = text[: span[0]] + "\n" + body + "\n" + text[span[1] :]
    return text


# ---------------------------------------------------------------- README


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_readme_quick_start_is_near_the_top():
    lines = README.read_text().splitlines()
    heads = [i for i, line in enumerate(lines) if line.lower().startswith("## quick start")]
    assert heads, "README.md has no '## Quick start' section"
    assert heads[0] < QUICK_START_WITHIN, f"the quick start starts at line {heads[0] + 1}"
    section = "\n".join(lines[heads[0] : heads[0] + 60])
    # dry run -> apply -> boot unit -> verify -> stats -> undo, in that order
    steps = ["setup --match-kubelet --dry-run", "sudo cgalloc setup", "install-unit",
             "cgalloc verify", "cgalloc stats", "cgalloc teardown"]  # fmt: skip
    where = [section.find(s) for s in steps]
    assert -1 not in where, dict(zip(steps, where, strict=True))
    assert where == sorted(where), dict(zip(steps, where, strict=True))


def _ci_test_command() -> str:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    marker = next(i for i, line in enumerate(lines) if "identical to the README" in line)
    return next(line.strip() for line in lines[marker + 1 :] if line.startswith("python3 "))


def test_readme_test_command_is_what_ci_runs():
    command = _ci_test_command()
    assert command == (
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' "
        "&& .venv/bin/python -m pytest"
    )
    assert command in [line.strip() for line in README.read_text().splitlines()]


# ---------------------------------------------------------------- reference


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole line) up to the next heading of level 2 or 3."""
    lines = text.splitlines()
    start = lines.index(heading) + 1
    stop = next((i for i in range(start, len(lines)) if lines[i].startswith(("## ", "### "))),
                len(lines))  # fmt: skip
    return "\n".join(lines[start:stop])


def test_reference_names_every_option_of_every_command():
    text = REFERENCE.read_text()
    missing = []
    for name, cmd, ctx in _commands():
        heading = "### `cgalloc`" if name == "cgalloc" else f"### `cgalloc {name}`"
        if heading not in text.splitlines():
            missing.append(f"{heading} (the section)")
            continue
        for panel, _left, _help, flags in _records(cmd, ctx):
            where = _section(text, "## Node inputs" if panel == NODE_INPUTS else heading)
            where = where.replace("\\|", "|")  # as a table cell escapes it
            for flag in flags:
                if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", where):
                    missing.append(f"{name} {flag}")
    assert missing == [], f"{missing}: {REGENERATE}"


def test_reference_blocks_are_generated_from_the_help():
    text = REFERENCE.read_text()
    assert regenerate(text) == text, REGENERATE


# ---------------------------------------------------------------- architecture


def _modules() -> list[str]:
    """Every module of the package, as a path below cgalloc/ (empty __init__.py files, which
    only make a folder a package, left out)."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py" and not path.read_text().strip():
            continue
        out.append(path.relative_to(PACKAGE).as_posix())
    return out


def test_architecture_names_every_module():
    text = ARCHITECTURE.read_text()
    missing = [m for m in _modules() if f"`{m}`" not in text]
    assert missing == [], "docs/ARCHITECTURE.md: one line for each of these modules"


def test_architecture_names_no_module_that_is_gone():
    text = ARCHITECTURE.read_text()
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", text))
    known = set(_modules()) | {p.name for p in PACKAGE.rglob("*.py")}
    gone = sorted(n for n in named if n not in known and not (ROOT / n).exists())
    assert gone == []


# ---------------------------------------------------------------- links


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    fence = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "")).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _doc_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def test_relative_links_point_at_files_that_exist():
    broken = []
    for doc in _doc_files():
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not checked here
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            rel = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else str(dest)
            if not dest.exists():
                if rel not in PENDING_FILES:
                    broken.append(f"{doc.relative_to(ROOT)}: {target}")
                continue
            if anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text()):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


if __name__ == "__main__":
    old = REFERENCE.read_text()
    new = regenerate(old)
    if new != old:
        REFERENCE.write_text(new)
        print("docs/reference.md: blocks regenerated", file=sys.stderr)
