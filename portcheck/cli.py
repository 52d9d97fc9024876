"""The command line: options -> config -> api -> reporter -> exit code. Nothing else lives here
(what all commands share, from help to errors, is in portcheck.cli_support).

Exit codes, as in Ruff: 0 nothing at or above --fail-on, 1 something is, 2 usage, configuration
or tool errors (including paths that do not exist), always with a one-line message.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import click
from click.exceptions import Exit

from portcheck import __version__, api, baseline, cache, inventory, readiness
from portcheck import targets as target_data
from portcheck.cli_support import (
    PATH,
    AllKernels,
    CacheDir,
    Commands,
    ConfigFile,
    ExtendSelect,
    FailOn,
    FileSelection,
    Ignore,
    Jobs,
    MaxFileSize,
    NoCache,
    Output,
    Paths,
    Quiet,
    Select,
    Silent,
    StdinFilename,
    Targets,
    Verbose,
    argument,
    arguments,
    fail,
    format_option,
    is_verbose,
    output_level,
    report_file,
    writable,
)
from portcheck.config import Config, ConfigError, load, smoke_settings
from portcheck.discovery import discover, is_excluded
from portcheck.findings import Finding
from portcheck.report import (
    FORMAT_NAMES,
    formats,
    inventory_view,
    progress,
    readiness_view,
    settings_view,
    statistics,
)

STDIN = Path("-")


def _split(values: list[str] | None) -> list[str] | None:
    """Repeated and comma-separated values as one list; empty parts are kept, for the config to
    refuse (`--select ""` must not select nothing)."""
    if values is None:
        return None
    return [part.strip() for value in values for part in value.split(",")]


def _config(start: Path, config_file: Path | None, **overrides: object) -> Config:
    """The settings for what lies at `start`: its pyproject's, then the command line's."""
    try:
        config = load(start if start.exists() else Path.cwd(), config_file)
        given = {key: _split(value) if isinstance(value, list) else value for key, value in overrides.items()}
        return config.with_overrides(**{key: value for key, value in given.items() if value is not None})
    except ConfigError as error:
        raise fail(str(error)) from None


def _start(paths: list[Path], stdin: Path | None) -> Path:
    """Where the settings are looked up: standard input's name, the one path given, or here."""
    if stdin is not None:
        return stdin if stdin != STDIN else Path.cwd()
    return paths[0] if len(paths) == 1 else Path.cwd()


def _stdin_name(paths: list[Path] | None, stdin_filename: Path | None) -> Path | None:
    """What standard input is read as when it is what the command reads (`-`, or --stdin-filename
    with no path), else None. Standard input and files at once is a usage error."""
    given = paths or []
    if STDIN not in given and stdin_filename is None:
        return None
    others = [path for path in given if path != STDIN]
    if others:
        raise fail(f"standard input cannot be read together with other paths ({others[0]})")
    return stdin_filename or STDIN


def _read_stdin() -> bytes:
    return sys.stdin.buffer.read()


def _cache_folder(config: Config, no_cache: bool, cache_dir: Path | None) -> Path | None:
    if no_cache:
        return None
    return cache_dir or config.root / cache.FOLDER


@contextmanager
def _progress(verb: str, shown: bool) -> Iterator[api.Progress | None]:
    if not shown:
        yield None
        return
    with progress.FileProgress(verb) as bar:
        yield bar


def _print_tracebacks(ctx: click.Context, report: api.ScanReport) -> None:
    if is_verbose(ctx):
        for trace in report.tracebacks:
            click.echo(trace, err=True)


@click.group(cls=Commands)
@click.version_option(__version__, message="portcheck %(version)s")
@Verbose
@Quiet
@Silent
def app() -> None:
    """Find what ties PyTorch code to CUDA, per target accelerator (tpu, neuron, xla, mps, xpu, npu, hpu, rocm, cpu)."""


