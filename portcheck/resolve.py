"""Qualified-name resolution that costs a statement walk, not a full scope analysis.

libcst's QualifiedNameProvider analyses every scope and access of a file (about seven times the
cost of parsing it). portcheck only needs to know what an expression like `T.cuda.sync` refers
to when `T` came from an import, so each scope records just its import bindings and which other
names it binds locally. Names are then resolved on demand, at candidate nodes only.

Python's rules are kept where they decide the answer: a name bound anywhere in a function is
local to all of it, class bodies are not visible from nested functions, `global`/`nonlocal`
redirect, decorators and default values are evaluated outside the function. A name bound both
by an import and by an assignment (`try: import torch` / `except: torch = None`) resolves to
the import, as libcst's provider does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import libcst as cst

from portcheck.patterns import dotted

EMPTY: frozenset[str] = frozenset()
_TORCH: frozenset[str] = frozenset({"torch"})


@dataclass(slots=True)
class Scope:
    """The names one scope binds: imports by target, everything else by name only."""

    kind: str  # module | function | class | comprehension
    parent: Scope | None
    imports: dict[str, set[str]] = field(default_factory=dict)
    bound: set[str] = field(default_factory=set)
    values: dict[str, list[cst.BaseExpression | None]] = field(default_factory=dict)
    declared_global: set[str] = field(default_factory=set)
    declared_nonlocal: set[str] = field(default_factory=set)
    # what each name is updated with in place (`loss += l`: `l`), once per `+=`-style statement
    updated: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    owner: cst.CSTNode | None = None  # the function, lambda or class whose body this is
    # names unpacked from what a call returns, from an item (`row, col = idxs[i]`) or from a
    # name (`texts, lengths = batch`), each with what it is unpacked from and its position there
    unpacked: dict[str, list[tuple[cst.Call | cst.Subscript | cst.Name, int]]] = field(default_factory=dict)
    # `from utils import *`: the modules (as written) whose names come unseen, other than torch's
    star_modules: list[str] = field(default_factory=list)

    @property
    def star_imported(self) -> bool:
        """Whether a module other than torch's brings names unseen here."""
        return bool(self.star_modules)

    def bind(self, name: str, value: cst.BaseExpression | None = None) -> None:
        self.bound.add(name)
        self.values.setdefault(name, []).append(value)

    def bind_import(self, name: str, target: str) -> None:
        self.bind(name)
        self.imports.setdefault(name, set()).add(target)

    def bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None = None) -> None:
        if type(target) is cst.Name:
            self.bind(target.value, value)
        elif type(target) in (cst.Tuple, cst.List):
            values = _paired_values(target, value)
            for element, each in zip(target.elements, values):
                self.bind_target(element.value, each)
            if type(value) in (cst.Call, cst.Subscript, cst.Name) and not any(
                type(e) is cst.StarredElement for e in target.elements
            ):
                for index, element in enumerate(target.elements):
                    if type(element.value) is cst.Name:
                        self.unpacked.setdefault(element.value.value, []).append((value, index))
        elif type(target) is cst.StarredElement:
            self.bind_target(target.value)


def _paired_values(target: cst.Tuple | cst.List, value: cst.BaseExpression | None) -> list[cst.BaseExpression | None]:
    """What each element of `a, b = x, y` is bound to: `x` and `y`; nothing known for one
    value unpacked (`a, b = pair`) or where a starred element makes the counts differ."""
    elements = target.elements
    if (
        type(value) in (cst.Tuple, cst.List)
        and len(value.elements) == len(elements)
        and not any(type(e) is cst.StarredElement for e in (*elements, *value.elements))
    ):
        return [element.value for element in value.elements]
    return [None] * len(elements)


def module_scope(module: cst.Module) -> Scope:
    scope = Scope("module", None)
    _collect(module.body, scope)
    return scope


