"""Rules driven by the CUDA API table: each reports the names cuda_api.toml assigns to its code.

The table holds the facts (what the call does without CUDA, what replaces it, since which
torch, per-target caveats); a rule class only adds its code, name and documentation. A rule
that sets `table_fixes` also attaches the fixes the table allows (portcheck.api_fixes) and may
refine them by overriding `fix`. A name used only as a type annotation is not reported: naming
a CUDA type does not need CUDA.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

import libcst as cst

from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.rewrites import cuda_api
from portcheck.rewrites.edits import Edit
from portcheck.rule import FileContext, Rule, SeverityMap
from portcheck.targets import api


class CudaApiRule(Rule):
    """Base class; subclasses set `code`, `name`, the docstring and examples."""

    message = "`{name}` is CUDA-only: without CUDA it {effect}"
    triggers: ClassVar[tuple[bytes, ...]] = (b"cuda", b"cudnn")
    cuda_only = True
    # Whether uses of the rule's names get the fixes the table allows; rules opt in, together
    # with their `fix_safety`, their docstring's "Fix safety" and `fixed=` examples.
    table_fixes: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        rows = {**api.table(), **api.fallbacks()}
        mine = {name: entry for name, entry in rows.items() if entry.rule == cls.code}
        cls.watched_names = tuple(sorted(mine))
        cls.severity = severities_of(mine.values())

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._reported: set[int] = set()

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        match = api.lookup(qualified_name)
        if match is None or match[1].rule != self.code or id(node) in self._reported:
            return
        if in_annotation(self.ctx.ancestors) or self._has_portable_twin(node, qualified_name):
            return
        name, entry = match
        self._reported.add(id(node))
        exact = name == qualified_name  # not `torch.cuda.synchronize.__name__`
        self.report(
            node,
            edit=self.fix(node, entry) if self.table_fixes and exact else None,
            severity=self.severities(node, entry),
            hint=self.hint_for(node, entry),
            name=name,
            effect=self.effect(node, name, entry),
        )

    def _has_portable_twin(self, node: cst.Name | cst.Attribute, qualified_name: str) -> bool:
        """A name bound to the device-generic API on another path too (`from torch.amp import
        custom_fwd` where torch.amp has it, else `from torch.cuda.amp import custom_fwd`): the
        CUDA one is an old torch's fallback, not what a current one runs."""
        if not qualified_name.startswith("torch.cuda."):
            return False
        twin = "torch." + qualified_name.removeprefix("torch.cuda.")
        return twin in self.ctx.qualified_names(node)

    def severities(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> SeverityMap:
        """How much this use matters per target (the table says; a rule may know better here)."""
        return entry.severities()

    def hint_for(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> str:
        """What to write instead (the table says; a rule may know better here)."""
        return hint(entry, self.ctx.targets, self.ctx.torch_version)

    def effect(self, node: cst.Name | cst.Attribute, name: str, entry: api.ApiEntry) -> str:
        """What the use of `name` does without CUDA: the table says it for the entry's first
        name (an alias is named as itself); a rule may know better here."""
        return entry.off_cuda.replace(entry.name, name)

    def fix(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> Edit | None:
        """The edit for one use of a listed name, or None; rules override this to add what the
        table cannot say."""
        return cuda_api.table_edit(self.ctx, node, entry)


def in_annotation(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Inside a type annotation (`s: torch.cuda.Stream`, `-> torch.cuda.Event`): it only names
    the type. Without `from __future__ import annotations` Python evaluates it, but looking up a
    `torch.cuda` attribute works on every build; only calling or instantiating it needs CUDA."""
    return any(isinstance(ancestor, cst.Annotation) for ancestor in ancestors)


def hint(entry: api.ApiEntry, selected: tuple[str, ...], torch_version: tuple[int, ...] | None) -> str:
    """What to write instead on the selected targets, and the caveats that apply there."""
    relevant = [t for t in selected if entry.severity_on(t) > Severity.OFF] or list(selected)
    by_text: dict[str, list[str]] = {}
    for target in relevant:
        by_text.setdefault(entry.replacement_text(target), []).append(target)
    if len(by_text) == 1:
        parts = [f"instead: {next(iter(by_text))}"]
    else:
        parts = ["instead: " + "; ".join(f"{'/'.join(ts)}: {text}" for text, ts in by_text.items())]
    if entry.since:
        since = ".".join(map(str, entry.since))
        if torch_version is not None and torch_version < entry.since:
            parts.append(f"(needs torch>={since}; the configured torch-version is {'.'.join(map(str, torch_version))})")
        else:
            parts.append(f"(torch>={since})")
    if entry.guard and any(not target_data.get(t).accelerator_api for t in relevant):
        parts.append("- it raises without an accelerator: guard it with `if torch.accelerator.is_available():`")
    notes = [entry.note] if entry.note else []
    notes += [
        f"{t}: {entry.per_target[t].note}" for t in relevant if t in entry.per_target and entry.per_target[t].note
    ]
    if notes:
        parts.append("- " + "; ".join(notes))
    return " ".join(parts)


def severities_of(entries: Iterable[api.ApiEntry]) -> SeverityMap:
    """The worst severity per target over some entries."""
    entries = list(entries)
    return {
        target: max((entry.severity_on(target) for entry in entries), default=Severity.OFF)
        for target in target_data.TARGET_ORDER
    }
