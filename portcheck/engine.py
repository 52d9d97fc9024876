"""Scans one file: read, prefilter, parse once, one batched walk, findings, suppressions.

Everything a file can do wrong (not exist, not decode, not parse, be binary or huge) becomes a
finding or a message for that file; the run goes on. Only a bug in portcheck itself is an
`internal_error`. A notebook is analysed as the module its code cells make
(portcheck.notebooks), without the cells that do not parse; its findings then count in cells.
"""

from __future__ import annotations

import gc
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, wraps
from typing import ParamSpec, TypeVar

import libcst as cst

from portcheck import filekinds, notebooks, parsing, registry, suppress
from portcheck import targets as target_data
from portcheck.coherence import Check, FindingKey, coherent, key
from portcheck.config import Config, enabled_codes
from portcheck.context import Context
from portcheck.discovery import Prefilter
from portcheck.findings import Fact, Finding, FixSafety, Severity
from portcheck.flow import NOWHERE, DeviceFlow, Placement
from portcheck.positions import positions
from portcheck.project import CALLERS_ASKED, ModulePath, Project
from portcheck.resolve import Resolver
from portcheck.results import UNKNOWN_PROJECT, FileResult, Source
from portcheck.rewrites.edits import Edit
from portcheck.rule import FindingLimit, Rule, SeverityMap, at_most_info, at_most_warning
from portcheck.sources import decode_python, decode_text
from portcheck.targets import Target
from portcheck.walk import Walker

P = ParamSpec("P")
R = TypeVar("R")

PARSE_ERROR, READ_ERROR, TOO_LARGE, UNUSED_SUPPRESSION = "PC001", "PC002", "PC003", "PC004"
TOO_MANY_FINDINGS = "PC006"


def collected_once(function: Callable[P, R]) -> Callable[P, R]:
    """Runs a file's analysis without the automatic garbage collector, then collects the young
    generation once. The analysis builds the tree and all that refers to it at once and drops
    it at once (the walker, which closes the cycle of rules and context, is let go after the
    walk, so the rest is freed as it goes out of use); meanwhile the collector's automatic
    passes traversed those live objects again at each age, a fifth of a scan's CPU. Wrap what
    drops the tree, so that the last collection has only what is left to traverse."""

    @wraps(function)
    def collected(*args: P.args, **kwargs: P.kwargs) -> R:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            gc.collect(0)
            if enabled:
                gc.enable()

    return collected


def scan_read(source: Source, config: Config, project: Project = UNKNOWN_PROJECT) -> FileResult:
    return scan_bytes(source.data, source.path, config, size=source.size, project=project, module=source.module)


@collected_once
def scan_bytes(
    data: bytes | None,
    path: str,
    config: Config,
    size: int | None = None,
    project: Project = UNKNOWN_PROJECT,
    module: ModulePath | None = None,
) -> FileResult:
    """Scan the contents of one file; `path` is used for its kind, reports and per-file-ignores.

    `data` is None when the file was too large to be worth reading. With a complete `project`,
    this is the second pass: only the rules that need project facts run, and problems with the
    file itself were already reported in the first.
    """
    return examine(data, path, config, size=size, project=project, module=module).result


@dataclass
class Examination:
    """A scan of one file as the fixer needs it: each finding's edit (aligned with
    `result.findings`, None where there is no fix) and the tree the edits refer to."""

    result: FileResult
    edits: list[Edit | None] = field(default_factory=list)  # empty when nothing was analysed
    tree: cst.Module | None = None
    checks: tuple[Check, ...] = ()  # the module's CUDA checks (portcheck.flow), as coherence needs them
    placements: dict[FindingKey, Placement] = field(default_factory=dict)  # findings among them
    held: tuple[tuple[str, str], ...] = ()  # (code, why) of fixes no guard-consistent choice allows
    notebook: notebooks.Module | None = None  # a notebook's cells as the module `tree` is, when it is one
    stopped: bool = False  # the analysis stopped at max-findings-per-file: what it found is partial

    def fixes(self) -> list[tuple[Finding, Edit]]:
        """The findings that come with an edit, and their edits."""
        return [(finding, edit) for finding, edit in zip(self.result.findings, self.edits) if edit is not None]