def function_scope(node: cst.FunctionDef | cst.Lambda, parent: Scope) -> Scope:
    scope = Scope("function", parent, owner=node)
    params = node.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        scope.bind(param.name.value)
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param:
            scope.bind(star.name.value)
    if type(node) is cst.FunctionDef:
        _collect(_statements(node.body), scope)
    return scope


def class_scope(node: cst.ClassDef, parent: Scope) -> Scope:
    scope = Scope("class", parent, owner=node)
    _collect(_statements(node.body), scope)
    return scope


def comprehension_scope(node: cst.BaseComp, parent: Scope) -> Scope:
    scope = Scope("comprehension", parent)
    for_in: cst.CompFor | None = node.for_in
    while for_in is not None:
        scope.bind_target(for_in.target)
        for_in = for_in.inner_for_in
    return scope


def _statements(body: cst.BaseSuite) -> Sequence[cst.BaseStatement | cst.BaseSmallStatement]:
    return body.body


def _collect(statements: Iterable[cst.CSTNode], scope: Scope, imported_here: set[str] | None = None) -> None:
    """Record the bindings of a block without entering nested functions or classes. A function
    or class the block defines after importing its name replaces the import (x-transformers'
    `from math import log`, then its own `def log(t)` for tensors). `imported_here`: the names
    the block's imports bound so far (a statement line's are its block's)."""
    imported_here = set() if imported_here is None else imported_here
    for stmt in statements:
        if type(stmt) is cst.SimpleStatementLine:
            _collect(stmt.body, scope, imported_here)
        elif type(stmt) is cst.Import:
            for alias in stmt.names:
                path = dotted(alias.name)
                if alias.asname is not None and type(alias.asname.name) is cst.Name:
                    scope.bind_import(alias.asname.name.value, path)
                    imported_here.add(alias.asname.name.value)
                else:
                    top = path.split(".", 1)[0]
                    scope.bind_import(top, top)
                    imported_here.add(top)
        elif type(stmt) is cst.ImportFrom:
            if type(stmt.names) is cst.ImportStar:
                module = "." * len(stmt.relative) + (dotted(stmt.module) if stmt.module else "")
                if module.split(".")[0] != "torch":
                    scope.star_modules.append(module)
                continue
            module = "." * len(stmt.relative) + (dotted(stmt.module) if stmt.module else "")
            for alias in stmt.names:
                imported = dotted(alias.name)
                local = alias.asname.name if alias.asname is not None else alias.name
                if type(local) is cst.Name:
                    prefix = module if module.endswith(".") else module + "."
                    scope.bind_import(local.value, prefix + imported)
                    imported_here.add(local.value)
        elif type(stmt) is cst.Assign:
            single = len(stmt.targets) == 1
            for target in stmt.targets:
                scope.bind_target(target.target, stmt.value if single else None)
        elif type(stmt) is cst.AnnAssign:
            scope.bind_target(stmt.target, stmt.value)
        elif type(stmt) is cst.AugAssign:
            scope.bind_target(stmt.target)
            if type(stmt.target) is cst.Name:
                scope.updated.setdefault(stmt.target.value, []).append(stmt.value)
        elif type(stmt) is cst.Global:
            scope.declared_global.update(item.name.value for item in stmt.names)
        elif type(stmt) is cst.Nonlocal:
            scope.declared_nonlocal.update(item.name.value for item in stmt.names)
        elif type(stmt) in (cst.FunctionDef, cst.ClassDef):
            scope.bind(stmt.name.value)
            if stmt.name.value in imported_here:
                del scope.imports[stmt.name.value]
                imported_here.discard(stmt.name.value)
        elif type(stmt) is cst.If:
            _collect(_statements(stmt.body), scope)
            if stmt.orelse is not None:
                _collect([stmt.orelse], scope)
        elif type(stmt) is cst.Else:
            _collect(_statements(stmt.body), scope)
        elif type(stmt) in (cst.For, cst.While):
            if type(stmt) is cst.For:
                scope.bind_target(stmt.target)
            _collect(_statements(stmt.body), scope)
            if stmt.orelse is not None:
                _collect([stmt.orelse], scope)
        elif type(stmt) is cst.With:
            for item in stmt.items:
                if item.asname is not None:
                    scope.bind_target(item.asname.name)
            _collect(_statements(stmt.body), scope)
        elif type(stmt) in (cst.Try, cst.TryStar):
            _collect(_statements(stmt.body), scope)
            for handler in stmt.handlers:
                if handler.name is not None:
                    scope.bind_target(handler.name.name)
                _collect(_statements(handler.body), scope)
            for tail in (stmt.orelse, stmt.finalbody):
                if tail is not None:
                    _collect(_statements(tail.body), scope)
        elif type(stmt) is cst.Match:
            for case in stmt.cases:
                _collect(_statements(case.body), scope)