@app.command()
@Paths
@Targets
@FileSelection
@NoCache
@CacheDir
@StdinFilename
@format_option("text", f"Output format: {', '.join(FORMAT_NAMES)}.")
@click.option("--output-file", "-o", type=PATH, metavar="FILE", help="Write the report here.", show_default="stdout")
@FailOn
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings fail the run.")
@click.option("--statistics", "show_statistics", is_flag=True, help="Only show counts per rule.")
@click.option("--show-files", is_flag=True, help="List the files that would be scanned.")
@click.option("--show-settings", is_flag=True, help="Show the settings used for the (first) path given.")
@click.option(
    "--baseline", "baseline_file", type=PATH, metavar="FILE", help="Ignore findings recorded by `portcheck baseline`."
)
@click.pass_context
def scan(
    ctx: click.Context,
    paths: list[Path] | None,
    target: list[str] | None,
    select: list[str] | None,
    extend_select: list[str] | None,
    ignore: list[str] | None,
    exclude: list[str] | None,
    extend_exclude: list[str] | None,
    config_file: Path | None,
    torch_version: str | None,
    no_respect_gitignore: bool,
    force_exclude: bool,
    max_file_size: str | None,
    jobs: int | None,
    no_cache: bool,
    cache_dir: Path | None,
    stdin_filename: Path | None,
    output_format: str,
    output_file: Path | None,
    fail_on: str | None,
    exit_zero: bool,
    show_statistics: bool,
    show_files: bool,
    show_settings: bool,
    baseline_file: Path | None,
) -> None:
    """Report what ties the code to CUDA, per target."""
    stdin = _stdin_name(paths, stdin_filename)
    paths = paths or [Path(".")]
    if output_format not in FORMAT_NAMES:
        raise fail(f"unknown format {output_format!r}; choose from {', '.join(FORMAT_NAMES)}")
    config = _config(
        _start(paths, stdin),
        config_file,
        targets=target,
        select=select,
        extend_select=extend_select,
        ignore=ignore,
        exclude=exclude,
        extend_exclude=extend_exclude,
        torch_version=torch_version,
        respect_gitignore=False if no_respect_gitignore else None,
        force_exclude=True if force_exclude else None,
        fail_on=fail_on,
        max_file_size=max_file_size,
    )
    if show_files or show_settings:
        _show(paths, stdin, config, show_settings)
    level = output_level(ctx)
    with report_file(output_file) as out:
        if stdin is not None:
            report = api.scan_input(_read_stdin(), stdin, config)
        else:
            shown = level > Output.QUIET and progress.wanted(output_format, to_file=output_file is not None)
            with _progress("Scanning", shown) as bar:
                report = api.scan_paths(
                    paths, config, jobs=jobs, cache=_cache_folder(config, no_cache, cache_dir), progress=bar
                )
        report = _with_baseline(report, baseline_file)
        if level > Output.SILENT or output_file is not None:
            _print_report(report, output_format, out, show_statistics, summary=level > Output.QUIET)
    _print_tracebacks(ctx, report)
    raise Exit(_scan_exit_code(report, exit_zero))


def _show(paths: list[Path], stdin: Path | None, config: Config, settings: bool) -> None:
    """--show-settings, or --show-files: what a scan would use, then exit."""
    if settings:
        settings_view.render(config, stdin or paths[0], sys.stdout)
        raise Exit(0)
    if stdin is not None:
        files, errors = ([] if is_excluded(stdin, config) else [stdin]), ()
    else:
        found = discover(paths, config)
        files, errors = list(found.files), found.errors
    for path in files:
        click.echo(path.as_posix())
    for error in errors:
        click.echo(f"portcheck: error: {error}", err=True)
    raise Exit(2 if errors else 0)


def _with_baseline(report: api.ScanReport, baseline_file: Path | None) -> api.ScanReport:
    if baseline_file is None:
        return report
    try:
        return baseline.apply(report, baseline.load(baseline_file))
    except baseline.BaselineError as error:
        raise fail(str(error)) from None


def _print_report(report: api.ScanReport, output_format: str, out: TextIO, counts: bool, summary: bool) -> None:
    color = out is sys.stdout and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    if counts:
        _print_statistics(report, output_format, out)
    else:
        formats(summary=summary)[output_format](report, out, color)


