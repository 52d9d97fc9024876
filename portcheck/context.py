"""The services the engine gives rules while they look at one file (portcheck.rule.FileContext)."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portcheck import patterns
from portcheck.config import Config
from portcheck.flow import DeviceFlow
from portcheck.project import ModulePath, Project
from portcheck.resolve import Resolver
from portcheck.rule import FindingLimit, Span
from portcheck.targets import Target
from portcheck.walk import Walker


class Context:
    """One file's context: where it is, what is selected, and name resolution for Python."""

    def __init__(
        self,
        path: str,
        kind: str,
        config: Config,
        resolver: Resolver | None,
        project: Project,
        module: ModulePath,
        fix_target: Target,
        source: bytes = b"",
    ) -> None:
        self.path = path
        self.source = source
        self.fix_target = fix_target
        self.kind = kind
        self.module = module
        self.targets = config.targets
        self.torch_version = config.torch_version
        self.project = project
        self.resolver = resolver
        self.walker: Walker | None = None
        self.flow: DeviceFlow | None = None  # Python files: set by the engine before the walk
        self.findings_left = config.max_findings_per_file
        if resolver is not None:  # rules ask this for nearly every node: answer without a wrapper call
            self.qualified_names = resolver.qualified_names  # type: ignore[method-assign]

    def qualified_names(self, node: cst.CSTNode) -> frozenset[str]:
        assert self.resolver is not None, "only Python rules resolve names"
        return self.resolver.qualified_names(node)

    def callee_names(self, func: cst.BaseExpression) -> frozenset[str]:
        """What a called expression refers to through imports; for a name bound once to another
        (`precision_scope = autocast`) or to a choice of callables (`scope = autocast if amp else
        nullcontext`), what it or each choice refers to."""
        names = self.qualified_names(func)
        if names or not isinstance(func, cst.Name):
            return names
        bound = self.assigned_value(func)
        if isinstance(bound, (cst.Name, cst.Attribute)):
            return self.qualified_names(bound)
        if not isinstance(bound, (cst.IfExp, cst.BooleanOperation)):
            return names
        choices = patterns.value_literals(bound, lambda node: isinstance(node, (cst.Name, cst.Attribute)))
        return frozenset(name for choice in choices for name in self.qualified_names(choice))

    def assigned_value(self, node: cst.Name) -> cst.BaseExpression | None:
        assert self.resolver is not None, "only Python rules resolve names"
        return self.resolver.assigned_value(node)

    def assigned_values(self, node: cst.Name) -> list[cst.BaseExpression]:
        assert self.resolver is not None, "only Python rules resolve names"
        return self.resolver.assigned_values(node)

    def parameter_default(self, node: cst.Name) -> cst.BaseExpression | None:
        assert self.resolver is not None, "only Python rules resolve names"
        return self.resolver.parameter_default(node)

    def bindings(self, node: cst.Name) -> int:
        assert self.resolver is not None, "only Python rules resolve names"
        return self.resolver.bindings(node)

    def parameter_annotation(self, node: cst.Name) -> tuple[cst.BaseExpression, list[cst.BaseExpression]] | None:
        assert self.resolver is not None, "only Python rules resolve names"
        return self.resolver.parameter_annotation(node)

    def values_before_updates(self, node: cst.Name) -> list[cst.BaseExpression]:
        assert self.resolver is not None, "only Python rules resolve names"
        return self.resolver.values_before_updates(node)

    def binding(self, module: str, at_module_level: bool = False) -> tuple[str, tuple[str, ...]] | None:
        assert self.resolver is not None, "only Python rules resolve names"
        name = self.resolver.bound_name(module, at_module_level)
        if name is not None:
            return name, ()
        if self.resolver.is_free(module.split(".", 1)[0]):
            return module, (module,)
        return None

    def is_free(self, name: str) -> bool:
        assert self.resolver is not None, "only Python rules resolve names"
        return self.resolver.is_free(name)

    def module_assignments(self) -> list[tuple[str, cst.BaseExpression]]:
        assert self.resolver is not None, "only Python rules resolve names"
        return self.resolver.module_assignments()

    @property
    def parent(self) -> cst.CSTNode | None:
        ancestors = self.walker.ancestors if self.walker else ()
        return ancestors[-1] if ancestors else None

    @property
    def ancestors(self) -> Sequence[cst.CSTNode]:
        return self.walker.ancestors if self.walker else ()

    def chain(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        return self.walker.chain(node) if self.walker else ()

    def count_report(self, where: cst.CSTNode | Span) -> None:
        if self.findings_left == 0:
            raise FindingLimit(where)
        self.findings_left -= 1
