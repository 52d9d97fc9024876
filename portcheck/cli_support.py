"""What the commands of the command line share: their common options, help that reads well,
Ruff's log levels, one line and exit code 2 for every error, and the files reports go to.

Exit code 1 means "findings" to CI; a crash must never look like that. So every error a command
meets ends the run through `fail` (a usage or environment problem, said in one line) or, for a
bug, through `Commands.invoke` (one line; the traceback only with --verbose).
"""

from __future__ import annotations

import enum
import errno
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer
from typer.core import TyperCommand, TyperGroup


class Output(enum.IntEnum):
    """How much a command prints (Ruff's -q and -s); the exit code is the same at every level."""

    SILENT = 0  # nothing but the line of an error that stops the run
    QUIET = 1  # the findings and errors, without summaries or progress
    DEFAULT = 2


_OUTPUT = "portcheck.output"
_VERBOSE = "portcheck.verbose"
LOG_OPTIONS = ("verbose", "quiet", "silent")  # the app callback's parameters every command takes


def _lower_output(level: Output) -> Callable[[typer.Context, bool], bool]:
    """An option callback: the quietest level asked for wins, wherever on the line it was."""

    def remember(ctx: typer.Context, value: bool) -> bool:
        if value:
            ctx.meta[_OUTPUT] = min(level, ctx.meta.get(_OUTPUT, Output.DEFAULT))
        return value

    return remember


def _remember_verbose(ctx: typer.Context, value: bool) -> bool:
    if value:
        ctx.meta[_VERBOSE] = True
    return value


def output_level(ctx: typer.Context) -> Output:
    return ctx.meta.get(_OUTPUT, Output.DEFAULT)


def is_verbose(ctx: typer.Context) -> bool:
    return ctx.meta.get(_VERBOSE, False)


Verbose = typer.Option(
    "--verbose", "-v", expose_value=False, callback=_remember_verbose, help="Show tracebacks of internal errors."
)
Quiet = typer.Option(
    "--quiet",
    "-q",
    expose_value=False,
    callback=_lower_output(Output.QUIET),
    help="Print findings and errors, but nothing else (no summary, no progress).",
)
Silent = typer.Option(
    "--silent",
    "-s",
    expose_value=False,
    callback=_lower_output(Output.SILENT),
    help="Print nothing; the exit code still says whether something fails.",
)


# The options several commands share, with readable placeholders and their defaults.
Paths = Annotated[
    list[Path] | None,
    typer.Argument(
        metavar="PATH",
        help="Files or directories (default: the current one); - reads the source from standard input.",
        show_default=False,
    ),
]
Targets = Annotated[
    list[str] | None,
    typer.Option(
        "--target",
        "-t",
        metavar="TARGET",
        help="Target(s), repeatable or comma-separated; 'all' for every one.",
        show_default="every target but rocm",
    ),
]
Select = Annotated[
    list[str] | None,
    typer.Option(metavar="CODE", help="Rule codes or prefixes to enable (replaces the default).", show_default="ALL"),
]
ExtendSelect = Annotated[list[str] | None, typer.Option(metavar="CODE", help="Rule codes or prefixes to add.")]
Ignore = Annotated[list[str] | None, typer.Option(metavar="CODE", help="Rule codes or prefixes to disable.")]
Exclude = Annotated[
    list[str] | None,
    typer.Option(
        metavar="PATTERN",
        help="Gitignore-style patterns replacing the default excludes.",
        show_default="build, cache and virtualenv folders",
    ),
]
ExtendExclude = Annotated[
    list[str] | None, typer.Option(metavar="PATTERN", help="Gitignore-style patterns to exclude in addition.")
]
ConfigFile = Annotated[
    Path | None,
    typer.Option(
        "--config",
        metavar="FILE",
        help="A pyproject.toml to read [tool.portcheck] from.",
        show_default="the nearest one with [tool.portcheck]",
    ),
]
TorchVersion = Annotated[
    str | None,
    typer.Option(metavar="VERSION", help="The torch release the code must run on, e.g. 2.13.", show_default="any"),
]
NoGitignore = Annotated[bool, typer.Option("--no-respect-gitignore", help="Scan files that .gitignore excludes.")]
ForceExclude = Annotated[
    bool, typer.Option("--force-exclude", help="Apply excludes to paths given explicitly too (pre-commit).")
]
Jobs = Annotated[
    int | None,
    typer.Option("--jobs", "-j", min=1, metavar="N", help="Processes to work with.", show_default="all cores"),
]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write cached results.")]
AllKernels = Annotated[
    bool,
    typer.Option(
        "--all-kernels",
        help="Count kernels in tests and vendored code (third_party/, vendor/...) as kernels to port too.",
    ),
]
CacheDir = Annotated[
    Path | None,
    typer.Option(
        envvar="PORTCHECK_CACHE_DIR",
        metavar="DIR",
        help="Where results are cached.",
        show_default=".portcheck_cache in the project root",
    ),
]
MaxFileSize = Annotated[
    str | None,
    typer.Option(
        metavar="SIZE",
        help="Larger files are reported (PC003), not parsed: bytes, or a size such as 512KB or 10MB.",
        show_default="2MB",
    ),
]
StdinFilename = Annotated[
    Path | None,
    typer.Option(
        metavar="PATH",
        help="The file standard input stands for: its kind, its settings and the name findings are reported under.",
    ),
]
FailOn = Annotated[
    str | None,
    typer.Option(metavar="SEVERITY", help="Lowest severity that fails: error, warning or info.", show_default="error"),
]


def fail(message: str) -> typer.Exit:
    """A usage, configuration or environment error: one line on stderr, exit code 2."""
    typer.echo(f"portcheck: error: {message}", err=True)
    return typer.Exit(2)


class Commands(TyperGroup):
    """The command group. Its log-level options (declared on the app's callback) are every
    command's too, so that they go anywhere on the line, as Ruff's do; and an exception a
    command did not expect ends the run in one line with exit code 2."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        shared = [param for param in self.params if param.name in LOG_OPTIONS]
        for command in self.commands.values():
            command.params.extend(shared)

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):  # typer's Exit is a RuntimeError: let it through
            raise
        except Exception as error:
            if _handled_by_typer(error):
                raise
            if ctx.meta.get(_VERBOSE):
                traceback.print_exc(file=sys.stderr)
            suffix = "" if ctx.meta.get(_VERBOSE) else " (run with --verbose for the traceback)"
            raise fail(f"internal error: {type(error).__name__}: {error}{suffix}") from None


def _handled_by_typer(error: Exception) -> bool:
    """Usage errors (they carry their exit code) and a closed pipe (`portcheck scan | head`),
    which typer reports itself."""
    return hasattr(error, "exit_code") or (isinstance(error, OSError) and error.errno == errno.EPIPE)


class Command(TyperCommand):
    """A command whose help names its arguments by their placeholder (`[PATH]...`) instead of
    typer's `<list[Path]>`."""

    def format_options(self, ctx: typer.Context, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((" ".join(param.get_usage_pieces(ctx)), record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


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
