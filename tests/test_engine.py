"""The engine: positions, ordering, fingerprints, parallel scans, prefilter, per-file results."""

from __future__ import annotations

import gc
import pickle
import warnings
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from portcheck import registry
from portcheck.api import scan_paths, scan_source
from portcheck.config import Config
from portcheck.context import Context
from portcheck.engine import scan_bytes
from portcheck.positions import positions

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = (ROOT / "examples" / "cuda_app" / "train.py").read_text()


POSITION_SOURCES = [
    SAMPLE,
    "x = 1\r\ny = (\r\n  2)\r\n",
    "x = 1\ry = (\r  2)\r",
    "if a:\n\tb = c.cuda()  # tab\n",
    "class A:\n    def f(self):\n        pass\n",
    # the same statement twice, in the same block and in blocks indented alike
    "x = a.cuda()\nx = a.cuda()\nif b:\n    x = a.cuda()\nelse:\n    x = a.cuda()\n",
    "def f():\n  # note\n\n  return g(\n      1)\ndef g():\n  return g(\n      1)",  # no newline at the end
]


def _chains(module: cst.Module) -> dict[int, tuple[cst.CSTNode, ...]]:
    found: dict[int, tuple[cst.CSTNode, ...]] = {}
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(module, ())]
    while stack:
        node, chain = stack.pop()
        found[id(node)] = chain
        stack.extend((child, (*chain, node)) for child in node.children)
    return found


@pytest.mark.parametrize("anchored", [False, True], ids=["generated", "anchored"])
def test_targeted_positions_match_libcst_position_provider(anchored: bool) -> None:
    sources = POSITION_SOURCES + [
        e.code for rule in registry.all_rules().values() for e in rule.INVALID if isinstance(e.code, str)
    ]
    for source in sources:
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError:
            continue
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        nodes = [node for node in expected if not isinstance(node, cst.Module)]
        if anchored:
            got = positions(module, nodes, text=source, chains=_chains(module))
        else:
            got = positions(module, nodes)
        for node in nodes:
            want = expected[node]
            assert got[id(node)] == (want.start.line, want.start.column, want.end.line, want.end.column), source


def test_anchored_positions_place_a_repeated_statement_by_a_unique_one_around_it() -> None:
    """`x = a.cuda()` occurs four times: each is placed by the block around it, or, where that
    repeats too, by generating the module."""
    source = POSITION_SOURCES[5]
    module = cst.parse_module(source)
    chains = _chains(module)
    calls = [node for node in _all_nodes(module) if isinstance(node, cst.Call)]
    got = positions(module, calls, text=source, chains=chains)
    assert [got[id(call)][0] for call in calls] == [1, 2, 4, 6]


def _all_nodes(module: cst.Module) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(reversed(node.children))
    return found


def test_a_scan_frees_its_analysis_and_leaves_the_collector_as_it_was() -> None:
    """The analysis runs without the automatic collector and collects its own cycles (rules,
    context, walker and flow refer to one another) before it returns."""
    scan_source(SAMPLE, config=Config(root=ROOT))
    assert gc.isenabled()
    assert not any(type(o) is Context for o in gc.get_objects())
    gc.disable()
    try:
        scan_source(SAMPLE, config=Config(root=ROOT))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_findings_are_sorted_and_columns_one_based() -> None:
    findings = scan_source(SAMPLE, config=Config(root=ROOT))
    assert findings == sorted(findings, key=lambda f: f.sort_key)
    sync = next(f for f in findings if f.code == "PC203")
    assert (sync.line, sync.column) == (57, 9)
    assert sync.source_line.strip() == "torch.cuda.synchronize()"
    assert (sync.end_line, sync.end_column) == (57, 9 + len("torch.cuda.synchronize"))


def test_fingerprints_survive_unrelated_edits_above() -> None:
    before = {(f.code, f.fingerprint) for f in scan_source(SAMPLE)}
    edited = "# a new header comment\n\nimport sys\n" + SAMPLE
    after = {(f.code, f.fingerprint) for f in scan_source(edited)}
    assert before == after
    assert len({fp for _, fp in before}) == len(before), "fingerprints are unique"


def test_repeated_identical_lines_get_distinct_stable_fingerprints() -> None:
    source = "import torch\ntorch.cuda.synchronize()\ntorch.cuda.synchronize()\n"
    first = [f.fingerprint for f in scan_source(source)]
    assert len(set(first)) == 2
    assert first == [f.fingerprint for f in scan_source(source)]


def test_findings_pickle_for_worker_processes() -> None:
    findings = scan_source(SAMPLE)
    assert pickle.loads(pickle.dumps(findings)) == findings