class Resolver:
    """Resolves names against the scope stack the walker maintains."""

    def __init__(self, module: cst.Module) -> None:
        self.module_node = module
        self.module = module_scope(module)
        self.scope = self.module
        self._cache: dict[int, frozenset[str]] = {}

    def enter(self, scope: Scope) -> None:
        self.scope = scope

    def exit(self) -> None:
        assert self.scope.parent is not None
        self.scope = self.scope.parent

    def scope_of(self, name: str) -> Scope | None:
        """The scope whose binding of `name` is visible here, or None if it is unbound."""
        scope: Scope | None = self.scope
        innermost = True
        while scope is not None:
            if scope.kind == "class" and not innermost:
                scope = scope.parent
                continue
            innermost = False
            if name in scope.declared_global:
                return self.module if name in self.module.bound else None
            if name in scope.declared_nonlocal:
                scope = scope.parent
                continue
            if name in scope.bound:
                return scope
            scope = scope.parent
        return None

    def qualified_names(self, node: cst.CSTNode) -> frozenset[str]:
        """What a `Name` or dotted `Attribute` chain refers to through imports.

        Empty when any link is not a plain name (a call, a subscript) or when the base name is
        not bound by an import: `torch.randn(3).cuda` and a parameter called `torch` resolve
        to nothing.
        """
        key = id(node)
        cached = self._cache.get(key)
        if cached is None:
            if type(node) is cst.Name:
                owner = self.scope_of(node.value)
                cached = frozenset(owner.imports.get(node.value, ())) if owner else self._star_torch(node.value)
            elif type(node) is cst.Attribute:
                attr = node.attr.value
                cached = frozenset(f"{base}.{attr}" for base in self.qualified_names(node.value))
            else:
                cached = EMPTY
            self._cache[key] = cached
        return cached

    def _star_torch(self, name: str) -> frozenset[str]:
        """`torch` bound nowhere in a module that star-imports one of its own (`from utils
        import *`, where utils imports torch: the SSD tutorial's detect.py): it can only come
        from there, if the code runs. Resolving only: fixes still import what they write."""
        return _TORCH if name == "torch" and self.module.star_imported else EMPTY

    def module_level_names(self, node: cst.CSTNode) -> frozenset[str]:
        """`qualified_names` through the module's own imports, wherever the walk is: for what
        reads the whole module at once (the walk's scope is not the node's), so not cached."""
        base, _, rest = dotted(node).partition(".")
        targets = self.module.imports.get(base, ()) if base else ()
        return frozenset(f"{target}.{rest}" if rest else target for target in targets)

    def bound_name(self, module: str, at_module_level: bool = False) -> str | None:
        """A name visible here (or at module level) that an import binds to `module` (`T` after
        `import torch as T`), preferring the module scope's; None when there is none."""
        scope: Scope | None = self.module if at_module_level else self.scope
        chain = []
        while scope is not None:
            chain.append(scope)
            scope = scope.parent
        for candidate_scope in reversed(chain):
            for name, targets in sorted(candidate_scope.imports.items()):
                if module in targets and self.scope_of(name) is candidate_scope:
                    return name
        return None

    def holds_value(self, name: str) -> bool:
        """Whether `name` is bound here by something other than an import (`decoder = ...`)."""
        owner = self.scope_of(name)
        return owner is not None and name not in owner.imports

    def is_free(self, name: str) -> bool:
        """Whether `name` is bound nowhere visible from here (so an import may bind it)."""
        return self.scope_of(name) is None and name not in self.module.bound

    def star_sources(self, name: str) -> list[str]:
        """`utils.maximum_path` for `maximum_path`, bound nowhere in a module that does `from
        utils import *` (StyleTTS2's training scripts): where it may come from, as written."""
        if not self.is_free(name):
            return []
        return [f"{module}{'' if module.endswith('.') else '.'}{name}" for module in self.module.star_modules]

    def module_assignments(self) -> list[tuple[str, cst.BaseExpression]]:
        """The module's names bound exactly once, by `=`, with their values."""
        scope = self.module
        return [
            (name, values[0])
            for name, values in sorted(scope.values.items())
            if len(values) == 1 and values[0] is not None and name not in scope.imports
        ]

    def assigned_value(self, node: cst.Name) -> cst.BaseExpression | None:
        """The expression a name is bound to, when its scope binds it exactly once by `=`."""
        values = self.assigned_values(node)
        return values[0] if len(values) == 1 else None

    def assigned_values(self, node: cst.Name) -> list[cst.BaseExpression]:
        """Every expression a name is bound to by `=` in its scope, when that is how it is bound
        each time (no import, loop target, parameter or `+=`); else none."""
        owner = self.scope_of(node.value)
        if owner is None or node.value in owner.imports:
            return []
        values = owner.values.get(node.value, [])
        return [] if any(value is None for value in values) else list(values)  # type: ignore[arg-type]

    def explicit_values(self, node: cst.Name) -> list[cst.BaseExpression]:
        """Every expression `=` binds the name to in its scope, whatever else binds it too (`model,
        opt = amp.initialize(model, opt)`), but an import: what it may hold, not all it may hold."""
        owner = self.scope_of(node.value)
        return [] if owner is None or node.value in owner.imports else self.bound_values(node)

    def bound_values(self, node: cst.Name) -> list[cst.BaseExpression]:
        """Every expression `=` binds the name to in its scope, also where an import binds it too
        (BasicSR's extension, built in one branch and imported prebuilt in the other)."""
        owner = self.scope_of(node.value)
        return [value for value in owner.values.get(node.value, []) if value is not None] if owner else []

    def rebound_values(self, node: cst.Name) -> list[cst.BaseExpression]:
        """`assigned_values`, and for a parameter its function rebinds only by `=` (`betas =
        np.array(betas, dtype=np.float64)`, which normalises what callers give) those values."""
        owner = self.scope_of(node.value)
        if owner is None or node.value in owner.imports or owner.updated.get(node.value):
            return []
        values = owner.values.get(node.value, [])
        function = owner.owner
        named = _parameter_names(function) if type(function) is cst.FunctionDef else set()
        if sum(value is None for value in values) > (node.value in named):
            return []
        return [value for value in values if value is not None]

    def values_and_unpacking(
        self, node: cst.Name
    ) -> tuple[list[cst.BaseExpression], list[tuple[cst.Call | cst.Subscript | cst.Name, int]]] | None:
        """For a name bound both by assignments and by unpacking calls' results (`logits,
        past = model(x)`, then `logits = logits[:, -1]`): the values `=` gives it (as
        `values_before_updates`) and the calls, each with its position, it is unpacked from;
        None where something else binds it too (a parameter, a loop target...)."""
        owner = self.scope_of(node.value)
        if owner is None or node.value in owner.imports:
            return None
        values = owner.values.get(node.value, [])
        sources = owner.unpacked.get(node.value, [])
        unknown = sum(value is None for value in values)
        if not sources or unknown != len(owner.updated.get(node.value, ())) + len(sources):
            return None
        return [value for value in values if value is not None], list(sources)

    def unpacking_sources(self, node: cst.Name) -> list[tuple[cst.Call | cst.Subscript | cst.Name, int]]:
        """What the name is unpacked from anywhere in its scope, each with its position there."""
        owner = self.scope_of(node.value)
        return [] if owner is None else owner.unpacked.get(node.value, [])

    def rebound_parameter(self, node: cst.Name) -> cst.BaseExpression | None:
        """The value a function binds its parameter to in a statement of its own body (not in
        a branch), where nothing else rebinds it (`log_timings = log_timings and
        torch.cuda.is_available()`): what the function's code after it reads."""
        owner = self.scope_of(node.value)
        function = owner.owner if owner is not None else None
        values = self.rebound_values(node)
        if type(function) is not cst.FunctionDef or node.value not in _parameter_names(function) or len(values) != 1:
            return None
        value = values[0]
        statements = function.body.body if type(function.body) is cst.IndentedBlock else ()
        for statement in statements:
            if type(statement) is cst.SimpleStatementLine:
                if any(type(small) is cst.Assign and small.value is value for small in statement.body):
                    return value
        return None

    def filled_parameter(self, node: cst.Name) -> tuple[cst.FunctionDef, cst.BaseExpression] | None:
        """The function and the value it fills its parameter with where the caller gives none,
        in a statement of its own body (see `filled_when_left_out`), where nothing else
        rebinds it (`if max_length is None: max_length = length.max()`)."""
        owner = self.scope_of(node.value)
        function = owner.owner if owner is not None else None
        values = self.rebound_values(node)
        if type(function) is not cst.FunctionDef or node.value not in _parameter_names(function) or len(values) != 1:
            return None
        statements = function.body.body if type(function.body) is cst.IndentedBlock else ()
        for statement in statements:
            filled = filled_when_left_out(statement, node.value)
            if filled is not None and filled[0].value is values[0]:
                return function, filled[1]
        return None

    def parameter_annotation(self, node: cst.Name) -> tuple[cst.BaseExpression, list[cst.BaseExpression]] | None:
        """The annotation of the parameter a name is (`def forward(self, pos: torch.Tensor)`),
        with the values `=` binds it to besides (`pos = torch.tensor(n - 1)`); None where it
        is no annotated parameter, or is bound otherwise too (a loop, `+=`)."""
        owner = self.scope_of(node.value)
        function = owner.owner if owner is not None else None
        if owner is None or type(function) is not cst.FunctionDef or owner.updated.get(node.value):
            return None
        values = owner.values.get(node.value, [])
        if sum(value is None for value in values) != 1:
            return None
        params = function.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == node.value and param.annotation is not None:
                return param.annotation.annotation, [value for value in values if value is not None]
        return None

    def parameter_of(self, node: cst.Name) -> cst.FunctionDef | None:
        """The function whose parameter the name is, where nothing else in it binds the name."""
        owner = self.scope_of(node.value)
        function = owner.owner if owner is not None else None
        if owner is None or type(function) is not cst.FunctionDef or owner.values.get(node.value) != [None]:
            return None
        return function if node.value in _parameter_names(function) else None

    def parameter_default(self, node: cst.Name) -> cst.BaseExpression | None:
        """The default of the parameter a name is (`def __init__(self, mixed_precision_type="fp16")`),
        where nothing else in the function binds the name."""
        function = self.parameter_of(node)
        if function is None:
            return None
        params = function.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == node.value:
                return param.default
        return None

    def bindings(self, node: cst.Name) -> int:
        """How many times the scope that owns the name binds it (a parameter is once)."""
        owner = self.scope_of(node.value)
        return 0 if owner is None else len(owner.values.get(node.value, ()))

    def updates(self, node: cst.Name) -> list[cst.BaseExpression]:
        """What the name is updated with in place in its scope (`loss += l`: `l`)."""
        owner = self.scope_of(node.value)
        return [] if owner is None else owner.updated.get(node.value, [])

    def values_before_updates(self, node: cst.Name) -> list[cst.BaseExpression]:
        """Like assigned_values, but a name also updated in place (`done |= x`, `n += 1`) keeps
        the values `=` gave it: an update keeps a tensor a tensor."""
        owner = self.scope_of(node.value)
        if owner is None or node.value in owner.imports:
            return []
        values = owner.values.get(node.value, [])
        if sum(value is None for value in values) != len(owner.updated.get(node.value, ())):
            return []  # also bound as a parameter, a loop target, by `with ... as`...
        return [value for value in values if value is not None]


