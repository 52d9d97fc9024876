"""Rule documentation for people: `portcheck rules` and `portcheck explain CODE`."""

from __future__ import annotations

import inspect
import io
import json

from rich.console import Console
from rich.table import Table

from portcheck import registry
from portcheck import targets as target_data
from portcheck.api_rule import CudaApiRule
from portcheck.findings import Severity
from portcheck.rule import Rule
from portcheck.targets import api

_LETTER = {Severity.ERROR: "E", Severity.WARNING: "W", Severity.INFO: "I", Severity.OFF: "-"}


def family(rule: type[Rule]) -> str:
    return rule.__module__.split(".")[-2]


def rules_listing(output_format: str, color: bool = False) -> str:
    rules = registry.all_rules()
    if output_format == "json":
        return json.dumps([_rule_dict(rule) for rule in rules.values()], indent=2) + "\n"
    if output_format == "markdown":
        return _markdown(rules)
    if output_format != "table":
        raise ValueError(f"unknown format {output_format!r}; choose table, json or markdown")
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("code")
    table.add_column("name")
    for target in target_data.TARGET_ORDER:
        table.add_column(target, justify="center")
    table.add_column("fix")
    for rule in rules.values():
        letters = [_LETTER[rule.severity.get(t, Severity.OFF)] for t in target_data.TARGET_ORDER]
        table.add_row(rule.code, rule.name, *letters, rule.fix_safety.value)
    buffer = io.StringIO()
    Console(file=buffer, force_terminal=color, no_color=not color, width=160).print(table)
    return buffer.getvalue() + "E error, W warning, I info, - off. `portcheck explain CODE` for details.\n"


def _rule_dict(rule: type[Rule]) -> dict[str, object]:
    return {
        "code": rule.code,
        "name": rule.name,
        "family": family(rule),
        "summary": rule.summary(),
        "severity": {t: rule.severity.get(t, Severity.OFF).label for t in target_data.TARGET_ORDER},
        "fix_safety": rule.fix_safety.value,
        "triggers": [t.decode() for t in rule.triggers],
    }


def _markdown(rules: dict[str, type[Rule]]) -> str:
    lines = ["# portcheck rules", "", "Severity per target: E error, W warning, I info, - off.", ""]
    header = "| code | name | summary | " + " | ".join(target_data.TARGET_ORDER) + " |"
    lines += [header, "|" + " --- |" * (3 + len(target_data.TARGET_ORDER))]
    for rule in rules.values():
        letters = " | ".join(_LETTER[rule.severity.get(t, Severity.OFF)] for t in target_data.TARGET_ORDER)
        lines.append(f"| {rule.code} | {rule.name} | {rule.summary().replace('|', '/')} | {letters} |")
    return "\n".join(lines) + "\n"


def explain(code: str, target: str | None = None) -> str:
    rule = registry.get(code)
    selected = [target_data.get(target).name] if target else list(target_data.TARGET_ORDER)
    out = [f"# {rule.code} {rule.name}", "", inspect.cleandoc(rule.__doc__ or ""), "", "## Severity per target", ""]
    out += [f"- {t}: {rule.severity.get(t, Severity.OFF).label}" for t in selected]
    if issubclass(rule, CudaApiRule):
        out += ["", "## Names and replacements", ""]
        seen = set()
        for name, entry in sorted({**api.table(), **api.fallbacks()}.items()):
            if entry.rule != rule.code or id(entry) in seen:
                continue
            seen.add(id(entry))
            since = f" (torch>={'.'.join(map(str, entry.since))})" if entry.since else ""
            label = f"`{name}.*`" if name in api.fallbacks() else f"`{name}`"
            out.append(f"- {label}: without CUDA it {entry.off_cuda}.")
            for t in selected:
                level = entry.severity_on(t)
                if level > Severity.OFF and (target or t == selected[0]):
                    out.append(f"  - {'on ' + t if target else 'instead'}: {entry.replacement_text(t)}{since}")
            for t, facts in entry.per_target.items():
                if t in selected and facts.note:
                    out.append(f"  - {t}: {facts.note}")
            if entry.note:
                out.append(f"  - note: {entry.note}")
    if target:
        facts = target_data.get(target)
        out += ["", f"## About {facts.name}: {facts.title}", ""] + [f"- {note}" for note in facts.notes]
    return "\n".join(out) + "\n"
