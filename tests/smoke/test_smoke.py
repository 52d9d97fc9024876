"""`portcheck smoke` end to end on the CPU: parity, mismatches, isolation, the JSON report.

Each case runs the real command: one worker process per device, so these tests are the
slowest in the suite (a few seconds each), and the only ones that need torch.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from portcheck.cli import app
from portcheck.smoke.runner import Job, Settings, _notes, _Worker

HERE = Path(__file__).parent
MODELS = "tests/smoke/cases/models.py"
SCHEMA = json.loads((HERE.parent.parent / "portcheck" / "smoke" / "report.schema.json").read_text())


def smoke(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, dict]:
    code, results = smoke_all(monkeypatch, *args)
    return code, results[0]


def smoke_all(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, list[dict]]:
    monkeypatch.chdir(HERE.parent.parent)
    result = CliRunner().invoke(app, ["smoke", *args, "--format", "json"])
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    return result.exit_code, document["results"]


def line_of(text: str, path: Path = HERE / "cases" / "models.py") -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), 1) if text in line)


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


def test_a_crashing_backend_process_is_a_result_and_the_next_case_gets_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, (crashed, after) = smoke_all(
        monkeypatch, f"{MODELS}:crashes", f"{MODELS}:mlp", "--device", "tpu", "--emulate"
    )
    assert (code, crashed["verdict"], after["verdict"]) == (2, "error", "pass")
    assert crashed["runs"][1]["status"] == "crashed" and "signal" in crashed["runs"][1]["detail"]


def test_a_hanging_backend_process_is_killed_after_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    code, (hung, after) = smoke_all(
        monkeypatch, f"{MODELS}:hangs", f"{MODELS}:mlp", "--device", "tpu", "--emulate", "--timeout", "15"
    )
    assert (code, hung["verdict"], after["verdict"]) == (2, "error", "pass")
    assert hung["runs"][1]["status"] == "timeout"


def test_one_worker_per_device_serves_every_case_of_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    started = []
    popen = subprocess.Popen

    def counted(*args: Any, **kwargs: Any) -> subprocess.Popen:
        started.append(args[0])
        return popen(*args, **kwargs)

    monkeypatch.setattr("portcheck.smoke.runner.subprocess.Popen", counted)
    cases = [f"{MODELS}:{name}" for name in ("mlp", "cnn", "device_branch")]
    code, results = smoke_all(monkeypatch, *cases, "--device", "tpu", "--emulate")
    assert [result["verdict"] for result in results] == ["pass", "pass", "mismatch"]
    assert len(started) == 2, "one torch start-up per device"


def test_a_slow_start_is_not_counted_against_the_case_timeout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a worker that takes 3 s to import its backend, then answers each job at once
    slow = (
        "import json, sys, time\ntime.sleep(3)\nprint(json.dumps({'ready': True}), flush=True)\n"
        "for line in sys.stdin:\n    print(json.dumps({'status': 'ok'}), flush=True)\n"
    )
    popen = subprocess.Popen
    monkeypatch.setattr(
        "portcheck.smoke.runner.subprocess.Popen", lambda args, **kwargs: popen([args[0], "-c", slow], **kwargs)
    )
    with _Worker.running(tmp_path, "target", False, tmp_path) as worker:
        job = Job("m.py:f", str(tmp_path), device="cpu", role="reference", folder=str(tmp_path))
        assert worker.ask(job, timeout=1.0)["status"] == "ok"
        assert worker.ask(job, timeout=1.0)["status"] == "ok"  # one start-up for both


def test_random_draws_match_on_the_cpu_and_the_emulated_target_and_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for device in (("--device", "cpu"), ("--device", "tpu", "--emulate")):
        code, result = smoke(monkeypatch, f"{MODELS}:noisy", *device)
        assert (code, result["verdict"]) == (0, "pass"), result["checks"]
        draws = [(f["detail"], f["line"]) for f in result["observed"] if f["kind"] == "random"]
        assert draws == [
            ("bernoulli_.float", line_of("self.dropout(self.linear")),
            ("randn_like", line_of("randn_like")),
        ]
        assert result["notes"] == []


def test_a_mismatch_on_a_device_with_its_own_generator_says_the_model_is_random() -> None:
    draw = {"kind": "random", "detail": "native_dropout", "path": "model.py", "line": 7, "rule": ""}
    (note,) = _notes(Settings("tpu"), (draw,), "mismatch")
    assert "native_dropout at model.py:7" in note and "its own generator" in note
    assert _notes(Settings("tpu", emulate=True), (draw,), "mismatch") == ()
    assert _notes(Settings("tpu"), (draw,), "pass") == ()


@pytest.mark.parametrize(
    ("factory", "rule", "call", "instead"),
    [
        ("synchronizes", "PC203", "torch.cuda.synchronize()", "torch.accelerator.synchronize()"),
        ("moves_to_cuda", "PC102", "x.cuda()", ".to(device)"),
    ],
)
def test_a_cuda_call_in_forward_blocks_with_its_rule_and_replacement(
    monkeypatch: pytest.MonkeyPatch, factory: str, rule: str, call: str, instead: str
) -> None:
    code, result = smoke(monkeypatch, f"{MODELS}:{factory}", "--device", "tpu", "--emulate")
    assert (code, result["verdict"]) == (1, "blocked")
    (reference,) = result["runs"]
    assert (reference["status"], reference["rule"]) == ("rejected", rule)
    assert reference["where"].endswith(f"models.py:{line_of(call)}")
    (reason,) = result["blocking"]
    assert reason.startswith(f"{rule} tpu would reject the model") and f"use {instead}" in reason


def test_cuda_calls_that_pass_silently_without_cuda_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    code, result = smoke(monkeypatch, f"{MODELS}:silent_cuda_calls", "--device", "tpu", "--emulate")
    assert code == 0
    calls = [(f["rule"], f["op"], f["line"]) for f in result["observed"] if f["kind"] == "cuda-call"]
    assert calls == [
        ("PC204", "torch.cuda.empty_cache", line_of("empty_cache()")),
        ("PC204", "torch.cuda.memory_allocated", line_of("memory_allocated()")),
        ("PC301", "torch.cuda.amp.autocast", line_of("amp.autocast()")),
    ]
    autocast = result["observed"][2]["detail"]
    assert "silently runs in float32" in autocast and 'torch.amp.autocast("tpu", dtype=torch.bfloat16)' in autocast


def test_buffers_are_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    code, results = smoke_all(
        monkeypatch, f"{MODELS}:averages", f"{MODELS}:batch_norm_in_training", "--device", "tpu", "--emulate"
    )
    drifted, batch_norm = results
    assert (code, drifted["verdict"], batch_norm["verdict"]) == (1, "mismatch", "pass")
    assert [(c["group"], c["name"]) for c in drifted["checks"] if not c["passed"]] == [("buffers", "average")]
    assert {c["name"] for c in batch_norm["checks"] if c["group"] == "buffers"} == {
        "1.running_mean",
        "1.running_var",
        "1.num_batches_tracked",
    }


def test_a_missing_backend_is_reported_plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    code, result = smoke(monkeypatch, f"{MODELS}:mlp", "--device", "xpu")
    assert (code, result["verdict"]) == (2, "error")
    assert result["runs"][1]["status"] == "backend-missing"


def test_a_factory_returning_the_wrong_type_is_a_usage_error_before_the_target_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(HERE.parent.parent)
    asked = []
    monkeypatch.setattr("portcheck.smoke.runner._Worker.ask", recording(asked, _Worker.ask))
    result = CliRunner().invoke(app, ["smoke", f"{MODELS}:mlp", f"{MODELS}:not_a_case", "--device", "tpu", "--emulate"])
    assert result.exit_code == 2 and result.stdout == ""
    assert (
        f"{MODELS}:not_a_case: a factory must return (model, inputs), a dict or a SmokeCase, not int" in result.stderr
    )
    assert [job.role for job in asked] == ["reference", "reference"]


def recording(asked: list, ask: Any) -> Any:
    def recorded(worker: _Worker, job: Any, timeout: float) -> dict:
        asked.append(job)
        return ask(worker, job, timeout)

    return recorded


def test_a_data_dependent_shape_blocks_neuron_and_the_trace_points_at_its_line(monkeypatch: pytest.MonkeyPatch) -> None:
    example = HERE.parent.parent / "examples" / "smoke" / "models.py"
    line = line_of("x[keep]", example)
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

    monkeypatch.setattr("portcheck.smoke.runner.subprocess.Popen", no_worker)
    monkeypatch.chdir(HERE.parent.parent)
    result = CliRunner().invoke(app, ["smoke", *args])
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output