def examine(
    data: bytes | None,
    path: str,
    config: Config,
    size: int | None = None,
    project: Project = UNKNOWN_PROJECT,
    module: ModulePath | None = None,
    fix_target: Target | None = None,
) -> Examination:
    size = len(data) if size is None and data is not None else size or 0
    second_pass = project.complete
    kind = filekinds.kind_of(path) or filekinds.given_kind(path)
    view = None
    if data is not None and kind == filekinds.NOTEBOOK:
        opened = _open_notebook(data, path, config, second_pass)
        if isinstance(opened, Examination):
            return opened
        view, data, kind = opened, opened.code.encode(), filekinds.PYTHON
        size = len(data)  # the code, not the outputs, is what is analysed
    if data is None or (second_pass and size > config.max_file_size):
        return Examination(FileResult(path) if second_pass else _too_large(path, config, size))
    if view is not None:
        text, problem = view.code, ""
    else:
        text, problem = decode_python(data) if kind == filekinds.PYTHON else (decode_text(data), "")
    if text is None:
        return Examination(FileResult(path) if second_pass else _tool_only(path, config, READ_ERROR, detail=problem))
    kind = filekinds.by_content(kind, text)
    enabled = enabled_codes(path, config)
    reading = tuple(code for code in enabled if kind in registry.get(code).file_kinds)
    where = module or ModulePath.guess(path)
    if second_pass:
        visiting = tuple(code for code in reading if registry.get(code).in_second_pass(project, path, where.name))
        prefilter = Prefilter(t for code in visiting for t in registry.get(code).project_triggers(project))
        wanted = bool(visiting) and prefilter.wants(data)
    else:
        visiting = tuple(code for code in reading if registry.get(code).in_first_pass())
        # Trigger words only decide whether Python files are parsed; text files are cheap to read.
        wanted = _prefilter(visiting).wants(data) if kind == filekinds.PYTHON else bool(visiting)
        if wanted and kind == filekinds.PYTHON:  # and which rules walk it (Rule.walks_every_file)
            present = _trigger_words(visiting).present(data)
            visiting = tuple(code for code in visiting if _walks(registry.get(code), present))
    if not wanted and (second_pass or not suppress.mentioned(text)):
        return Examination(FileResult(path, skipped=True))
    if wanted and size > config.max_file_size:
        return Examination(_too_large(path, config, size))
    target = fix_target or default_fix_target(config)
    tree = None
    checks: tuple[Check, ...] = ()
    placements: dict[FindingKey, Placement] = {}
    elsewhere: list[tuple[str, int]] = []
    broken: list[tuple[notebooks.Cell, parsing.ParseFailure]] = []
    stopped: FindingLimit | None = None
    try:
        if wanted and view is not None:
            view, tree, broken = _parse_cells(view, config.max_expression_chain)
            data, text = view.code.encode(), view.code
        rules, tree, flow, stopped = (
            _analyse(data, text, path, kind, config, visiting, project, where, target, tree)
            if wanted
            else ([], None, None, None)
        )
        checks = tuple(Check(guard.asserts, guard.twin) for guard in flow.guards) if flow is not None else ()
        pairs, facts, placements, elsewhere = _results(rules, tree, path, config, text, flow)
        if flow is not None and flow.callers_asked and not second_pass:  # after every rule, leave_Module too
            facts.append(Fact(CALLERS_ASKED, where.name, path, 1, 1, (("keys", " ".join(sorted(flow.callers_asked))),)))
        if stopped is not None and not second_pass:
            pairs.append((_stop_finding(stopped, tree, path, config, text), None))
    except (parsing.ParseFailure, parsing.TooLong, RecursionError) as failure:
        if second_pass:
            return Examination(FileResult(path))
        pairs, facts = [(_unanalysed(failure, path, config, text), None)], []
    except Exception:  # a bug in a rule or in portcheck: report it, keep going
        return Examination(FileResult(path, internal_error=traceback.format_exc(limit=-4)))
    pairs, retracted = _suppressed(
        pairs, suppress.parse(text, kind), path, config, text, reading, elsewhere, second_pass
    )
    pairs = [(finding, edit) for finding, edit in pairs if finding.code in enabled]
    retracted = tuple(finding for finding in retracted if finding.code in enabled)
    pairs, held = _coherent(pairs, checks, placements, target)
    if view is not None:
        pairs, facts, placements = _in_cells(view, pairs, facts, placements)
        retracted = tuple(view.place(finding) for finding in retracted)
        if not second_pass:
            pairs += [(_broken_cell(path, config, cell, failure), None) for cell, failure in broken]
            pairs = [(finding, edit) for finding, edit in pairs if finding.code in enabled]
    result = FileResult(path, tuple(finding for finding, _ in pairs), tuple(facts), retracted=retracted)
    return Examination(
        result, [edit for _, edit in pairs], tree, checks, placements, tuple(held), view, stopped is not None
    )