def filled_when_left_out(statement: cst.CSTNode, name: str) -> tuple[cst.Assign, cst.BaseExpression] | None:
    """The assignment and the value by which a statement fills the parameter `name` where the
    caller leaves it out: `if name is None: name = X` (also `if not name:`), `name = name if
    name > 0 else X` (CosyVoice's `make_pad_mask`), `name = X if name is None else name`,
    `name = name or X`."""
    if type(statement) is cst.If and statement.orelse is None and _tests_not_given(statement.test, name):
        for line in statement.body.body:
            for small in line.body if type(line) is cst.SimpleStatementLine else ():
                if type(small) is cst.Assign and _assigns_only(small, name):
                    return small, small.value
        return None
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if type(small) is not cst.Assign or not _assigns_only(small, name):
        return None
    value = small.value
    if type(value) is cst.IfExp:
        if _is_name(value.body, name) and _tests_given(value.test, name):
            return small, value.orelse
        if _is_name(value.orelse, name) and _tests_not_given(value.test, name):
            return small, value.body
    if type(value) is cst.BooleanOperation and type(value.operator) is cst.Or and _is_name(value.left, name):
        return small, value.right
    return None


def _assigns_only(assign: cst.Assign, name: str) -> bool:
    return len(assign.targets) == 1 and _is_name(assign.targets[0].target, name)


