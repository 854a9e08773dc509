"""The command-line reference page, made from the click commands themselves: every
command and subcommand the CLI has (those made only when asked for, such as
``fanout`` and each task's ``run`` command, included), each with its ``--help``
exactly as the command prints it. Read by ``docs/gen_reference.py`` at build time
and by ``tests/test_docs.py``, which compares the built page with every ``--help``.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

WIDTH = 100
"""The width the help is laid out at, on the page and in the test."""

INTRO = """# Command line

Generated from the click commands themselves: every command and subcommand,
each with its `--help` as it prints at a width of 100 columns. Each task's own
options (`biasaudit run resume-screening --help`, and so on) are made from the
spec fields: see [spec fields](spec.md) for every one of them with its bounds.

Every command exits as [exit codes](exit-codes.md) says, with a one-line error
(`BIASAUDIT_DEBUG=1` shows a traceback instead). Output goes to the terminal in
its own encoding: where that encoding lacks a character of the tables (a Latin-1
locale; a file redirected on Windows, in cp1252), it is spelled out (`Δ` as `D`,
`δ` as `delta`, `≥` as `>=`). Reports and run files are always UTF-8.
"""


def commands() -> Iterator[tuple[tuple[str, ...], click.Command, click.Context]]:
    """Every command of ``biasaudit`` as ``(path, command, context)``, depth first, in
    the order ``--help`` lists them; ``path`` starts with ``biasaudit``."""
    from biasaudit.cli import cli

    def walk(
        command: click.Command, ctx: click.Context, path: tuple[str, ...]
    ) -> Iterator[tuple[tuple[str, ...], click.Command, click.Context]]:
        yield path, command, ctx
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is None or sub.hidden:
                    continue
                child = click.Context(sub, info_name=name, parent=ctx, **sub.context_settings)
                yield from walk(sub, child, (*path, name))

    root = click.Context(cli, info_name="biasaudit", terminal_width=WIDTH, max_content_width=WIDTH,
                         **cli.context_settings)  # fmt: skip
    yield from walk(cli, root, ("biasaudit",))


def anchor(path: tuple[str, ...]) -> str:
    return "-".join(path)


def cli_page() -> str:
    """The whole page: the index of commands with their whole summaries, then each
    command's heading and help."""
    found = list(commands())
    out = [INTRO, "## Every command", "", "| command | what it does |", "| --- | --- |"]
    for path, command, _ in found[1:]:
        summary = command.get_short_help_str(limit=10_000).replace("|", "\\|")
        out.append(f"| [`{' '.join(path)}`](#{anchor(path)}) | {summary} |")
    out.append("")
    for path, command, ctx in found:
        out += [f"## `{' '.join(path)}` {{#{anchor(path)}}}", "", "```text",
                command.get_help(ctx), "```", ""]  # fmt: skip
    return "\n".join(out)
