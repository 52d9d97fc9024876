"""The one pass over a module: every enabled rule's `visit_X`/`leave_X` methods, batched.

libcst's own visitors rebuild every node they pass (about 60% of the cost of parsing); this
walker only reads dataclass fields, skipping whitespace and punctuation, which is an order of
magnitude cheaper. It also keeps the resolver's scope stack in step, walking decorators,
defaults and bases before entering the scope they belong outside of, and it keeps the chain of
ancestors so rules can ask for a node's parent.

The walk and the analysis every file shares (flow, resolve, patterns, the shapes helpers) ask a
node's type with `type(node) is cst.X`, not `isinstance`: libcst's classes are ABCs, and an
`isinstance` that answers no goes through ABCMeta's `__instancecheck__`, millions of times a scan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Literal, NamedTuple, Protocol, get_origin

import libcst as cst

from portcheck import resolve

_PUNCTUATION_FIELDS = frozenset(
    {
        "asynchronous", "colon", "comma", "comment", "conversion", "default_indent",
        "default_newline", "dot", "empty_lines", "encoding", "end", "equal", "first_colon",
        "first_line", "footer", "has_trailing_newline", "header", "indent", "last_line",
        "lbrace", "lbracket", "leading_lines", "leading_whitespace", "lines_after_decorators",
        "lpar", "newline", "operator", "posonly_ind", "rbrace", "rbracket", "relative", "rpar",
        "second_colon", "semicolon", "separator", "star", "start", "trailing_comma",
        "trailing_whitespace",
    }
)  # fmt: skip


class Participant(Protocol):
    """What the walker dispatches to: a rule, or the engine's device flow."""

    watched_names: tuple[str, ...]

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None: ...


Visit = Callable[[cst.CSTNode], object]
VisitName = Callable[[cst.CSTNode, str], object]


@cache
def child_fields(node_type: type[cst.CSTNode]) -> tuple[str, ...]:
    """The fields of a node type that may hold nodes of code: not whitespace, punctuation,
    comments or plain values (a name's text)."""
    return tuple(
        f.name
        for f in dataclasses.fields(node_type)
        if f.name not in _PUNCTUATION_FIELDS
        and not f.name.startswith("whitespace")
        and f.type not in (str, bool)
        and get_origin(f.type) is not Literal
    )


class _NodeTypes(dict[type, bool]):
    """Whether a type is a libcst node, asked by type: `isinstance` against a libcst class goes
    through ABCMeta's `__instancecheck__` whenever the answer is no, which made it the largest
    single cost of a walk."""

    def __missing__(self, key: type) -> bool:
        self[key] = answer = issubclass(key, cst.CSTNode)
        return answer


IS_NODE_TYPE = _NodeTypes()


@cache
def _concrete(types: tuple[type[cst.CSTNode], ...]) -> frozenset[type[cst.CSTNode]]:
    """The node classes that are, or derive from, one of `types` (which may be abstract)."""
    return frozenset(t for t in node_types().values() if issubclass(t, types))


def descendants(node: cst.CSTNode, apart: tuple[type[cst.CSTNode], ...] = ()) -> Iterator[cst.CSTNode]:
    """Every node under `node` in source order, not entering nodes of the `apart` types. A
    stack, not nested generators: each of those passes every node up through all the levels
    above it, which costs as much as the walk itself in deep modules. Rules and the flow ask
    for millions of nodes a scan, so the loop keeps its lookups local."""
    excluded = _concrete(apart)
    is_node, fields_of = IS_NODE_TYPE, _REVERSED_FIELDS
    stack = [node]
    pop, push = stack.pop, stack.append
    while stack:
        current = pop()
        if current is not node:
            yield current
        for name in fields_of[type(current)]:  # pushed last first: popped in source order
            value = getattr(current, name)
            kind = type(value)
            if kind is tuple or kind is list:
                for child in reversed(value):
                    kind = type(child)
                    if is_node[kind] and kind not in excluded:
                        push(child)
            elif is_node[kind] and kind not in excluded:
                push(value)