def _scan_exit_code(report: api.ScanReport, exit_zero: bool) -> int:
    if report.errors or report.internal_errors:
        return 2
    failing = any(f.severity >= report.config.fail_on for f in report.findings)
    return 1 if failing and not exit_zero else 0


def _print_statistics(report: api.ScanReport, output_format: str, out: TextIO) -> None:
    """Counts per rule; in text, Ruff's `[*]` marks the rules whose every finding `fix` can fix
    (`[-]` some of them), when any can."""
    rows = statistics(report)
    if output_format == "json":
        document = [
            {"code": r.code, "name": r.name, "count": r.count, "worst_severity": r.worst.label, "fixable": r.fixable}
            for r in rows
        ]
        json.dump(document, out, indent=2)
        out.write("\n")
        return
    count_width = max((len(str(r.count)) for r in rows), default=1)
    any_fixable = any(r.fixable for r in rows)
    for row in rows:
        mark = ("[*] " if row.fixable == row.count else "[-] " if row.fixable else "[ ] ") if any_fixable else ""
        out.write(f"{row.count:>{count_width}}\t{row.code}\t{mark}{row.name}\t{row.worst.label}\n")


def _fix_target(device: str) -> str:
    """The device, checked before any work: a usage error if portcheck cannot fix for it."""
    if not device:
        raise fail("choose the target with --device (tpu, neuron, xla, mps, xpu, npu, hpu, cpu, auto)")
    try:
        target_data.fix_target(device.lower())
    except ValueError as error:
        raise fail(str(error)) from None
    return device.lower()


@app.command()
@Paths
@click.option(
    "--device",
    "-d",
    default="",
    metavar="TARGET",
    help="The target to rewrite for: tpu, neuron, xla, mps, xpu, npu, hpu, cpu, or auto "
    "(device-agnostic code that runs on whatever accelerator is present, else the CPU).",
)
@click.option("--diff", is_flag=True, help="Print a unified diff and write nothing.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that may change behaviour.")
@FileSelection
@StdinFilename
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when something was fixed.")
@FailOn
@click.pass_context
def fix(
    ctx: click.Context,
    paths: list[Path] | None,
    device: str,
    diff: bool,
    unsafe_fixes: bool,
    select: list[str] | None,
    extend_select: list[str] | None,
    ignore: list[str] | None,
    exclude: list[str] | None,
    extend_exclude: list[str] | None,
    config_file: Path | None,
    torch_version: str | None,
    no_respect_gitignore: bool,
    force_exclude: bool,
    max_file_size: str | None,
    jobs: int | None,
    stdin_filename: Path | None,
    exit_non_zero_on_fix: bool,
    fail_on: str | None,
) -> None:
    """Rewrite what can be rewritten safely for one target; report the rest with guidance.

    With - (standard input), the fixed source goes to standard output and the summary to
    standard error.
    """
    stdin = _stdin_name(paths, stdin_filename)
    paths = paths or [Path(".")]
    device = _fix_target(device)
    config = _config(
        _start(paths, stdin),
        config_file,
        select=select,
        extend_select=extend_select,
        ignore=ignore,
        exclude=exclude,
        extend_exclude=extend_exclude,
        torch_version=torch_version,
        respect_gitignore=False if no_respect_gitignore else None,
        force_exclude=True if force_exclude else None,
        fail_on=fail_on,
        max_file_size=max_file_size,
    )
    level = output_level(ctx)
    if stdin is not None:
        report = _fix_stdin(stdin, config, device, unsafe_fixes, diff)
    else:
        with _progress("Fixing", level > Output.QUIET and progress.wanted("text", to_file=False)) as bar:
            report = api.fix_paths(paths, config, device, unsafe=unsafe_fixes, write=not diff, jobs=jobs, progress=bar)
    _print_fix(report, level, diff, stdin is not None, is_verbose(ctx))
    raise Exit(_fix_exit_code(report, config, exit_non_zero_on_fix))


def _fix_stdin(name: Path, config: Config, device: str, unsafe: bool, diff: bool) -> api.FixReport:
    """Standard input fixed as the file `name`; the source itself goes to standard output (as it
    came when nothing was fixed), unless only a diff is asked for."""
    report = api.fix_input(_read_stdin(), name, config, device, unsafe=unsafe, write=not diff)
    if not diff:
        sys.stdout.flush()
        sys.stdout.buffer.write(report.outcomes[0].source)
        sys.stdout.flush()
    return report


