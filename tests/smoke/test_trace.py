"""portcheck.smoke.trace on small CPU models: each Dynamo event lands on the model's own line,
with the static rule that covers it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from portcheck.smoke.trace import TraceFinding, trace  # noqa: E402

MODELS = Path(__file__).parent / "models" / "trace_patterns.py"
_spec = importlib.util.spec_from_file_location("trace_patterns", MODELS)
patterns = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(patterns)


def at(marker: str) -> int:
    """The line of the models file that carries `# at: marker`."""
    lines = MODELS.read_text().splitlines()
    return next(number for number, text in enumerate(lines, 1) if text.endswith(f"# at: {marker}"))


def finding(kind: str, detail: str, marker: str, rule: str) -> TraceFinding:
    return TraceFinding(kind, detail, str(MODELS), at(marker), rule)


def test_a_clean_mlp_is_one_graph_with_nothing_to_report() -> None:
    result = trace(patterns.MLP(), (torch.randn(3, 4),))
    assert (result.graphs, result.graph_breaks, result.recompilations, result.findings, result.error) == (
        1,
        0,
        0,
        (),
        "",
    )


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("Nonzero", finding("graph-break", "dynamic shape operator nonzero", "nonzero", "PC501")),
        (
            "MaskIndexing",
            finding("graph-break", "dynamic shape operator nonzero (boolean mask indexing)", "mask", "PC502"),
        ),
        ("Item", finding("host-sync", "Tensor.item()", "item", "PC503")),
        ("FloatOfMean", finding("host-sync", "Tensor.item()", "float", "PC503")),  # float(t) reads it with item()
        ("Branch", finding("graph-break", "branch on a tensor value (generic_jump)", "branch", "PC504")),
    ],
)
def test_a_graph_break_points_at_its_line_with_the_static_rule(model: str, expected: TraceFinding) -> None:
    result = trace(getattr(patterns, model)(), (torch.randn(8),))
    assert (result.graph_breaks, result.findings, result.error) == (1, (expected,), "")


def test_a_frame_that_captured_no_graph_is_still_reported() -> None:
    # torch.unique as the frame's only operator: Dynamo compiles nothing, and explain() shows nothing
    result = trace(patterns.Unique(), (torch.randn(8),))
    assert (result.graphs, result.graph_breaks) == (0, 1)
    assert result.findings == (
        finding("no-graph", "no graph captured: dynamic shape operator unique", "unique", "PC501"),
    )


def test_a_break_in_an_inlined_function_counts_once_at_its_own_line() -> None:
    # Dynamo records it twice: inlined into forward's graph, then in the function's own frame
    result = trace(patterns.Inlined(), (torch.randn(8),))
    assert (result.graph_breaks, result.findings) == (
        1,
        (finding("graph-break", "dynamic shape operator nonzero", "inlined", "PC501"),),
    )


def test_a_captured_data_dependent_operator_is_reported_from_the_graph() -> None:
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        result = trace(patterns.Nonzero(), (torch.randn(8),))
    assert (result.graphs, result.graph_breaks) == (1, 0)
    assert result.findings == (finding("data-dependent-op", "nonzero", "nonzero", "PC501"),)


def test_a_captured_scalar_read_is_a_host_sync_not_a_data_dependent_op() -> None:
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        result = trace(patterns.FloatOfMean(), (torch.randn(8),))
    assert (result.graphs, result.graph_breaks) == (1, 0)
    assert result.findings == (finding("host-sync", "Tensor.item()", "float", "PC503"),)


def test_each_new_input_shape_recompiles_with_dynamic_false() -> None:
    shapes = [(torch.randn(batch, 4),) for batch in (3, 5, 7)]
    result = trace(patterns.MLP(), shapes[0], shapes[1:])
    assert (result.graphs, result.recompilations) == (1, 2)
    assert {(f.kind, f.path, f.line, f.rule) for f in result.findings} == {
        ("recompilation", str(MODELS), at("mlp"), "")
    }
    assert all("size mismatch" in f.detail for f in result.findings)


def test_the_same_shape_again_does_not_recompile() -> None:
    result = trace(patterns.MLP(), (torch.randn(3, 4),), [(torch.randn(3, 4),), (torch.randn(3, 4),)])
    assert (result.recompilations, result.findings) == (0, ())


def test_the_models_own_error_comes_back_as_error() -> None:
    result = trace(patterns.Failing(), (torch.randn(8),))
    assert result.error == "ValueError: the model's own error"
    assert (result.graphs, result.findings) == (0, ())