class _ReversedFields(dict[type, tuple[str, ...]]):
    """`child_fields` of a node type, last first, asked by type (a dict lookup, not a call)."""

    def __missing__(self, key: type[cst.CSTNode]) -> tuple[str, ...]:
        self[key] = fields = tuple(reversed(child_fields(key)))
        return fields


_REVERSED_FIELDS = _ReversedFields()


@cache
def node_types() -> dict[str, type[cst.CSTNode]]:
    """The concrete libcst node classes a rule may name in `visit_X`/`leave_X`."""
    return {
        name: value
        for name, value in vars(cst).items()
        if isinstance(value, type) and issubclass(value, cst.CSTNode) and dataclasses.is_dataclass(value)
    }


@cache
def _handlers(rule_type: type) -> tuple[tuple[str, type[cst.CSTNode], str], ...]:
    """("visit" | "leave", node type, method name) for each handler a rule class defines."""
    types = node_types()
    found = []
    for attr in dir(rule_type):
        kind, _, type_name = attr.partition("_")
        if kind in ("visit", "leave") and type_name in types:
            found.append((kind, types[type_name], attr))
    return tuple(found)


def is_reference(node: cst.Name | cst.Attribute, parent: cst.CSTNode | None) -> bool:
    """Whether a name is a whole dotted reference to something, as opposed to part of a longer
    chain (`a.b` in `a.b.c`), an attribute or keyword name, or a name being (re)bound."""
    kind = type(parent)
    if kind is cst.Attribute:
        return False  # either the chain goes on (parent.value) or this is its attribute name
    if type(node) is cst.Attribute:
        return True
    if kind is cst.Arg:
        return parent.keyword is not node
    if kind in _NAMING_PARENTS:
        return parent.name is not node
    if kind in _TARGET_PARENTS:
        return parent.target is not node
    return True


_NAMING_PARENTS = frozenset({cst.Param, cst.FunctionDef, cst.ClassDef, cst.NameItem, cst.AsName})
_TARGET_PARENTS = frozenset({cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor})


class _Plan(NamedTuple):
    """What the walk does at a node of one type."""

    visits: tuple[Visit, ...]
    leaves: tuple[Visit, ...]
    named: bool  # a Name or Attribute, and some rule watches names
    scoped: Callable[[Walker, cst.CSTNode], None] | None
    fields: tuple[str, ...]


