"""The command line: options -> config -> api -> reporter -> exit code. Nothing else lives here.

Exit codes, as in Ruff: 0 nothing at or above --fail-on, 1 something is, 2 usage, configuration
or tool errors (including paths that do not exist).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TextIO

import typer

from portcheck import __version__, api, baseline, cache, inventory, readiness
from portcheck.config import Config, ConfigError, load, smoke_settings
from portcheck.report import FORMAT_NAMES, fix_view, formats, inventory_view, progress, readiness_view, statistics

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Find what ties PyTorch code to CUDA, per target accelerator (tpu, neuron, xla, mps, xpu, npu, hpu, rocm, cpu).",
)

Paths = Annotated[list[Path] | None, typer.Argument(help="Files or directories (default: .)", show_default=False)]
Targets = Annotated[
    list[str] | None,
    typer.Option("--target", "-t", help="Target(s), repeatable or comma-separated; 'all' for every one."),
]
Select = Annotated[list[str] | None, typer.Option(help="Rule codes or prefixes to enable (replaces the default ALL).")]
ExtendSelect = Annotated[list[str] | None, typer.Option(help="Rule codes or prefixes to enable in addition.")]
Ignore = Annotated[list[str] | None, typer.Option(help="Rule codes or prefixes to disable.")]
Exclude = Annotated[list[str] | None, typer.Option(help="Gitignore-style patterns replacing the default excludes.")]
ExtendExclude = Annotated[list[str] | None, typer.Option(help="Gitignore-style patterns to exclude in addition.")]
ConfigFile = Annotated[Path | None, typer.Option("--config", help="A pyproject.toml to read [tool.portcheck] from.")]
TorchVersion = Annotated[str | None, typer.Option(help="The torch release the code must run on, e.g. 2.13.")]
NoGitignore = Annotated[bool, typer.Option("--no-respect-gitignore", help="Scan files that .gitignore excludes.")]
ForceExclude = Annotated[bool, typer.Option(help="Apply excludes to paths given explicitly too (pre-commit).")]
Jobs = Annotated[int | None, typer.Option("--jobs", "-j", min=1, help="Processes to scan with (default: all cores).")]
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
        envvar="PORTCHECK_CACHE_DIR", help="Where results are cached (default: .portcheck_cache in the project root)."
    ),
]


def _fail(message: str) -> typer.Exit:
    typer.echo(f"portcheck: error: {message}", err=True)
    return typer.Exit(2)


def _split(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _config(
    paths: list[Path],
    config_file: Path | None,
    **overrides: object,
) -> Config:
    start = paths[0] if len(paths) == 1 else Path.cwd()
    try:
        config = load(start if start.exists() else Path.cwd(), config_file)
        given = {key: _split(value) if isinstance(value, list) else value for key, value in overrides.items()}
        return config.with_overrides(**{key: value for key, value in given.items() if value is not None})
    except ConfigError as error:
        raise _fail(str(error)) from None


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


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"portcheck {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version_callback, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """portcheck: move PyTorch code off CUDA safely."""


@app.command()
def scan(
    paths: Paths = None,
    target: Targets = None,
    select: Select = None,
    extend_select: ExtendSelect = None,
    ignore: Ignore = None,
    exclude: Exclude = None,
    extend_exclude: ExtendExclude = None,
    config_file: ConfigFile = None,
    torch_version: TorchVersion = None,
    no_respect_gitignore: NoGitignore = False,
    force_exclude: ForceExclude = False,
    jobs: Jobs = None,
    no_cache: NoCache = False,
    cache_dir: CacheDir = None,
    output_format: Annotated[
        str, typer.Option("--format", "-f", help=f"Output format: {', '.join(FORMAT_NAMES)}.")
    ] = "text",
    output_file: Annotated[Path | None, typer.Option("--output-file", "-o", help="Write the report here.")] = None,
    fail_on: Annotated[str | None, typer.Option(help="Lowest severity that fails: error, warning or info.")] = None,
    exit_zero: Annotated[bool, typer.Option(help="Exit 0 even when findings fail the run.")] = False,
    show_statistics: Annotated[bool, typer.Option("--statistics", help="Only show counts per rule.")] = False,
    baseline_file: Annotated[
        Path | None, typer.Option("--baseline", help="Ignore findings recorded by `portcheck baseline`.")
    ] = None,
) -> None:
    """Report what ties the code to CUDA, per target."""
    paths = paths or [Path(".")]
    if output_format not in FORMAT_NAMES:
        raise _fail(f"unknown format {output_format!r}; choose from {', '.join(FORMAT_NAMES)}")
    config = _config(
        paths,
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
    )
    folder = _cache_folder(config, no_cache, cache_dir)
    with _progress("Scanning", progress.wanted(output_format, to_file=output_file is not None)) as bar:
        report = api.scan_paths(paths, config, jobs=jobs, cache=folder, progress=bar)
    if baseline_file is not None:
        try:
            report = baseline.apply(report, baseline.load(baseline_file))
        except baseline.BaselineError as error:
            raise _fail(str(error)) from None
    out = output_file.open("w", encoding="utf-8") if output_file else sys.stdout
    try:
        color = output_file is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ
        if show_statistics:
            _print_statistics(report, output_format, out)
        else:
            formats()[output_format](report, out, color)
    finally:
        if output_file:
            out.close()
    if report.errors or report.internal_errors:
        raise typer.Exit(2)
    failing = any(f.severity >= report.config.fail_on for f in report.findings)
    raise typer.Exit(1 if failing and not exit_zero else 0)


@app.command()
def fix(
    paths: Paths = None,
    device: Annotated[
        str,
        typer.Option(
            "--device",
            "-d",
            help="The target to rewrite for: tpu, neuron, xla, mps, xpu, npu, hpu, cpu, or auto "
            "(device-agnostic code that runs on whatever accelerator is present, else the CPU).",
        ),
    ] = "",
    diff: Annotated[bool, typer.Option("--diff", help="Print a unified diff and write nothing.")] = False,
    unsafe_fixes: Annotated[bool, typer.Option(help="Also apply fixes that may change behaviour.")] = False,
    select: Select = None,
    extend_select: ExtendSelect = None,
    ignore: Ignore = None,
    config_file: ConfigFile = None,
    torch_version: TorchVersion = None,
    exit_non_zero_on_fix: Annotated[bool, typer.Option(help="Exit 1 when something was fixed.")] = False,
    fail_on: Annotated[str | None, typer.Option(help="Lowest severity of what is left that fails.")] = None,
) -> None:
    """Rewrite what can be rewritten safely for one target; report the rest with guidance."""
    paths = paths or [Path(".")]
    if not device:
        raise _fail("choose the target with --device (tpu, neuron, xla, mps, xpu, npu, hpu, cpu, auto)")
    config = _config(
        paths,
        config_file,
        select=select,
        extend_select=extend_select,
        ignore=ignore,
        torch_version=torch_version,
        fail_on=fail_on,
    )
    try:
        with _progress("Fixing", progress.wanted("text", to_file=False)) as bar:
            report = api.fix_paths(paths, config, device.lower(), unsafe=unsafe_fixes, write=not diff, progress=bar)
    except ValueError as error:
        raise _fail(str(error)) from None
    if diff:
        fix_view.render_diff(report, sys.stdout)
    fix_view.render_summary(report, sys.stderr if diff else sys.stdout)
    if report.errors or any(outcome.error for outcome in report.outcomes):
        raise typer.Exit(2)
    left = any(f.severity >= config.fail_on for outcome in report.outcomes for f in outcome.remaining)
    changed = any(outcome.changed for outcome in report.outcomes)
    raise typer.Exit(1 if left or (exit_non_zero_on_fix and changed) else 0)


def _print_statistics(report: api.ScanReport, output_format: str, out: TextIO) -> None:
    rows = statistics(report)
    if output_format == "json":
        document = [
            {"code": r.code, "name": r.name, "count": r.count, "worst_severity": r.worst.label, "fixable": r.fixable}
            for r in rows
        ]
        json.dump(document, out, indent=2)
        out.write("\n")
        return
    for row in rows:
        out.write(f"{row.count:>6}\t{row.code}\t{row.name}\t{row.worst.label}\n")


@app.command("baseline")
def write_baseline(
    paths: Paths = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the baseline.")] = Path(
        ".portcheck-baseline.json"
    ),
    target: Targets = None,
    select: Select = None,
    extend_select: ExtendSelect = None,
    ignore: Ignore = None,
    config_file: ConfigFile = None,
    jobs: Jobs = None,
    no_cache: NoCache = False,
    cache_dir: CacheDir = None,
) -> None:
    """Record today's findings so that `scan --baseline` fails only on new ones."""
    paths = paths or [Path(".")]
    config = _config(paths, config_file, targets=target, select=select, extend_select=extend_select, ignore=ignore)
    report = api.scan_paths(paths, config, jobs=jobs, cache=_cache_folder(config, no_cache, cache_dir))
    if report.errors or report.internal_errors:
        for error in (*report.errors, *report.internal_errors):
            typer.echo(f"portcheck: error: {error}", err=True)
        raise typer.Exit(2)
    count = baseline.write(output, report.findings)
    typer.echo(f"Wrote {count} finding{'s' if count != 1 else ''} to {output}")


