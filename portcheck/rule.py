"""What a rule is: one code, one class, its documentation, its examples, and what it observes.

A rule subclasses `Rule`, declares its metadata as class attributes, and defines libcst-style
`visit_<Node>` / `leave_<Node>` methods that call `self.report(node, ...)`. Rules never read
files, print or look at configuration beyond what `FileContext` hands them.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar, Protocol

import libcst as cst

from portcheck import filekinds
from portcheck import targets as target_data
from portcheck.findings import FixSafety, Severity

if TYPE_CHECKING:
    from portcheck.flow import DeviceFlow
    from portcheck.project import ModulePath, Project
    from portcheck.rewrites.edits import Edit
    from portcheck.targets import Target

ERROR, WARNING, INFO, OFF = Severity.ERROR, Severity.WARNING, Severity.INFO, Severity.OFF
SeverityMap = Mapping[str, Severity]
DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Targets", "Fix safety")
CODE_PATTERN = re.compile(r"^PC\d{3}$")
NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def per_target(default: Severity, **overrides: Severity) -> dict[str, Severity]:
    """A severity for every known target: `default`, except where named."""
    unknown = set(overrides) - set(target_data.TARGET_ORDER)
    if unknown:
        raise ValueError(f"unknown targets {sorted(unknown)}")
    return {name: overrides.get(name, default) for name in target_data.TARGET_ORDER}


def at_most_info(severity: Mapping[str, Severity]) -> dict[str, Severity]:
    """The same targets, none above info: for what runs only where the finding cannot bite."""
    return {target: min(level, INFO) for target, level in severity.items()}


def at_most_warning(severity: Mapping[str, Severity]) -> dict[str, Severity]:
    """The same targets, none above warning, and info on the CPU: for CUDA-only code the
    target skips (a fast path, a report), which a port opens or drops, while on the CPU the
    CUDA path stays for GPUs."""
    return {target: min(level, INFO if target == "cpu" else WARNING) for target, level in severity.items()}


@dataclass(frozen=True)
class Valid:
    """Source that the rule must not report."""

    code: str | bytes
    options: Mapping[str, object] = field(default_factory=dict)
    path: str = "example.py"  # the file name decides its kind (`.cu`, `requirements.txt`...)


@dataclass(frozen=True)
class Invalid:
    """Source that the rule must report, on `lines` when given (one entry per finding).

    `fixed` is what `portcheck fix --device <device>` makes of it with only this rule enabled
    (with `unsafe`: also its unsafe fixes); None means the rule offers no fix here."""

    code: str | bytes
    lines: Sequence[int] | None = None
    message: str = ""  # a substring every reported message must contain
    options: Mapping[str, object] = field(default_factory=dict)
    path: str = "example.py"
    fixed: str | None = None
    device: str = "tpu"
    unsafe: bool = False


Span = tuple[int, int, int, int]  # start line, start column, end line, end column (1-based, end exclusive)


@dataclass(frozen=True, slots=True)
class Report:
    """What a rule saw; the engine turns it into a `Finding` once it knows positions.

    Python rules report a node, text rules a span."""

    node: cst.CSTNode | None
    message: str
    hint: str
    severity: SeverityMap
    span: Span | None = None
    edit: Edit | None = None
    chain: tuple[cst.CSTNode, ...] = ()  # the nodes from the module down to `node`


@dataclass(frozen=True, slots=True)
class Record:
    """A project fact a rule noted, located by node (Python) or line (text)."""

    kind: str
    name: str
    node: cst.CSTNode | None
    lines: tuple[int, int]  # first and last line, for text rules (Python rules give the node)
    details: tuple[tuple[str, str], ...]
    chain: tuple[cst.CSTNode, ...] = ()  # the nodes from the module down to `node`


# Where a fact is recorded that only its name and file matter for (the second pass's step
# calls and pending steps, thousands a project): no position to compute.
UNPLACED = (0, 0)


class FindingLimit(Exception):
    """A file reached `max-findings-per-file`: its analysis stops at `where`, the report
    that went over (portcheck.engine turns that into one PC006 finding)."""

    def __init__(self, where: cst.CSTNode | Span) -> None:
        super().__init__("max-findings-per-file")
        self.where = where


class FileContext(Protocol):
    """The engine-side services a rule may use while visiting one file."""

    path: str
    kind: str  # portcheck.filekinds
    targets: tuple[str, ...]
    torch_version: tuple[int, ...] | None
    project: Project  # the repository's layout; its facts too in the second pass (`complete`)
    module: ModulePath  # the file's place in the import system
    flow: DeviceFlow | None  # the module's device logic (Python files), built during the walk
    source: bytes  # the file's bytes as parsed (Python files): for what its text mentions anywhere

    def qualified_names(self, node: cst.CSTNode) -> frozenset[str]: ...

    def assigned_value(self, node: cst.Name) -> cst.BaseExpression | None: ...

    def assigned_values(self, node: cst.Name) -> list[cst.BaseExpression]:
        """Every value `=` binds the name to in its scope (none if anything else binds it)."""
        ...

    fix_target: Target  # the target fixes are written for (in a scan: the first selected one)

    def binding(self, module: str, at_module_level: bool = False) -> tuple[str, tuple[str, ...]] | None:
        """The name to write for `module` at the node being visited (or at module level),
        reusing the user's import (`T` after `import torch as T`), and the imports a fix must
        add for it; None when the name is taken by something else."""
        ...

    def is_free(self, name: str) -> bool:
        """Whether `name` is bound nowhere visible from the node being visited."""
        ...

    def module_assignments(self) -> list[tuple[str, cst.BaseExpression]]:
        """The module's names bound exactly once by `=`, with their values."""
        ...

    @property
    def parent(self) -> cst.CSTNode | None: ...

    @property
    def ancestors(self) -> Sequence[cst.CSTNode]: ...

    def chain(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        """The nodes from the module down to `node` (the walk's ancestors and below)."""
        ...

    def count_report(self, where: cst.CSTNode | Span) -> None:
        """Count one more report of the file; raises FindingLimit past the file's limit."""
        ...


class Rule:
    """Base class of every rule. Subclasses fill in the class attributes below."""

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]  # str.format template, filled from report(**fields)
    hint: ClassVar[str] = ""  # what to do instead; also a template
    severity: ClassVar[SeverityMap]
    fix_safety: ClassVar[FixSafety] = FixSafety.NONE
    # Byte strings one of which must occur in a Python file for this rule to find anything;
    # the engine does not parse files that contain none of the enabled rules' triggers. Empty
    # means the rule can fire on any file (tokenless patterns) and disables that skipping.
    triggers: ClassVar[tuple[bytes, ...]] = ()
    # Of a parsed file, a rule walks only one that holds its triggers, unless it learns project
    # facts from every file it is given (the imports of each module, the calls every step loop
    # makes): such a rule walks every file that is parsed.
    walks_every_file: ClassVar[bool] = False
    # Qualified-name prefixes (e.g. "torch.cuda") whose uses this rule wants: the walker resolves
    # each whole dotted reference once and calls visit_watched_name for the matching ones. A
    # rule may set its own in `__init__`, from what the project pass learned.
    watched_names: tuple[str, ...] = ()
    # The kinds of file the rule reads (portcheck.filekinds); text kinds use check_text.
    file_kinds: ClassVar[tuple[str, ...]] = (filekinds.PYTHON,)
    # Tool rules are reported by the engine itself, never by visiting.
    engine_reported: ClassVar[bool] = False
    # CUDA-only code: it fails or does nothing where CUDA is missing. Reached only under a
    # CUDA check (portcheck.flow), it does not run on another target as written, so it is
    # info there; a fix rewrites it together with the check, or neither (portcheck.coherence).
    cuda_only: ClassVar[bool] = False
    VALID: ClassVar[Sequence[Valid]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.reports: list[Report] = []
        self.records: list[Record] = []

    def check_text(self, text: str) -> None:
        """Rules that read non-Python files (see `file_kinds`) look at the whole text here."""

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        """Called for each reference that resolves under one of `watched_names`."""

    def report(
        self,
        node: cst.CSTNode,
        *,
        severity: SeverityMap | None = None,
        hint: str | None = None,
        edit: Edit | None = None,
        **fields: object,
    ) -> None:
        self.ctx.count_report(node)
        self.reports.append(self.report_here(node, severity=severity, hint=hint, edit=edit, **fields))

    def report_here(
        self,
        node: cst.CSTNode,
        *,
        severity: SeverityMap | None = None,
        hint: str | None = None,
        edit: Edit | None = None,
        chain: tuple[cst.CSTNode, ...] | None = None,
        **fields: object,
    ) -> Report:
        """The report `report` would add. A rule that decides only later whether to add it
        passes the `chain` it took from `ctx.chain(node)` while visiting the node."""
        report = self._make_report(node, None, severity, hint, fields, edit)
        return replace(report, chain=self.ctx.chain(node) if chain is None else chain)

    def report_span(
        self, span: Span, *, severity: SeverityMap | None = None, hint: str | None = None, **fields: object
    ) -> None:
        """Report a place in a text file."""
        self.ctx.count_report(span)
        self.reports.append(self._make_report(None, span, severity, hint, fields))

    def _make_report(
        self,
        node: cst.CSTNode | None,
        span: Span | None,
        severity: SeverityMap | None,
        hint: str | None,
        fields: Mapping[str, object],
        edit: Edit | None = None,
    ) -> Report:
        return Report(
            node=node,
            message=self.message.format(**fields),
            hint=self.hint.format(**fields) if hint is None else hint,
            severity=self.severity if severity is None else severity,
            span=span,
            edit=edit,
        )

    def report_at(self, where: cst.CSTNode | Span, *, severity: SeverityMap | None = None, **fields: object) -> None:
        """Report a node of a Python file or a place in a text file (a config setting read by a
        rule that reads both)."""
        if isinstance(where, cst.CSTNode):
            self.report(where, severity=severity, **fields)
        else:
            self.report_span(where, severity=severity, **fields)

    def record(
        self,
        fact: str,
        name: str,
        where: cst.CSTNode | tuple[int, int] | Span,
        /,
        *,
        chain: tuple[cst.CSTNode, ...] | None = None,
        **details: str,
    ) -> None:
        """Note a project fact (a kernel, a CUDA-only op, a call site) at a node, lines or a span.
        A rule that records a node it is no longer visiting passes the node's `chain`."""
        if isinstance(where, tuple) and len(where) == 4:
            where = (where[0], where[2])
        if isinstance(where, tuple):
            self.records.append(Record(fact, name, None, where, tuple(sorted(details.items()))))
            return
        chain = self.ctx.chain(where) if chain is None else chain
        self.records.append(Record(fact, name, where, (0, 0), tuple(sorted(details.items())), chain))

    @classmethod
    def project_triggers(cls, project: Project) -> tuple[bytes, ...]:
        """Rules that need what other files tell (see portcheck.project) run again, in a second
        pass over the files containing these words, with `ctx.project.complete`. Empty: no second
        pass for this rule."""
        return ()

    @classmethod
    def in_second_pass(cls, project: Project, path: str, module: str) -> bool:
        """Whether the second pass runs this rule over the file at `path` (module `module`); a
        rule whose project facts point at certain files narrows it to them."""
        return bool(cls.project_triggers(project))

    @classmethod
    def in_first_pass(cls) -> bool:
        """Visiting rules run in the first pass, except those that only make sense once the
        project is known (no trigger words of their own, only project triggers)."""
        return not cls.engine_reported and (bool(cls.triggers) or not cls.has_second_pass())

    @classmethod
    def has_second_pass(cls) -> bool:
        return cls.project_triggers.__func__ is not Rule.project_triggers.__func__  # type: ignore[attr-defined]

    @classmethod
    def summary(cls) -> str:
        """The first sentence of the docstring's "What it does" section."""
        return doc_sections(cls).get("What it does", "").split("\n\n")[0].replace("\n", " ").strip()

    @classmethod
    def headline(cls) -> str:
        """The summary's first sentence, without the list of cases after its colon: the rule's
        title in SARIF viewers and in the rules index."""
        return headline(cls.summary())

    @classmethod
    def worst_severity(cls) -> Severity:
        return max(cls.severity.values(), default=OFF)


def headline(text: str) -> str:
    """`text` up to the end of its first sentence or its first `: `, whichever comes first,
    without what it says in brackets; colons, stops and brackets in `code` do not count."""
    kept: list[str] = []
    depth, in_code = 0, False
    for index, char in enumerate(text):
        after = text[index + 1 : index + 2]
        if char == "`":
            in_code = not in_code
        elif not in_code and char in "([{":
            depth += 1
            if depth == 1:
                kept[-1:] = [kept[-1].rstrip()] if kept else []
            continue
        elif not in_code and char in ")]}":
            depth = max(depth - 1, 0)
            continue
        elif not in_code and depth == 0 and char in ".!?:" and after in ("", " "):
            return "".join(kept) + ("." if char == ":" else char)
        if depth == 0:
            kept.append(char)
    return "".join(kept)


def doc_sections(rule: type[Rule]) -> dict[str, str]:
    """The docstring split on its `## Section` headings."""
    sections: dict[str, str] = {}
    current = None
    lines: list[str] = []
    for line in inspect.cleandoc(rule.__doc__ or "").splitlines():
        if line.startswith("## "):
            if current is not None:
                sections[current] = "\n".join(lines).strip()
            current, lines = line[3:].strip(), []
        else:
            lines.append(line)
    if current is not None:
        sections[current] = "\n".join(lines).strip()
    return sections