class Walker:
    """Walks one module once, dispatching to the handlers of many rules.

    Besides `visit_<Node>`/`leave_<Node>`, a rule may list qualified-name prefixes in
    `watched_names`; the walker resolves each whole dotted reference once and calls the rule's
    `visit_watched_name(node, qualified_name)` for those under a watched prefix.
    """

    def __init__(self, rules: Iterable[Participant], resolver: resolve.Resolver) -> None:
        self.resolver = resolver
        self.ancestors: list[cst.CSTNode] = []
        self.current: cst.CSTNode | None = None  # the node whose handlers are running
        self._visit: dict[type, list[Visit]] = {}
        self._leave: dict[type, list[Visit]] = {}
        self._watchers: dict[str, list[VisitName]] = {}
        self._plans: dict[type, _Plan] = {}
        for rule in rules:
            for kind, node_type, attr in _handlers(type(rule)):
                table = self._visit if kind == "visit" else self._leave
                table.setdefault(node_type, []).append(getattr(rule, attr))
            for prefix in rule.watched_names:
                self._watchers.setdefault(prefix, []).append(rule.visit_watched_name)

    def walk(self, node: cst.CSTNode) -> None:
        node_type = type(node)
        plan = self._plans.get(node_type) or self._plan(node_type)
        if plan.visits:
            self.current = node
            for handler in plan.visits:
                handler(node)
        if plan.named:
            self.current = node
            self._dispatch_name(node)
        self.ancestors.append(node)
        if plan.scoped is not None:
            plan.scoped(self, node)
        else:
            self._walk_fields(node, plan.fields)
        self.ancestors.pop()
        if plan.leaves:
            self.current = node
            for handler in plan.leaves:
                handler(node)

    def _plan(self, node_type: type[cst.CSTNode]) -> _Plan:
        """What the walk does at a node of this type, looked up once per type."""
        plan = self._plans[node_type] = _Plan(
            visits=tuple(self._visit.get(node_type, ())),
            leaves=tuple(self._leave.get(node_type, ())),
            named=bool(self._watchers) and node_type in (cst.Name, cst.Attribute),
            scoped=_SCOPED_WALKS.get(node_type),
            fields=child_fields(node_type),
        )
        return plan

    def chain(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        """The nodes from the module down to `node`, exclusive, for a node a handler reports:
        the walk's ancestors, then the path from the node being visited down to `node`."""
        current = self.current
        if current is None or node is current:
            return tuple(self.ancestors)
        path = _path(current, node)
        return tuple(self.ancestors) if path is None else (*self.ancestors, current, *path)

    def _dispatch_name(self, node: cst.Name | cst.Attribute) -> None:
        if not is_reference(node, self.ancestors[-1] if self.ancestors else None):
            return
        names = self.resolver.qualified_names(node)
        for qualified in sorted(names) if len(names) > 1 else names:  # in one order, whatever the hash seed
            prefix = ""
            for part in qualified.split("."):
                prefix = f"{prefix}.{part}" if prefix else part
                for handler in self._watchers.get(prefix, ()):
                    handler(node, qualified)

    def _walk_fields(self, node: cst.CSTNode, names: Iterable[str]) -> None:
        for name in names:
            value = getattr(node, name)
            kind = type(value)
            if kind is tuple or kind is list:
                for child in value:
                    if IS_NODE_TYPE[type(child)]:
                        self.walk(child)
            elif IS_NODE_TYPE[kind]:
                self.walk(value)

    def _walk_in_scope(self, node: cst.CSTNode, scope: resolve.Scope, names: Iterable[str]) -> None:
        self.resolver.enter(scope)
        try:
            self._walk_fields(node, names)
        finally:
            self.resolver.exit()

    def _function(self, node: cst.FunctionDef) -> None:
        self._walk_fields(node, ("decorators", "name", "type_parameters", "params", "returns"))
        self._walk_in_scope(node, resolve.function_scope(node, self.resolver.scope), ("body",))

    def _lambda(self, node: cst.Lambda) -> None:
        self._walk_fields(node, ("params",))
        self._walk_in_scope(node, resolve.function_scope(node, self.resolver.scope), ("body",))

    def _class(self, node: cst.ClassDef) -> None:
        self._walk_fields(node, ("decorators", "name", "type_parameters", "bases", "keywords"))
        self._walk_in_scope(node, resolve.class_scope(node, self.resolver.scope), ("body",))

    def _comprehension(self, node: cst.BaseComp) -> None:
        scope = resolve.comprehension_scope(node, self.resolver.scope)
        self._walk_in_scope(node, scope, child_fields(type(node)))


def _path(root: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The nodes strictly between `root` and its descendant `target`; None if it is none."""
    for name in child_fields(type(root)):
        value = getattr(root, name)
        for child in value if isinstance(value, (tuple, list)) else (value,):
            if child is target:
                return []
            if IS_NODE_TYPE[type(child)]:
                below = _path(child, target)
                if below is not None:
                    return [child, *below]
    return None


def _no_children(walker: Walker, node: cst.CSTNode) -> None:
    """Import and global statements bind names (the resolver reads them); nothing in them is a
    use, so rules see the statement but not its parts."""


_SCOPED_WALKS: dict[type, Callable[[Walker, cst.CSTNode], None]] = {
    cst.Import: _no_children,
    cst.ImportFrom: _no_children,
    cst.Global: _no_children,
    cst.Nonlocal: _no_children,
    cst.FunctionDef: Walker._function,
    cst.Lambda: Walker._lambda,
    cst.ClassDef: Walker._class,
    cst.ListComp: Walker._comprehension,
    cst.SetComp: Walker._comprehension,
    cst.GeneratorExp: Walker._comprehension,
    cst.DictComp: Walker._comprehension,
}