def _run(
    paths: list[Path] | None,
    config_file: Path | None,
    jobs: int | None,
    no_cache: bool,
    cache_dir: Path | None,
    **overrides: object,
) -> api.ScanReport:
    paths = paths or [Path(".")]
    config = _config(paths, config_file, **overrides)
    report = api.scan_paths(paths, config, jobs=jobs, cache=_cache_folder(config, no_cache, cache_dir))
    for error in (*report.errors, *report.internal_errors):
        typer.echo(f"portcheck: error: {error}", err=True)
    return report


@app.command()
def kernels(
    paths: Paths = None,
    target: Targets = None,
    config_file: ConfigFile = None,
    jobs: Jobs = None,
    no_cache: NoCache = False,
    cache_dir: CacheDir = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="text, json or csv.")] = "text",
    all_kernels: AllKernels = False,
) -> None:
    """Inventory the custom kernels (Triton, CUDA C++, extensions, CUDA ops) and what porting takes."""
    if output_format not in ("text", "json", "csv"):
        raise _fail(f"unknown format {output_format!r}; choose text, json or csv")
    report = _run(paths, config_file, jobs, no_cache, cache_dir, targets=target, select=["PC6"])
    found = inventory.build(report.facts, all_kernels)
    if output_format == "json":
        inventory_view.render_json(found, report.config.targets, sys.stdout)
    elif output_format == "csv":
        inventory_view.render_csv(found, report.config.targets, sys.stdout)
    else:
        inventory_view.render_text(found, report.config.targets, sys.stdout, sys.stdout.isatty())
    raise typer.Exit(2 if report.errors or report.internal_errors else 0)


