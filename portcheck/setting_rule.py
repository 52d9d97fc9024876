"""A base for rules about one string setting (a CUDA device, the NCCL backend).

Such a string is reported where it is given to something named for the setting (a keyword
argument, a parameter default, an assignment to a name, attribute or subscript `kwargs["x"]`, a
dataclass field's default, a dict entry, an argparse option default) or passed where a known
call expects it, directly or through a name bound once or a parameter's default (also as a
branch of `a if c else b`). Real code spells these settings in all of those places; log
messages and unrelated dict keys are never named for them, so they stay quiet.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from portcheck import patterns
from portcheck.rule import FileContext, Rule

_FIELDS = frozenset({"dataclasses.field", "pydantic.Field", "attr.ib", "attrs.field"})
# click's command-line options: `@click.option("--device", default="cuda")` gives the command `device`
_CLICK_OPTIONS = frozenset({"click.option", "click.decorators.option"})


class SettingValueRule(Rule):
    """Subclasses say which names hold the setting, which literals are wrong, and where
    known calls take it by position; they report each literal once."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._reported: set[int] = set()
        self._setting_names: dict[str, bool] = {}  # names_setting's answers: every call's keywords ask it

    def _is_setting(self, name: str) -> bool:
        known = self._setting_names.get(name)
        if known is None:
            known = self._setting_names[name] = self.names_setting(name)
        return known

    def names_setting(self, name: str) -> bool:
        raise NotImplementedError

    def literals(self, expression: cst.CSTNode) -> Iterable[cst.CSTNode]:
        raise NotImplementedError

    def report_literal(self, literal: cst.CSTNode) -> None:
        raise NotImplementedError

    def positional_setting(self, call: cst.Call, names: frozenset[str]) -> cst.Arg | None:
        """The argument that holds the setting in a known call, if any."""
        return None

    def skips_call(self, names: frozenset[str]) -> bool:
        """Calls whose setting another rule owns."""
        return False

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        if self.skips_call(names):
            return
        positional = self.positional_setting(node, names)
        if positional is not None:
            self.check(positional.value)
        for arg in node.args:
            if arg.keyword is not None and self._is_setting(arg.keyword.value):
                self.check(arg.value)
        if (type(node.func) is cst.Attribute and node.func.attr.value == "add_argument") or names & _CLICK_OPTIONS:
            default = patterns.keyword(node, "default")
            destination = option_destination(node)
            if default is not None and destination and self.names_setting(destination):
                self.check(default.value)

    def visit_Param(self, node: cst.Param) -> None:
        if node.default is not None and self._is_setting(node.name.value):
            self.check(node.default)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if self._named(target.target):
                self.check(self._field_default(node.value))
                return

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and self._named(node.target):
            self.check(self._field_default(node.value))

    def _field_default(self, value: cst.BaseExpression) -> cst.BaseExpression:
        """The default of a dataclass field (`backend: str = field(default="nccl")`), else the value."""
        if type(value) is cst.Call and self.ctx.qualified_names(value.func) & _FIELDS:
            default = patterns.keyword(value, "default")
            if default is not None:
                return default.value
        return value

    def visit_DictElement(self, node: cst.DictElement) -> None:
        key = patterns.string_value(node.key)
        if key is not None and self._is_setting(key):
            self.check(node.value)

    def _named(self, target: cst.BaseExpression) -> bool:
        name = patterns.setting_key(target)
        return name is not None and self._is_setting(name)

    def check(self, expression: cst.BaseExpression) -> None:
        found = list(self.literals(expression))
        for name in patterns.value_literals(expression, lambda node: type(node) is cst.Name):
            assert type(name) is cst.Name
            bound = self.ctx.assigned_value(name) or self.ctx.parameter_default(name)
            if bound is not None:
                found.extend(self.literals(bound))
        for lookup in patterns.value_literals(expression, lambda node: type(node) is cst.Subscript):
            found.extend(self._table_values(lookup))
        for literal in found:
            self.report_once(literal)

    def _table_values(self, lookup: cst.CSTNode) -> Iterable[cst.CSTNode]:
        """The literals among the values of a table the setting is looked up in, a dict bound
        once (PixArt's `t5_device = {512: "cuda", 1024: "cuda"}`, then `t5_device[size]`)."""
        assert type(lookup) is cst.Subscript
        table = self.ctx.assigned_value(lookup.value) if type(lookup.value) is cst.Name else None
        if type(table) is not cst.Dict:
            return []
        return [
            literal
            for element in table.elements
            if type(element) is cst.DictElement
            for literal in self.literals(element.value)
        ]

    def report_once(self, literal: cst.CSTNode) -> None:
        if id(literal) not in self._reported:
            self._reported.add(id(literal))
            self.report_literal(literal)


def option_destination(add_argument: cst.Call) -> str | None:
    """The attribute an argparse option is stored in, or the parameter a click option is given
    as: `dest=`, else a name without dashes, else its first long flag, else its first flag
    (`"-d", "--device"` is `args.device`)."""
    dest = patterns.keyword(add_argument, "dest")
    if dest is not None:
        return patterns.string_value(dest.value)
    flags = [patterns.string_value(arg.value) for arg in add_argument.args if arg.keyword is None]
    named = [flag for flag in flags if flag]
    bare = next((flag for flag in named if not flag.startswith("-")), None)
    chosen = bare or next((flag for flag in named if flag.startswith("--")), named[0] if named else None)
    return chosen.lstrip("-").replace("-", "_") if chosen else None