def test_parallel_and_serial_scans_agree(tmp_path: Path) -> None:
    for index in range(40):
        (tmp_path / f"m{index:02}.py").write_text(SAMPLE if index % 3 else "x = 1\n")
    config = Config(root=tmp_path)
    serial = scan_paths([tmp_path], config, jobs=1)
    parallel = scan_paths([tmp_path], config, jobs=2)
    assert serial.findings == parallel.findings
    assert (serial.files, serial.skipped) == (parallel.files, parallel.skipped) == (40, 14)


def test_files_without_trigger_words_are_not_parsed() -> None:
    result = scan_bytes(b"def f(:\n", "broken_but_irrelevant.py", Config())
    assert result.skipped and not result.findings


def test_tokenless_rules_would_disable_the_prefilter(monkeypatch: pytest.MonkeyPatch) -> None:
    from portcheck import engine

    rule = registry.get("PC102")
    monkeypatch.setattr(rule, "triggers", ())
    engine._prefilter.cache_clear()
    try:
        result = scan_bytes(b"def f(:\n", "x.py", Config())
        assert [f.code for f in result.findings] == ["PC001"]
    finally:
        monkeypatch.undo()
        engine._prefilter.cache_clear()


def test_per_file_ignores_apply_by_glob() -> None:
    config = Config().with_overrides(per_file_ignores={"tests/**": ["PC2"]})
    assert not [
        f for f in scan_bytes(SAMPLE.encode(), "tests/test_train.py", config).findings if f.code.startswith("PC2")
    ]
    assert [f for f in scan_bytes(SAMPLE.encode(), "src/train.py", config).findings if f.code.startswith("PC2")]


def test_the_reported_severity_is_the_worst_over_the_selected_targets() -> None:
    source = "import torch\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=[0])\n"
    (both,) = scan_source(source, config=Config(targets=("neuron", "cpu")))
    assert both.severity.label == "error" and dict(both.targets) == {"neuron": 1, "cpu": 3}
    (neuron,) = scan_source(source, config=Config(targets=("neuron",)))
    assert neuron.severity.label == "info"
    assert scan_source(source, config=Config(targets=("rocm",))) == []


def test_a_method_call_chained_over_lines_is_reported_on_its_method_line() -> None:
    source = (
        "import torch\nids = (\n    tokenize(prompt)\n    .unsqueeze(0)\n    .cuda()  # portcheck: ignore[PC102]\n)\n"
    )
    assert scan_source(source, config=Config(targets=("tpu",))) == []
    (finding,) = scan_source(source.replace("  # portcheck: ignore[PC102]", ""), config=Config(targets=("tpu",)))
    assert (finding.code, finding.line, finding.column) == ("PC102", 5, 6)


def test_an_import_whose_handler_only_logs_is_not_optional_where_the_module_uses_it() -> None:
    logs = "import logging\ntry:\n    import xformers.ops\nexcept ImportError:\n    logging.error('no xformers')\n"
    used = logs + "def attend(q, k, v):\n    return xformers.ops.memory_efficient_attention(q, k, v)\n"
    (finding,) = [f for f in scan_source(used, config=Config(targets=("tpu",))) if f.code == "PC701"]
    assert finding.severity.label == "error" and "optional" not in finding.message
    for optional_source in (logs, used.replace("logging.error('no xformers')", "xformers = None")):
        (optional,) = [f for f in scan_source(optional_source, config=Config(targets=("tpu",))) if f.code == "PC701"]
        assert (
            optional.severity.label == "warning" and "optional: guarded by try/except ImportError" in optional.message
        )


def test_hints_follow_the_selected_targets() -> None:
    source = "import torch\ntorch.cuda.synchronize()\n"
    (xla,) = scan_source(source, config=Config(targets=("xla",)))
    assert "torch_xla.sync()" in xla.hint
    (tpu,) = scan_source(source, config=Config(targets=("tpu",)))
    assert "torch.accelerator.synchronize()" in tpu.hint and "torch_xla" not in tpu.hint
    (cpu,) = scan_source(source, config=Config(targets=("cpu",)))
    assert "guard it" in cpu.hint


def test_tf32_switched_off_is_replaced_by_the_highest_float32_precision() -> None:
    """`allow_tf32 = False` asks for full float32 matmuls: "highest" keeps them, where "high"
    (what `= True` means) would allow TF32, and multi-pass bfloat16 on TPU."""
    source = (
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = False\ntorch.backends.cudnn.allow_tf32 = True\n"
        "torch.backends.cuda.matmul.fp32_precision = 'ieee'\n"
    )
    off, on, ieee = scan_source(source, config=Config(targets=("tpu",)))
    assert (
        'set_float32_matmul_precision("highest")' in off.hint and 'set_float32_matmul_precision("highest")' in ieee.hint
    )
    assert 'set_float32_matmul_precision("high")' in on.hint