def _print_fix(report: api.FixReport, level: Output, diff: bool, from_stdin: bool, verbose: bool) -> None:
    """The diff (--diff) on standard output, then the summary: on standard error where standard
    output carries the diff or the fixed source."""
    from portcheck.report import fix_view  # reads notebooks with libcst, which only fix needs

    if level is Output.SILENT:
        return
    if diff:
        fix_view.render_diff(report, sys.stdout)
    out = sys.stderr if diff or from_stdin else sys.stdout
    fix_view.render_summary(report, out, summary=level > Output.QUIET, verbose=verbose)


def _fix_exit_code(report: api.FixReport, config: Config, exit_non_zero_on_fix: bool) -> int:
    if report.errors or any(outcome.error for outcome in report.outcomes):
        return 2
    left = any(f.severity >= config.fail_on for outcome in report.outcomes for f in outcome.remaining)
    changed = any(outcome.changed for outcome in report.outcomes)
    return 1 if left or (exit_non_zero_on_fix and changed) else 0


@app.command("baseline")
@Paths
@click.option(
    "--output",
    "-o",
    type=PATH,
    default=Path(".portcheck-baseline.json"),
    show_default=True,
    metavar="FILE",
    help="Where to write the baseline.",
)
@Targets
@Select
@ExtendSelect
@Ignore
@ConfigFile
@MaxFileSize
@Jobs
@NoCache
@CacheDir
@click.pass_context
def write_baseline(
    ctx: click.Context,
    paths: list[Path] | None,
    output: Path,
    target: list[str] | None,
    select: list[str] | None,
    extend_select: list[str] | None,
    ignore: list[str] | None,
    config_file: Path | None,
    max_file_size: str | None,
    jobs: int | None,
    no_cache: bool,
    cache_dir: Path | None,
) -> None:
    """Record today's findings so that `scan --baseline` fails only on new ones."""
    output = writable(output)
    report = _run(
        ctx,
        paths,
        config_file,
        jobs,
        no_cache,
        cache_dir,
        targets=target,
        select=select,
        extend_select=extend_select,
        ignore=ignore,
        max_file_size=max_file_size,
    )
    if report.errors or report.internal_errors:
        raise Exit(2)
    try:
        count = baseline.write(output, report)
    except OSError as error:
        raise fail(f"cannot write {output}: {error.strerror or error}") from None
    if output_level(ctx) > Output.QUIET:
        click.echo(f"Wrote {count} finding{'s' if count != 1 else ''} to {output}")


def _run(
    ctx: click.Context,
    paths: list[Path] | None,
    config_file: Path | None,
    jobs: int | None,
    no_cache: bool,
    cache_dir: Path | None,
    **overrides: object,
) -> api.ScanReport:
    """A scan for the commands that report on it in their own way; its errors on stderr."""
    paths = paths or [Path(".")]
    config = _config(_start(paths, None), config_file, **overrides)
    report = api.scan_paths(paths, config, jobs=jobs, cache=_cache_folder(config, no_cache, cache_dir))
    for error in (*report.errors, *report.internal_errors):
        click.echo(f"portcheck: error: {error}", err=True)
    _print_tracebacks(ctx, report)
    return report


@app.command()
@Paths
@Targets
@ConfigFile
@Jobs
@NoCache
@CacheDir
@format_option("text", "text, json or csv.")
@AllKernels
@click.pass_context
def kernels(
    ctx: click.Context,
    paths: list[Path] | None,
    target: list[str] | None,
    config_file: Path | None,
    jobs: int | None,
    no_cache: bool,
    cache_dir: Path | None,
    output_format: str,
    all_kernels: bool,
) -> None:
    """Inventory the custom kernels (Triton, CUDA C++, extensions, CUDA ops) and what porting takes."""
    if output_format not in ("text", "json", "csv"):
        raise fail(f"unknown format {output_format!r}; choose text, json or csv")
    report = _run(ctx, paths, config_file, jobs, no_cache, cache_dir, targets=target, select=["PC6"])
    found = inventory.build(report.facts, all_kernels)
    if output_level(ctx) > Output.SILENT:
        if output_format == "json":
            inventory_view.render_json(found, report.config.targets, sys.stdout)
        elif output_format == "csv":
            inventory_view.render_csv(found, report.config.targets, sys.stdout)
        else:
            inventory_view.render_text(found, report.config.targets, sys.stdout, sys.stdout.isatty())
    raise Exit(2 if report.errors or report.internal_errors else 0)