def _unanalysed(
    failure: parsing.ParseFailure | parsing.TooLong | RecursionError, path: str, config: Config, text: str
) -> Finding:
    """The finding of a file that was not analysed: it does not parse (PC001), it nests deeper
    than the walk can follow (PC001), or its chains would take too long to parse (PC003)."""
    if isinstance(failure, parsing.TooLong):
        return _tool_finding(TOO_LARGE, path, config, failure.line, 1, text, detail=failure.detail)
    if isinstance(failure, RecursionError):  # parsed, but nested deeper than the walk (and CPython) can follow
        return _tool_finding(PARSE_ERROR, path, config, 1, 1, text, detail="too deeply nested for portcheck to analyse")
    return _tool_finding(PARSE_ERROR, path, config, failure.line, failure.column, text, detail=failure.detail)


def _stop_finding(stopped: FindingLimit, tree: cst.Module | None, path: str, config: Config, text: str) -> Finding:
    """PC006 where the analysis stopped: at the first report over max-findings-per-file."""
    if isinstance(stopped.where, tuple):
        line, column = stopped.where[:2]
    else:
        assert tree is not None, "only Python rules report nodes"
        line, column, _, _ = _span(positions(tree, [stopped.where])[id(stopped.where)])
    return _tool_finding(TOO_MANY_FINDINGS, path, config, line, column, text, limit=f"{config.max_findings_per_file:,}")


def _suppressed(
    pairs: list[tuple[Finding, Edit | None]],
    directives: Sequence[suppress.Directive],
    path: str,
    config: Config,
    text: str,
    reading: Sequence[str],
    elsewhere: Sequence[tuple[str, int]],
    second_pass: bool,
) -> tuple[list[tuple[Finding, Edit | None]], tuple[Finding, ...]]:
    """The findings no directive suppresses, with the reports of unused entries (first pass);
    in the second pass, the first pass's reports of bare entries that suppressed something now."""
    if not directives:
        return pairs, ()
    # Unused entries are judged in the first pass, for the rules that report only there.
    judged = tuple(code for code in reading if not registry.get(code).has_second_pass())
    applied = suppress.apply(
        [finding for finding, _ in pairs],
        directives,
        judged,
        config.targets,
        lambda d, e, why: _tool_finding(UNUSED_SUPPRESSION, path, config, d.line, d.column, text, detail=why),
        elsewhere,
    )
    kept = [(finding, edit) for finding, (_, edit) in zip(applied.kept, pairs) if finding is not None]
    if second_pass:
        return kept, applied.used_bare
    return kept + [(finding, None) for finding in applied.unused], ()


def _open_notebook(data: bytes, path: str, config: Config, second_pass: bool) -> notebooks.Module | Examination:
    """A notebook's code cells as one module, or the result of a file that is not one."""
    try:
        notebook = notebooks.read(data)
    except notebooks.NotebookError as error:
        return Examination(FileResult(path) if second_pass else _tool_only(path, config, READ_ERROR, detail=str(error)))
    if not notebook.python:
        return Examination(FileResult(path, skipped=True))
    return notebook.module()