def test_cudnn_deterministic_claims_what_is_true_on_each_target() -> None:
    source = "import torch\ntorch.backends.cudnn.deterministic = True\n"
    (cpu,) = scan_source(source, config=Config(targets=("cpu",)))
    assert cpu.severity.label == "info" and "most CPU kernels are deterministic already" in cpu.hint
    (tpu,) = scan_source(source, config=Config(targets=("tpu",)))
    assert tpu.severity.label == "info" and "XLA's TPU programs are deterministic by default" in tpu.hint
    (mps,) = scan_source(source, config=Config(targets=("mps",)))
    assert mps.severity.label == "warning" and "has no effect" in mps.message
    assert "not deterministic" not in tpu.message + cpu.message + mps.message


def test_freeing_cached_memory_matters_where_the_target_has_a_cache_to_free() -> None:
    source = "import torch\nmodel.cpu()\ntorch.cuda.empty_cache()\n"
    levels = {
        target: scan_source(source, config=Config(targets=(target,)))[0].severity.label
        for target in ("neuron", "xpu", "tpu", "cpu")
    }
    assert levels == {"neuron": "warning", "xpu": "warning", "tpu": "info", "cpu": "info"}


def test_a_newer_replacement_than_the_configured_torch_is_called_out() -> None:
    source = "import torch\ntorch.cuda.empty_cache()\n"
    (old,) = scan_source(source, config=Config(targets=("tpu",), torch_version=(2, 6)))
    assert "needs torch>=2.9" in old.hint
    (new,) = scan_source(source, config=Config(targets=("tpu",), torch_version=(2, 13)))
    assert "needs" not in new.hint


def test_selecting_only_tool_rules_checks_the_syntax_of_every_file() -> None:
    config = Config().with_overrides(select=["PC001"])
    assert [f.code for f in scan_bytes(b"def f(:\n", "x.py", config).findings] == ["PC001"]


def test_invalid_escapes_in_the_scanned_code_raise_no_warning() -> None:
    # ast.literal_eval, which reads string literals, warns about '\d'; the user should not see it.
    source = "import torch\nx = torch.zeros(1).to('cuda\\d')\ny = x.cuda()\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [finding.code for finding in scan_source(source, config=Config(targets=("tpu",)))] == ["PC102"]


def test_a_fixed_choice_of_gpus_is_info_and_a_per_process_one_a_warning() -> None:
    fixed = 'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
    (finding,) = scan_source(fixed, config=Config(targets=("tpu",)))
    assert finding.severity.label == "info" and "fixed CUDA devices" in finding.hint
    (per_rank,) = scan_source(fixed.replace('"0"', "str(rank)"), config=Config(targets=("tpu",)))
    assert per_rank.severity.label == "warning"


def test_an_optional_cuda_only_package_is_a_warning_unless_only_an_export_imports_it() -> None:
    """Behind try/except ImportError the target silently takes the other path, without the fast
    kernel: the port's to replace. An export function runs only when the user exports."""
    guarded = (
        "try:\n    import xformers.ops as xops\nexcept ImportError:\n    xops = None\n"
        "def attend(q, k, v):\n    if xops is None:\n        return q\n    return xops.memory_efficient_attention(q, k, v)\n"
    )
    exporting = "def export_engine(model):\n    import tensorrt as trt\n    return trt.Builder(trt.Logger())\n"
    for source, level in ((guarded, "warning"), (exporting, "info")):
        found = {(f.code, f.line): f.severity.label for f in scan_source(source, config=Config(targets=("tpu",)))}
        assert {code for code, _ in found} == {"PC701", "PC707"} and set(found.values()) == {level}, found
    # the module's own unguarded import is not the export function's optional one (stable-dreamfusion)
    both = (
        "import nvdiffrast.torch as dr\ndef render(c, p, t):\n    return dr.rasterize(c, p, t)\n"
        + exporting.replace("tensorrt as trt", "nvdiffrast.torch as dr").replace(
            "trt.Builder(trt.Logger())", "dr.rasterize(dr.RasterizeCudaContext(), model, model)"
        )
    )
    found = {(f.code, f.line): f.severity.label for f in scan_source(both, config=Config(targets=("tpu",)))}
    assert found == {("PC701", 1): "error", ("PC707", 3): "warning", ("PC707", 6): "info"}