@app.command("report")
@Paths
@Targets
@Select
@Ignore
@ConfigFile
@Jobs
@NoCache
@CacheDir
@format_option("text", "text, json or markdown.")
@AllKernels
@click.option("--details", is_flag=True, help="Markdown: also each target's full list (JSON always has it).")
@click.pass_context
def readiness_report(
    ctx: click.Context,
    paths: list[Path] | None,
    target: list[str] | None,
    select: list[str] | None,
    ignore: list[str] | None,
    config_file: Path | None,
    jobs: int | None,
    no_cache: bool,
    cache_dir: Path | None,
    output_format: str,
    all_kernels: bool,
    details: bool,
) -> None:
    """A readiness verdict per target: blockers, fixable findings, kernels and dependencies to replace."""
    if output_format not in ("text", "json", "markdown"):
        raise fail(f"unknown format {output_format!r}; choose text, json or markdown")
    report = _run(ctx, paths, config_file, jobs, no_cache, cache_dir, targets=target, select=select, ignore=ignore)
    found = inventory.build(report.facts, all_kernels)
    rows = readiness.assess(report, found)
    if output_level(ctx) > Output.SILENT:
        _print_readiness(rows, found, report.findings, output_format, details)
    raise Exit(2 if report.errors or report.internal_errors else 0)


def _print_readiness(
    rows: list[readiness.Readiness],
    found: list[inventory.Kernel],
    findings: tuple[Finding, ...],
    output_format: str,
    details: bool,
) -> None:
    if output_format == "json":
        readiness_view.render_json(rows, found, sys.stdout)
    elif output_format == "markdown":
        readiness_view.render_markdown(rows, found, findings, sys.stdout, details)
    else:
        readiness_view.render_text(rows, found, sys.stdout, sys.stdout.isatty())