@app.command("report")
def readiness_report(
    paths: Paths = None,
    target: Targets = None,
    select: Select = None,
    ignore: Ignore = None,
    config_file: ConfigFile = None,
    jobs: Jobs = None,
    no_cache: NoCache = False,
    cache_dir: CacheDir = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="text, json or markdown.")] = "text",
    all_kernels: AllKernels = False,
    details: Annotated[
        bool, typer.Option("--details", help="Markdown: also each target's full list (JSON always has it).")
    ] = False,
) -> None:
    """A readiness verdict per target: blockers, fixable findings, kernels and dependencies to replace."""
    if output_format not in ("text", "json", "markdown"):
        raise _fail(f"unknown format {output_format!r}; choose text, json or markdown")
    report = _run(paths, config_file, jobs, no_cache, cache_dir, targets=target, select=select, ignore=ignore)
    found = inventory.build(report.facts, all_kernels)
    rows = readiness.assess(report, found)
    if output_format == "json":
        readiness_view.render_json(rows, found, sys.stdout)
    elif output_format == "markdown":
        readiness_view.render_markdown(rows, found, report.findings, sys.stdout, details)
    else:
        readiness_view.render_text(rows, found, sys.stdout, sys.stdout.isatty())
    raise typer.Exit(2 if report.errors or report.internal_errors else 0)