def _is_name(node: cst.CSTNode, name: str) -> bool:
    return type(node) is cst.Name and node.value == name


def _tests_given(test: cst.BaseExpression, name: str) -> bool:
    """`name`, `name is not None`, `name > 0`, `exists(name)`: a test that the caller gave it."""
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        link, right = test.comparisons[0], test.comparisons[0].comparator
        if not _is_name(test.left, name):
            return False
        if type(link.operator) is cst.IsNot:
            return _is_name(right, "None")
        return type(link.operator) is cst.GreaterThan and type(right) is cst.Integer and right.value == "0"
    if type(test) is cst.Call and len(test.args) == 1 and not test.args[0].star:
        test = test.args[0].value
    return _is_name(test, name)


def _tests_not_given(test: cst.BaseExpression, name: str) -> bool:
    """`name is None`, `not name`, `not exists(name)`: a test that the caller left it out."""
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        link = test.comparisons[0]
        return (
            type(link.operator) is cst.Is
            and type(test.left) is cst.Name
            and test.left.value == name
            and type(link.comparator) is cst.Name
            and link.comparator.value == "None"
        )
    if type(test) is not cst.UnaryOperation or type(test.operator) is not cst.Not:
        return False
    tested = test.expression
    if type(tested) is cst.Call and len(tested.args) == 1 and not tested.args[0].star:
        tested = tested.args[0].value
    return type(tested) is cst.Name and tested.value == name


def _parameter_names(function: cst.FunctionDef) -> set[str]:
    """The names of a function's parameters that callers can pass (not `*args`, `**kwargs`)."""
    params = function.params
    return {param.name.value for param in (*params.posonly_params, *params.params, *params.kwonly_params)}
