"""The fix facts of the CUDA API table (cuda_api.toml), checked against the installed torch.

Fixes write what the table says, so a wrong parameter name or off-accelerator value there
is a wrong fix everywhere. These tests need torch (they are skipped without it) and, for the
off-accelerator values, a host with no accelerator, as the table's facts were taken on.
"""

from __future__ import annotations

import importlib
import inspect
import warnings

import libcst as cst
import pytest

from portcheck.rewrites.versions import lowest_release
from portcheck.targets import api

torch = pytest.importorskip("torch")

ROWS = {entry.name: entry for entry in api.table().values()}
NAMES = sorted(api.table().items())


def rows(wanted):
    """(name, entry) pairs for parametrize, with the name as the test id."""
    return [pytest.param(name, entry, id=name) for name, entry in NAMES if wanted(entry)]


def resolve(qualified: str) -> object:
    parts = qualified.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for part in parts[end:]:
            found = getattr(found, part)
        return found
    raise LookupError(qualified)


def installed() -> tuple[int, ...]:
    return tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])


@pytest.mark.parametrize(("name", "entry"), rows(lambda e: e.rename.startswith("torch.")))
def test_renames_exist_where_the_table_says_they_do(name: str, entry: api.ApiEntry) -> None:
    if entry.since and entry.since > installed():
        pytest.skip(f"{entry.rename} is newer than this torch")
    assert resolve(entry.rename) is not None


@pytest.mark.parametrize(("name", "entry"), rows(lambda e: e.rename and isinstance(e.arguments, tuple)))
def test_arguments_are_the_cuda_parameters_in_order(name: str, entry: api.ApiEntry) -> None:
    if not callable(resolve(name)):
        return  # a module (torch.cuda.amp): nothing is called
    parameters = list(inspect.signature(resolve(name)).parameters)
    assert parameters[: len(entry.arguments)] == list(entry.arguments)
    if entry.since and entry.since <= installed():
        replacement = inspect.signature(resolve(entry.rename)).parameters.values()
        positional = [p for p in replacement if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        assert len(positional) >= len(entry.arguments), "the arguments are passed positionally"


@pytest.mark.skipif(torch.accelerator.is_available(), reason="needs a host with no accelerator")
@pytest.mark.parametrize(("name", "entry"), rows(lambda e: e.without_accelerator not in (None, "None", "False")))
def test_values_without_an_accelerator_are_what_the_cuda_call_returns_there(name: str, entry: api.ApiEntry) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert resolve(name)() == eval(entry.without_accelerator)  # noqa: S307


@pytest.mark.skipif(torch.accelerator.is_available(), reason="needs a host with no accelerator")
def test_is_bf16_supported_is_false_without_an_accelerator() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.cuda.is_bf16_supported() is False
    assert ROWS["torch.cuda.is_bf16_supported"].without_accelerator == "False"


@pytest.mark.skipif(torch.accelerator.is_available(), reason="needs a host with no accelerator")
@pytest.mark.parametrize(
    ("name", "entry"),
    rows(lambda e: e.guard and e.rename.startswith("torch.accelerator.") and e.arguments in ((), ("device",))),
)
def test_guarded_replacements_raise_without_an_accelerator(name: str, entry: api.ApiEntry) -> None:
    if entry.since and entry.since > installed():
        pytest.skip(f"{entry.rename} is newer than this torch")
    replacement = resolve(entry.rename)
    needs_index = any(p.default is p.empty for p in inspect.signature(replacement).parameters.values())
    with pytest.raises(RuntimeError):
        result = replacement(0) if needs_index else replacement()
        if hasattr(result, "__enter__"):
            result.__enter__()  # torch.accelerator.device_index(i) acts on entering


def test_every_fix_value_and_expression_is_python() -> None:
    for entry in ROWS.values():
        texts = [entry.without_accelerator or "0", entry.expression or "0"]
        texts += [facts.expression for facts in entry.per_target.values() if facts.expression]
        for text in texts:
            cst.parse_expression(text.replace("{", "").replace("}", "") if "{torch" in text else text)


def test_the_oldest_supported_torch_is_read_from_the_specifier() -> None:
    assert lowest_release(">=2.11,<=2.15") == (2, 11)
    assert lowest_release("==2.14.*") == (2, 14)
    assert lowest_release("") is None
    assert lowest_release("not a specifier") is None