def _parse_cells(
    view: notebooks.Module, max_chain: int
) -> tuple[notebooks.Module, cst.Module, list[tuple[notebooks.Cell, parsing.ParseFailure]]]:
    """The notebook's module parsed without the cells that do not parse, and each such cell
    with its failure (in the cell's lines): one parse when every cell parses."""
    broken: list[tuple[notebooks.Cell, parsing.ParseFailure]] = []
    checked = False
    while True:
        try:
            return view, parsing.parse(view.code.encode(), view.code, max_chain), broken
        except parsing.ParseFailure as failure:
            if checked:  # every cell parses alone, but not together: leave out the one that fails
                cell, line = view.locate(failure.line)
                if cell.number in view.left_out:
                    raise
                broken.append((cell, parsing.ParseFailure(line, failure.column, failure.detail)))
            else:
                broken += _cells_failing(view, max_chain)
                checked = True
            view = view.without(cell.number for cell, _ in broken)


def _cells_failing(view: notebooks.Module, max_chain: int) -> list[tuple[notebooks.Cell, parsing.ParseFailure]]:
    failing = []
    for cell in view.notebook.cells:
        if cell.number not in view.left_out:
            try:
                parsing.parse(cell.masked.text.encode(), cell.masked.text, max_chain)
            except parsing.ParseFailure as failure:
                failing.append((cell, failure))
    return failing


def _in_cells(
    view: notebooks.Module,
    pairs: list[tuple[Finding, Edit | None]],
    facts: list[Fact],
    placements: dict[FindingKey, Placement],
) -> tuple[list[tuple[Finding, Edit | None]], list[Fact], dict[FindingKey, Placement]]:
    """Findings, facts and placements with their module positions turned into cell positions."""
    placed = [(view.place(finding), edit) for finding, edit in pairs]
    moved = {key(new): placements[key(old)] for (old, _), (new, _) in zip(pairs, placed) if key(old) in placements}
    return placed, [view.place_fact(fact) for fact in facts], moved


def _broken_cell(path: str, config: Config, cell: notebooks.Cell, failure: parsing.ParseFailure) -> Finding:
    finding = _tool_finding(PARSE_ERROR, path, config, failure.line, failure.column, cell.source, detail=failure.detail)
    return replace(finding, cell=cell.number, source_line=cell.line(failure.line))


def _coherent(
    pairs: list[tuple[Finding, Edit | None]],
    checks: tuple[Check, ...],
    placements: dict[FindingKey, Placement],
    target: Target,
) -> tuple[list[tuple[Finding, Edit | None]], list[tuple[str, str]]]:
    """Without the edits that no choice of fixes can make consistent with their guards
    (portcheck.coherence): those findings are not fixable, and say why."""
    offered = [(finding, edit) for finding, edit in pairs if edit is not None]
    _, held = coherent(checks, placements, [finding for finding, _ in pairs], offered, target)
    if not held:
        return pairs, []
    why = {id(finding): reason for finding, reason in held}
    kept = [
        (replace(f, fix_safety=FixSafety.NONE, hint=f"{f.hint} (not fixed: {why[id(f)]})"), None)
        if id(f) in why
        else (f, edit)
        for f, edit in pairs
    ]
    return kept, [(finding.code, reason) for finding, reason in held]


def default_fix_target(config: Config) -> Target:
    """In a scan, fixes are only offered, not applied: judge them for the first selected target
    that needs any (ROCm keeps the CUDA spellings)."""
    names = [name for name in config.targets if not target_data.get(name).keeps_cuda_api] or list(config.targets)
    return target_data.get(names[0])


def _too_large(path: str, config: Config, size: int) -> FileResult:
    detail = f"the file is {_bytes(size)}, over max-file-size ({_bytes(config.max_file_size)})"
    return _tool_only(path, config, TOO_LARGE, detail=detail)


