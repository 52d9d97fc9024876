"""What the commands of the command line share: their common options, help that reads well,
Ruff's log levels, one line and exit code 2 for every error, and the files reports go to.

Exit code 1 means "findings" to CI; a crash must never look like that. So every error a command
meets ends the run through `fail` (a usage or environment problem, said in one line) or, for a
bug, through `Commands.invoke` (one line; the traceback only with --verbose).

Plain click, not typer: typer builds a pydantic adapter for every parameter at every start, which
cost every run (a cached re-scan, the pre-commit hook) about 150 ms.
"""

from __future__ import annotations

import enum
import errno
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import click
from click.exceptions import Exit


class Output(enum.IntEnum):
    """How much a command prints (Ruff's -q and -s); the exit code is the same at every level."""

    SILENT = 0  # nothing but the line of an error that stops the run
    QUIET = 1  # the findings and errors, without summaries or progress
    DEFAULT = 2


_OUTPUT = "portcheck.output"
_VERBOSE = "portcheck.verbose"
LOG_OPTIONS = ("verbose", "quiet", "silent")  # the group's options that every command takes too
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]  # what click.option and click.argument give


def _lower_output(level: Output) -> Callable[[click.Context, click.Parameter, bool], bool]:
    """An option callback: the quietest level asked for wins, wherever on the line it was."""

    def remember(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
        if value:
            ctx.meta[_OUTPUT] = min(level, ctx.meta.get(_OUTPUT, Output.DEFAULT))
        return value

    return remember


def _remember_verbose(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[_VERBOSE] = True
    return value


def output_level(ctx: click.Context) -> Output:
    return ctx.meta.get(_OUTPUT, Output.DEFAULT)


def is_verbose(ctx: click.Context) -> bool:
    return ctx.meta.get(_VERBOSE, False)


def _given(ctx: click.Context, param: click.Parameter, values: tuple[Any, ...]) -> list[Any] | None:
    """Repeated values as a list, or None when there are none: None means "not given"."""
    return list(values) or None


class Argument(click.Argument):
    """A positional argument with help, named `[PATH]...` (optional) or `{CODE}` (required) in the
    usage line and in the help's Arguments section."""

    def __init__(self, param_decls: Sequence[str], *, help: str, show_default: str | None = None, **attrs: Any) -> None:
        super().__init__(param_decls, **attrs)
        self.help = help
        self.shown_default = show_default

    def get_usage_pieces(self, ctx: click.Context) -> list[str]:
        name = f"{{{self.metavar}}}" if self.required else f"[{self.metavar}]"
        return [f"{name}..." if self.nargs != 1 else name]

    def get_help_record(self, ctx: click.Context) -> tuple[str, str]:
        extra = [f"default: ({self.shown_default})"] if self.shown_default else []
        extra += ["required"] if self.required else []
        help_text = f"{self.help}  [{'; '.join(extra)}]" if extra else self.help
        return self.get_usage_pieces(ctx)[0], help_text


def argument(name: str, **attrs: Any) -> Decorator:
    """An argument with help (see `Argument`)."""
    return click.argument(name, cls=Argument, **attrs)


def arguments(name: str, **attrs: Any) -> Decorator:
    """Any number of arguments: a list of them, or None when there are none."""
    return argument(name, nargs=-1, callback=_given, **attrs)


def repeatable(*decls: str, **attrs: Any) -> Decorator:
    """A repeatable option: a list of its values, or None when it is not given."""
    return click.option(*decls, multiple=True, callback=_given, **attrs)


def format_option(default: str, help: str) -> Decorator:
    """-f/--format: the report's format, `default` unless given; each command checks its own."""
    return click.option(
        "--format", "-f", "output_format", default=default, show_default=True, metavar="FORMAT", help=help
    )


PATH = click.Path(path_type=Path)  # not checked for existence: a missing path is the commands' own error

Verbose = click.option(
    "--verbose",
    "-v",
    is_flag=True,
    expose_value=False,
    callback=_remember_verbose,
    help="Show tracebacks of internal errors.",
)
Quiet = click.option(
    "--quiet",
    "-q",
    is_flag=True,
    expose_value=False,
    callback=_lower_output(Output.QUIET),
    help="Print findings and errors, but nothing else (no summary, no progress).",
)
Silent = click.option(
    "--silent",
    "-s",
    is_flag=True,
    expose_value=False,
    callback=_lower_output(Output.SILENT),
    help="Print nothing; the exit code still says whether something fails.",
)


# The options several commands share, with readable placeholders and their defaults.
Paths = arguments(
    "paths",
    type=PATH,
    metavar="PATH",
    help="Files or directories (default: the current one); - reads the source from standard input.",
)
Targets = repeatable(
    "--target",
    "-t",
    metavar="TARGET",
    help="Target(s), repeatable or comma-separated; 'all' for every one.",
    show_default="every target but rocm",
)
Select = repeatable(
    "--select", metavar="CODE", help="Rule codes or prefixes to enable (replaces the default).", show_default="ALL"
)
ExtendSelect = repeatable("--extend-select", metavar="CODE", help="Rule codes or prefixes to add.")
Ignore = repeatable("--ignore", metavar="CODE", help="Rule codes or prefixes to disable.")
Exclude = repeatable(
    "--exclude",
    metavar="PATTERN",
    help="Gitignore-style patterns replacing the default excludes.",
    show_default="build, cache and virtualenv folders",
)
ExtendExclude = repeatable(
    "--extend-exclude", metavar="PATTERN", help="Gitignore-style patterns to exclude in addition."
)
ConfigFile = click.option(
    "--config",
    "config_file",
    type=PATH,
    metavar="FILE",
    help="A pyproject.toml to read [tool.portcheck] from.",
    show_default="the nearest one with [tool.portcheck]",
)
TorchVersion = click.option(
    "--torch-version",
    metavar="VERSION",
    help="The torch release the code must run on, e.g. 2.13.",
    show_default="any",
)
NoGitignore = click.option("--no-respect-gitignore", is_flag=True, help="Scan files that .gitignore excludes.")
ForceExclude = click.option(
    "--force-exclude", is_flag=True, help="Apply excludes to paths given explicitly too (pre-commit)."
)
Jobs = click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    metavar="N",
    help="Processes to work with.",
    show_default="all cores",
)
NoCache = click.option("--no-cache", is_flag=True, help="Neither read nor write cached results.")
AllKernels = click.option(
    "--all-kernels",
    is_flag=True,
    help="Count kernels in tests and vendored code (third_party/, vendor/...) as kernels to port too.",
)
CacheDir = click.option(
    "--cache-dir",
    type=PATH,
    envvar="PORTCHECK_CACHE_DIR",
    show_envvar=True,
    metavar="DIR",
    help="Where results are cached.",
    show_default=".portcheck_cache in the project root",
)
MaxFileSize = click.option(
    "--max-file-size",
    metavar="SIZE",
    help="Larger files are reported (PC003), not parsed: bytes, or a size such as 512KB or 10MB.",
    show_default="2MB",
)
StdinFilename = click.option(
    "--stdin-filename",
    type=PATH,
    metavar="PATH",
    help="The file standard input stands for: its kind, its settings and the name findings are reported under.",
)
FailOn = click.option(
    "--fail-on",
    metavar="SEVERITY",
    help="Lowest severity that fails: error, warning or info.",
    show_default="error",
)


def together(*decorators: Decorator) -> Decorator:
    """Several options as one decorator, listed in help in the order given."""

    def apply(function: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return apply


# Which files and rules a scan or a fix takes, and how it runs: both commands' run of options.
FileSelection = together(
    Select, ExtendSelect, Ignore, Exclude, ExtendExclude, ConfigFile, TorchVersion, NoGitignore, ForceExclude,
    MaxFileSize, Jobs,
)  # fmt: skip


def fail(message: str) -> Exit:
    """A usage, configuration or environment error: one line on stderr, exit code 2."""
    click.echo(f"portcheck: error: {message}", err=True)
    return Exit(2)


class Command(click.Command):
    """A command whose help lists its arguments, with their help, then its options: the same with
    every click version (before 8.5, click lists no arguments; 8.5 lists them its own way)."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.format_usage(ctx, formatter)
        self.format_help_text(ctx, formatter)
        params = self.get_params(ctx)
        for title, kind in (("Arguments", click.Argument), ("Options", click.Option)):
            rows = [record for param in params if isinstance(param, kind) and (record := param.get_help_record(ctx))]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class Commands(click.Group):
    """The command group. Its log-level options are every command's too, so that they go anywhere
    on the line, as Ruff's do; its commands are listed in the order they were declared; and an
    exception a command did not expect ends the run in one line with exit code 2 (^C with 130)."""

    command_class = Command

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        cmd.params.extend(param for param in self.params if param.name in LOG_OPTIONS)
        super().add_command(cmd, name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (Exit, click.Abort):  # click's Exit is a RuntimeError: let it through
            raise
        except KeyboardInterrupt:  # 130 as for any program stopped by ^C (click's "Aborted!" exits 1: findings)
            raise Exit(130) from None
        except Exception as error:
            if _handled_by_click(error):
                raise
            if ctx.meta.get(_VERBOSE):
                traceback.print_exc(file=sys.stderr)
            suffix = "" if ctx.meta.get(_VERBOSE) else " (run with --verbose for the traceback)"
            raise fail(f"internal error: {type(error).__name__}: {error}{suffix}") from None


def _handled_by_click(error: Exception) -> bool:
    """Usage errors (they carry their exit code) and a closed pipe (`portcheck scan | head`),
    which click reports itself."""
    return hasattr(error, "exit_code") or (isinstance(error, OSError) and error.errno == errno.EPIPE)


@contextmanager
def report_file(path: Path | None) -> Iterator[TextIO]:
    """Standard output, or `path` opened for writing, its folder created as Ruff does; a folder or
    a path that cannot be written is an error (exit 2), said before any work is done."""
    if path is None:
        yield sys.stdout
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        stream = path.open("w", encoding="utf-8")
    except OSError as error:
        raise fail(f"cannot write {path}: {error.strerror or error}") from None
    with stream:
        yield stream


def writable(path: Path) -> Path:
    """`path` with its folder created, or an error (exit 2) if nothing could be written there: for
    files that are written after the work (a baseline, a run report)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise fail(f"cannot write {path}: {error.strerror or error}") from None
    if path.is_dir():
        raise fail(f"cannot write {path}: it is a directory")
    return path