@app.command()
@arguments(
    "specs",
    metavar="CASE",
    help="FILE.py:FACTORY or MODULE:FACTORY.",
    show_default="the cases in [tool.portcheck.smoke]",
)
@click.option("--device", "-d", default="", metavar="DEVICE", help="The device to test: tpu, neuron, cuda, mps...")
@click.option(
    "--reference", default="", metavar="DEVICE", help="The device the results are compared with.", show_default="cpu"
)
@click.option("--train/--forward", default=None, help="Also run training steps.")
@click.option("--steps", type=click.IntRange(min=1), metavar="N", help="Training steps with --train.", show_default="1")
@click.option("--rtol", type=float, metavar="TOL", help="Relative tolerance.", show_default="per dtype")
@click.option("--atol", type=float, metavar="TOL", help="Absolute tolerance.", show_default="per dtype and scale")
@click.option(
    "--emulate/--no-emulate", default=None, help="Run on a CPU stand-in that enforces the target's constraints."
)
@click.option(
    "--matmul-precision",
    default="highest",
    show_default=True,
    metavar="PRECISION",
    help="highest: float32 matmuls at full precision on both sides; default: the target's own (TPU: "
    "bfloat16), compared with bf16 tolerances.",
)
@click.option(
    "--timeout",
    type=float,
    metavar="SECONDS",
    help="Seconds each case may take on each device, from its start (importing torch and the backend is not counted).",
    show_default="300",
)
@format_option("text", "text or json.")
@ConfigFile
def smoke(
    specs: list[str] | None,
    device: str,
    reference: str,
    train: bool | None,
    steps: int | None,
    rtol: float | None,
    atol: float | None,
    emulate: bool | None,
    matmul_precision: str,
    timeout: float | None,
    output_format: str,
    config_file: Path | None,
) -> None:
    """Run a model on a device and on a CPU reference; compare outputs, gradients and weights; trace it."""
    from portcheck.report import smoke_view
    from portcheck.smoke.runner import Settings, check_usage, run_smoke

    if output_format not in ("text", "json"):
        raise fail(f"unknown format {output_format!r}; choose text or json")
    if matmul_precision not in ("highest", "high", "medium", "default"):
        raise fail("--matmul-precision must be highest, high, medium or default")
    try:
        root, configured = smoke_settings(Path.cwd(), config_file)
    except ConfigError as error:
        raise fail(str(error)) from None
    cases = specs or configured.get("cases", [])
    device = device or configured.get("device", "")
    if not cases or not device:
        raise fail("name the case (FILE.py:FACTORY) and --device, or set them in [tool.portcheck.smoke]")
    settings = Settings(
        device,
        reference=reference or configured.get("reference", "cpu"),
        train=configured.get("train", False) if train is None else train,
        steps=steps or configured.get("steps", 1),
        rtol=configured.get("rtol") if rtol is None else rtol,
        atol=configured.get("atol") if atol is None else atol,
        emulate=configured.get("emulate", False) if emulate is None else emulate,
        matmul_precision=matmul_precision,
        timeout=configured.get("timeout", 300.0) if timeout is None else timeout,
    )
    root = Path.cwd() if specs else root
    try:
        for spec in cases:
            check_usage(spec, device, emulate=settings.emulate, timeout=settings.timeout, root=root)
        results = run_smoke(cases, settings, root)
    except ValueError as error:  # SpecError too: a factory that returned something unusable
        raise fail(str(error)) from None
    if output_format == "json":
        smoke_view.render_json(results, sys.stdout)
    else:
        smoke_view.render_text(results, sys.stdout, sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    raise Exit(max(result.exit_code for result in results))


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--emulate", default="", metavar="TARGET", help="The target to emulate on the CPU: tpu or neuron.")
@click.option("-m", "module", is_flag=True, help="Run a module, like `python -m MODULE`.")
@click.option(
    "--nproc",
    default=1,
    show_default=True,
    metavar="N",
    help="Processes to start, like torchrun --standalone --nproc_per_node.",
)
@click.option("--report", type=PATH, metavar="FILE", help="Also write the report here, as JSON.")
@click.pass_context
def run(ctx: click.Context, emulate: str, module: bool, nproc: int, report: Path | None) -> None:
    """Run a program like `python SCRIPT ARGS` on an emulated device: portcheck run --emulate tpu train.py ARGS.

    Options go before the program; everything after its name is the program's. Exits with the
    program's exit code; a report goes to stderr when it ends.
    """
    from portcheck.report import run_view
    from portcheck.smoke.launch import UsageError, run_program

    if not emulate:
        raise fail("choose the target with --emulate (tpu or neuron)")
    report = writable(report) if report is not None else None
    name, *args = ctx.args or [""]
    try:
        result = run_program(emulate.lower(), name, args, module=module, nproc=nproc)
    except UsageError as error:
        raise fail(str(error)) from None
    run_view.render_text(result, sys.stderr)
    if report is not None:
        with report_file(report) as out:
            run_view.render_json(result, out)
    raise Exit(result.exit_code)


@app.command()
@format_option("table", "table, json or markdown.")
def rules(output_format: str) -> None:
    """List every rule with its severity per target."""
    from portcheck import explain  # its rule documentation is only needed here

    try:
        text = explain.rules_listing(output_format, color=sys.stdout.isatty())
    except ValueError as error:
        raise fail(str(error)) from None
    sys.stdout.write(text)


@app.command("explain")
@argument("code", metavar="CODE", help="A rule code such as PC203.")
@click.option("--target", "-t", metavar="TARGET", help="Show what applies on this target.")
def explain_rule(code: str, target: str | None) -> None:
    """Show a rule's documentation, per-target severity and replacements."""
    from portcheck import explain

    try:
        sys.stdout.write(explain.explain(code.upper(), target))
    except ValueError as error:
        raise fail(str(error)) from None


def main() -> None:
    app()
