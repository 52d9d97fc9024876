"""The settings of YAML configuration files (training recipes, launcher and model configs), with
their places.

A recipe that TRL or the Trainer reads (`attn_implementation: flash_attention_2`), an
accelerate config (`mixed_precision: fp16`) or a runner config (`device: cuda`) ports like the
keyword arguments it becomes, so the rules that know those arguments read these too. Read as
data with PyYAML's safe composer; nothing is executed. A file that is not YAML (a template, a
Helm chart) has no settings: configs are not manifests, and a broken one is not a finding.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import yaml

from portcheck.rule import Span

_TRUE = frozenset({"true", "yes", "on"})  # YAML 1.1 booleans, as PyYAML reads them
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Setting:
    """A `key: value` pair whose value is a scalar."""

    key: str
    value: str  # as written, without quotes
    quoted: bool
    span: Span  # from the key to the end of the value
    within: tuple[str, ...] = ()  # the keys of the mappings it is in, outermost first (`lightning`, `trainer`)

    @property
    def is_true(self) -> bool:
        """`true`, `True`, `yes`, `on`, unquoted: a YAML boolean that holds."""
        return not self.quoted and self.value.lower() in _TRUE


@functools.lru_cache(maxsize=8)
def settings(text: str) -> tuple[Setting, ...]:
    """Every scalar setting of every document in the text, at any depth, in file order."""
    try:
        documents = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.YAMLError:
        return ()
    return tuple(setting for document in documents for setting in _settings(document, ()))


def _settings(node: yaml.Node | None, within: tuple[str, ...]) -> Iterator[Setting]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and isinstance(value, yaml.ScalarNode):
                start, end = key.start_mark, value.end_mark
                span = (start.line + 1, start.column + 1, end.line + 1, end.column + 1)
                yield Setting(str(key.value), str(value.value), value.style in ("'", '"'), span, within)
            else:
                yield from _settings(value, (*within, str(key.value)) if isinstance(key, yaml.ScalarNode) else within)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _settings(item, within)
