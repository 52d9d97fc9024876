"""`portcheck smoke` end to end on the CPU: parity, mismatches, isolation, the JSON report.

Each case runs the real command: one worker process per device, so these tests are the
slowest in the suite (a few seconds each), and the only ones that need torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from portcheck.cli import app

HERE = Path(__file__).parent
MODELS = "tests/smoke/cases/models.py"
SCHEMA = json.loads((HERE.parent.parent / "portcheck" / "smoke" / "report.schema.json").read_text())


def smoke(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, dict]:
    monkeypatch.chdir(HERE.parent.parent)
    result = CliRunner().invoke(app, ["smoke", *args, "--format", "json"])
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    return result.exit_code, document["results"][0]


@pytest.mark.parametrize(
    ("factory", "extra"),
    [
        ("mlp", ()),
        ("cnn", ()),
        ("transformer_block", ("--train", "--steps", "2")),
    ],
)
def test_parity_passes_against_the_cpu_and_an_emulated_tpu(
    monkeypatch: pytest.MonkeyPatch, factory: str, extra: tuple[str, ...]
) -> None:
    for device in (("--device", "cpu"), ("--device", "tpu", "--emulate")):
        code, result = smoke(monkeypatch, f"{MODELS}:{factory}", *device, *extra)
        assert (code, result["verdict"]) == (0, "pass"), result
        assert result["checks"] and all(check["passed"] for check in result["checks"])
        assert result["emulated"] == ("--emulate" in device)
        if "--train" in extra:
            groups = {check["group"] for check in result["checks"]}
            assert groups == {"outputs", "losses", "gradients", "weights"}


def test_a_device_specific_branch_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    code, result = smoke(monkeypatch, f"{MODELS}:device_branch", "--device", "tpu", "--emulate")
    assert (code, result["verdict"]) == (1, "mismatch")
    failed = [check for check in result["checks"] if not check["passed"]]
    assert [check["name"] for check in failed] == ["output"]
    assert failed[0]["max_abs_error"] > 0


def test_a_crashing_backend_process_is_a_result(monkeypatch: pytest.MonkeyPatch) -> None:
    code, result = smoke(monkeypatch, f"{MODELS}:crashes", "--device", "tpu", "--emulate")
    assert (code, result["verdict"]) == (2, "error")
    assert result["runs"][1]["status"] == "crashed" and "signal" in result["runs"][1]["detail"]


def test_a_hanging_backend_process_is_killed_after_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    code, result = smoke(monkeypatch, f"{MODELS}:hangs", "--device", "tpu", "--emulate", "--timeout", "15")
    assert (code, result["verdict"]) == (2, "error")
    assert result["runs"][1]["status"] == "timeout"


def test_a_missing_backend_is_reported_plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    code, result = smoke(monkeypatch, f"{MODELS}:mlp", "--device", "xpu")
    assert (code, result["verdict"]) == (2, "error")
    assert result["runs"][1]["status"] == "backend-missing"


def test_a_bad_factory_is_an_error_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    code, result = smoke(monkeypatch, f"{MODELS}:not_a_case", "--device", "cpu")
    assert (code, result["runs"][0]["status"]) == (2, "error")
    assert "must return (model, inputs)" in result["runs"][0]["detail"]


def test_a_data_dependent_shape_blocks_neuron_and_the_trace_points_at_its_line(monkeypatch: pytest.MonkeyPatch) -> None:
    example = HERE.parent.parent / "examples" / "smoke" / "models.py"
    line = next(number for number, text in enumerate(example.read_text().splitlines(), 1) if "x[keep]" in text)
    code, result = smoke(monkeypatch, "examples/smoke/models.py:token_filter", "--device", "neuron", "--emulate")
    assert (code, result["verdict"]) == (1, "blocked")
    assert result["runs"][1]["status"] == "rejected" and result["runs"][1]["where"].endswith(f"models.py:{line}")
    assert [(f["rule"], f["line"]) for f in result["trace"]["findings"]] == [("PC502", line)]
    code, result = smoke(monkeypatch, "examples/smoke/models.py:token_filter", "--device", "tpu", "--emulate")
    assert (code, result["verdict"]) == (0, "pass"), "a graph break is a warning on tpu, not a blocker"


def test_recompilations_agree_between_the_trace_and_the_emulated_tpu(monkeypatch: pytest.MonkeyPatch) -> None:
    code, result = smoke(monkeypatch, "examples/smoke/models.py:classifier", "--device", "tpu", "--emulate")
    assert code == 0
    assert result["trace"]["recompilations"] == 2
    assert result["runs"][1]["emulation"]["recompilations"] == 2


def test_cases_can_come_from_pyproject(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.portcheck.smoke]\ncases = ["cases.py:tiny"]\ndevice = "cpu"\ntrain = true\nsteps = 2\n'
    )
    (tmp_path / "cases.py").write_text(
        "import torch\n\ndef tiny():\n    return torch.nn.Linear(3, 1), torch.randn(2, 3)\n"
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["smoke", "--format", "json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)["results"][0]
    assert (found["spec"], found["train"], found["steps"], found["verdict"]) == ("cases.py:tiny", True, 2, "pass")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("tests/smoke/cases/models.py", "--device", "tpu"), "expected FILE.py:FACTORY"),
        (("tests/smoke/cases/absent.py:mlp", "--device", "tpu"), "no such file"),
        (("not a module:mlp", "--device", "tpu"), "neither a .py file nor a module name"),
        ((f"{MODELS}:mlp", "--device", "tpux"), "unknown device 'tpux'"),
        ((f"{MODELS}:mlp", "--device", "tpu:1"), "has one device; name it 'tpu'"),
        ((f"{MODELS}:mlp", "--device", "cuda:x"), "a device index is a number"),
        ((f"{MODELS}:mlp", "--device", "tpu", "--timeout", "-1"), "--timeout must be a positive number"),
        ((f"{MODELS}:mlp", "--device", "cuda", "--emulate"), "--emulate stands in for tpu and neuron"),
    ],
)
def test_usage_errors_exit_2_before_any_worker_starts(
    monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], message: str
) -> None:
    def no_worker(*args: object, **kwargs: object) -> None:
        raise AssertionError("a worker was started")

    monkeypatch.setattr("portcheck.smoke.runner.subprocess.run", no_worker)
    monkeypatch.chdir(HERE.parent.parent)
    result = CliRunner().invoke(app, ["smoke", *args])
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output