def _bytes(count: int) -> str:
    for unit, scale in (("MB", 10**6), ("kB", 10**3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def _walks(rule: type[Rule], present: frozenset[bytes]) -> bool:
    """Whether a rule walks a parsed file: one that holds its triggers (it reports nowhere
    else), or any where it learns project facts from every file."""
    return rule.walks_every_file or not rule.triggers or not present.isdisjoint(rule.triggers)


@cache
def _trigger_words(codes: tuple[str, ...]) -> Prefilter:
    """Every trigger word of the rules, for `Prefilter.present` (also where a rule without
    any makes `_prefilter` skip nothing)."""
    return Prefilter(trigger for code in codes for trigger in registry.get(code).triggers)


@cache
def _prefilter(codes: tuple[str, ...]) -> Prefilter:
    rules = [registry.get(code) for code in codes]
    if not rules or any(not rule.triggers for rule in rules):
        return Prefilter(None)  # only tool rules (e.g. a syntax check), or a tokenless rule
    return Prefilter(trigger for rule in rules for trigger in rule.triggers)


def _analyse(
    data: bytes,
    text: str,
    path: str,
    kind: str,
    config: Config,
    codes: Sequence[str],
    project: Project,
    module: ModulePath,
    fix_target: Target,
    tree: cst.Module | None = None,
) -> tuple[list[Rule], cst.Module | None, DeviceFlow | None, FindingLimit | None]:
    """Run the rules over one file (parsed already, when `tree` is given); they keep what they
    saw in `reports` and `records`. The analysis stops at max-findings-per-file: where, is the
    last item (None when it did not), so that time and memory stay bounded on generated files."""
    if kind != filekinds.PYTHON:
        context = Context(path, kind, config, None, project, module, fix_target)
        rules = [registry.get(code)(context) for code in codes]
        try:
            for rule in rules:
                rule.check_text(text)
        except FindingLimit as stopped:
            return rules, None, None, stopped
        return rules, None, None, None
    tree = tree or parsing.parse(data, text, config.max_expression_chain)
    resolver = Resolver(tree)
    context = Context(path, kind, config, resolver, project, module, fix_target, data)
    flow = context.flow = DeviceFlow(resolver, project.host_parameters_in(module.name), module)
    rules = [registry.get(code)(context) for code in codes]
    walker = Walker([flow, *rules], resolver)  # the flow first: rules see what it saw
    context.walker = walker
    flow.ancestors = walker.ancestors
    with warnings.catch_warnings():
        # Rules read literals with ast.literal_eval, which warns about the user's `'\d'`.
        for category in (SyntaxWarning, DeprecationWarning):
            warnings.filterwarnings("ignore", "invalid escape sequence", category)
        try:
            walker.walk(tree)
        except FindingLimit as stopped:
            return rules, tree, flow, stopped
        finally:
            # the walker closes a cycle (it holds the rules, which hold the context): without it
            # the file's tree and all that refers to it are freed as soon as the file is done,
            # not found as garbage by traversing them all again
            context.walker = None
    return rules, tree, flow, None


def _results(
    rules: Sequence[Rule], tree: cst.Module | None, path: str, config: Config, text: str, flow: DeviceFlow | None
) -> tuple[list[tuple[Finding, Edit | None]], list[Fact], dict[FindingKey, Placement], list[tuple[str, int]]]:
    """Turn what the rules saw into findings (each with its edit, if any), facts, where the
    findings sit among the module's CUDA checks, and the (code, line) of reports that matter
    only on targets not selected. CUDA-only code reached only under such a check does not run
    on another target as written: where the check is one a port opens or drops, the code is at
    most a warning (the check is the finding to act on first), on the CPU info (the program's
    own other path runs there); under a test's gate or an assert, info."""
    chains = {id(r.node): r.chain for rule in rules for r in (*rule.reports, *rule.records) if r.node is not None}
    nodes = [r.node for rule in rules for r in (*rule.reports, *rule.records) if r.node is not None]
    for rule in rules:
        for report in rule.reports:
            method = _method_name(report.node)
            if method is not None:
                assert isinstance(report.node, cst.Call)
                chains[id(method)] = (*report.chain, report.node, report.node.func)
                nodes.append(method)
    ranges = positions(tree, nodes, text=text, chains=chains) if tree is not None else {}
    placements: dict[FindingKey, Placement] = {}
    lines = text.splitlines()
    pairs = []
    elsewhere = []
    for rule in rules:
        for report in rule.reports:
            placement = NOWHERE
            if report.node is not None:
                span = _anchored(report.node, ranges)
                placement = flow.placement(report.chain, report.node) if flow is not None else NOWHERE
            else:
                assert report.span is not None
                span = report.span
            message, severity = report.message, report.severity
            if rule.cuda_only and flow is not None and flow.rewritten_with_check(placement):
                message = f"{message} (in a test led by a CUDA check: a port that rewrites the check rewrites this too)"
                severity = at_most_warning(severity)
            elif rule.cuda_only and flow is not None and flow.only_under_cuda(placement):
                message = f"{message} (reached only under a CUDA check: it runs only where CUDA is present)"
                severity = at_most_warning(severity) if flow.on_a_device_path(placement) else at_most_info(severity)
            finding = _finding(type(rule), message, report.hint, severity, path, config, span, lines)
            if finding is None:
                elsewhere.append((rule.code, span[0]))
                continue
            if report.edit is not None:
                finding = replace(finding, fix_safety=report.edit.safety)
            if placement is not NOWHERE:
                placements[key(finding)] = placement
            pairs.append((finding, report.edit))
    facts = []
    for rule in rules:
        for record in rule.records:
            first, last = (ranges[id(record.node)][0], ranges[id(record.node)][2]) if record.node else record.lines
            facts.append(Fact(record.kind, record.name, path, first, last, record.details))
    return pairs, facts, placements, elsewhere


def _method_name(node: cst.CSTNode | None) -> cst.Name | None:
    """The method name of a method call (`.cuda` in `x.unsqueeze(0).cuda()`)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.attr
    return None


def _anchored(node: cst.CSTNode, ranges: Mapping[int, tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    """A finding's span: the node's, but a method call chained over several lines starts at
    its method's line, where the reader (and a `# portcheck: ignore` at the line's end) looks."""
    span = _span(ranges[id(node)])
    method = _method_name(node)
    if method is not None and ranges[id(method)][0] > span[0]:
        line, column = ranges[id(method)][:2]
        span = (line, column + 1, span[2], span[3])
    return span


def _span(position: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """A node's position as a finding's span: 1-based columns, end exclusive."""
    start_line, start_col, end_line, end_col = position
    return (start_line, start_col + 1, end_line, end_col + 1)


def _finding(
    rule: type[Rule],
    message: str,
    hint: str,
    severity: SeverityMap,
    path: str,
    config: Config,
    span: tuple[int, int, int, int],
    lines: Sequence[str],
) -> Finding | None:
    """A finding for the selected targets it matters on; None if it matters on none."""
    per_target = tuple(
        (target, severity[target]) for target in config.targets if severity.get(target, Severity.OFF) > Severity.OFF
    )
    if not per_target:
        return None
    line = span[0]
    return Finding(
        path=path,
        code=rule.code,
        name=rule.name,
        message=message,
        hint=hint,
        line=line,
        column=span[1],
        end_line=span[2],
        end_column=span[3],
        severity=max(level for _, level in per_target),
        targets=per_target,
        source_line=lines[line - 1] if 0 < line <= len(lines) else "",
    )


def _tool_finding(code: str, path: str, config: Config, line: int, column: int, text: str, **fields: str) -> Finding:
    """A finding of one of the engine-reported rules (PC0), spanning the rest of its line."""
    rule = registry.get(code)
    lines = text.splitlines()
    end_column = max(column + 1, len(lines[line - 1]) + 1 if 0 < line <= len(lines) else 0)
    span = (line, column, line, end_column)
    finding = _finding(rule, rule.message.format(**fields), rule.hint, rule.severity, path, config, span, lines)
    assert finding is not None, "tool rules matter on every target"
    return finding


def unreadable(path: str, config: Config, detail: str) -> FileResult:
    """The result of a file that could not be read (PC002)."""
    return _tool_only(path, config, READ_ERROR, detail=detail)


def _tool_only(path: str, config: Config, code: str, **fields: str) -> FileResult:
    if code not in enabled_codes(path, config):
        return FileResult(path)
    return FileResult(path, (_tool_finding(code, path, config, 1, 1, "", **fields),))
