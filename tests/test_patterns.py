"""patterns.string_value reads string literals without `ast.literal_eval` where it can: it must
agree with it everywhere."""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from portcheck.patterns import string_value

LITERALS = [
    '""', "''", '"cuda"', "'cuda:0'", '"""a\nb"""', "'''x'''", "r'x'", "R\"x\"", "u'x'", "U'x'",
    "b'x'", "rb'x'", "Br'x'", "'\"'", '"\'"', r"'a\nb'", r"r'a\nb'", r"'\x41'", r"b'\x41'", r"'\''",
    '"ú"', '"""it\'s"""',
]  # fmt: skip


@pytest.mark.parametrize("literal", LITERALS)
def test_a_string_literal_reads_as_python_evaluates_it(literal: str) -> None:
    node = cst.parse_expression(literal)
    assert isinstance(node, cst.SimpleString)
    value = ast.literal_eval(literal)
    assert string_value(node) == (value if isinstance(value, str) else None)


def test_f_strings_and_other_expressions_have_no_string_value() -> None:
    assert string_value(cst.parse_expression("f'cuda:{i}'")) is None
    assert string_value(cst.parse_expression("name")) is None
    assert string_value(cst.parse_expression("'cu' 'da'")) == "cuda"