@app.command()
def smoke(
    specs: Annotated[
        list[str] | None,
        typer.Argument(help="FILE.py:FACTORY or MODULE:FACTORY (default: cases in [tool.portcheck.smoke])."),
    ] = None,
    device: Annotated[str, typer.Option("--device", "-d", help="The device to test: tpu, neuron, cuda, mps...")] = "",
    reference: Annotated[str, typer.Option(help="The device the results are compared with.")] = "",
    train: Annotated[bool | None, typer.Option("--train/--forward", help="Also run training steps.")] = None,
    steps: Annotated[int | None, typer.Option(min=1, help="Training steps with --train.")] = None,
    rtol: Annotated[float | None, typer.Option(help="Relative tolerance (default: per dtype).")] = None,
    atol: Annotated[float | None, typer.Option(help="Absolute tolerance (default: per dtype).")] = None,
    emulate: Annotated[
        bool | None, typer.Option(help="Run on a CPU stand-in that enforces the target's constraints.")
    ] = None,
    matmul_precision: Annotated[
        str,
        typer.Option(
            help="highest: float32 matmuls at full precision on both sides; default: the target's own (TPU: "
            "bfloat16), compared with bf16 tolerances."
        ),
    ] = "highest",
    timeout: Annotated[float | None, typer.Option(help="Seconds each case may take on each device.")] = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.")] = "text",
    config_file: ConfigFile = None,
) -> None:
    """Run a model on a device and on a CPU reference; compare outputs, gradients and weights; trace it."""
    from portcheck.report import smoke_view
    from portcheck.smoke.runner import Settings, check_usage, run_smoke

    if output_format not in ("text", "json"):
        raise _fail(f"unknown format {output_format!r}; choose text or json")
    if matmul_precision not in ("highest", "high", "medium", "default"):
        raise _fail("--matmul-precision must be highest, high, medium or default")
    try:
        root, configured = smoke_settings(Path.cwd(), config_file)
    except ConfigError as error:
        raise _fail(str(error)) from None
    cases = specs or configured.get("cases", [])
    device = device or configured.get("device", "")
    if not cases or not device:
        raise _fail("name the case (FILE.py:FACTORY) and --device, or set them in [tool.portcheck.smoke]")
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
        raise _fail(str(error)) from None
    if output_format == "json":
        smoke_view.render_json(results, sys.stdout)
    else:
        smoke_view.render_text(results, sys.stdout, sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    raise typer.Exit(max(result.exit_code for result in results))


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}
)
def run(
    ctx: typer.Context,
    emulate: Annotated[str, typer.Option("--emulate", help="The target to emulate on the CPU: tpu or neuron.")] = "",
    module: Annotated[bool, typer.Option("-m", help="Run a module, like `python -m MODULE`.")] = False,
    nproc: Annotated[
        int, typer.Option("--nproc", help="Processes to start, like torchrun --standalone --nproc_per_node.")
    ] = 1,
    report: Annotated[Path | None, typer.Option("--report", help="Also write the report here, as JSON.")] = None,
) -> None:
    """Run a program like `python SCRIPT ARGS` on an emulated device: portcheck run --emulate tpu train.py ARGS.

    Options go before the program; everything after its name is the program's. Exits with the
    program's exit code; a report goes to stderr when it ends.
    """
    from portcheck.report import run_view
    from portcheck.smoke.launch import UsageError, run_program

    if not emulate:
        raise _fail("choose the target with --emulate (tpu or neuron)")
    name, *args = ctx.args or [""]
    try:
        result = run_program(emulate.lower(), name, args, module=module, nproc=nproc)
    except UsageError as error:
        raise _fail(str(error)) from None
    run_view.render_text(result, sys.stderr)
    if report is not None:
        with report.open("w", encoding="utf-8") as out:
            run_view.render_json(result, out)
    raise typer.Exit(result.exit_code)


@app.command()
def rules(
    output_format: Annotated[str, typer.Option("--format", "-f", help="table, json or markdown.")] = "table",
) -> None:
    """List every rule with its severity per target."""
    from portcheck import explain  # its rule documentation is only needed here

    try:
        text = explain.rules_listing(output_format, color=sys.stdout.isatty())
    except ValueError as error:
        raise _fail(str(error)) from None
    sys.stdout.write(text)


@app.command("explain")
def explain_rule(
    code: Annotated[str, typer.Argument(help="A rule code such as PC203.")],
    target: Annotated[str | None, typer.Option("--target", "-t", help="Show what applies on this target.")] = None,
) -> None:
    """Show a rule's documentation, per-target severity and replacements."""
    from portcheck import explain

    try:
        sys.stdout.write(explain.explain(code.upper(), target))
    except ValueError as error:
        raise _fail(str(error)) from None


def main() -> None:
    app()
