"""`portcheck run --emulate TARGET PROGRAM ARGS`: whole programs on an emulated device.

Each test runs the real command in a subprocess (its children print straight to the inherited
stdout and stderr), so each costs a torch import or two; the programs are kept tiny. The e2e
programs are ported with `fix` first, as a user would before running them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from portcheck import api
from portcheck.cli import app
from portcheck.config import Config
from portcheck.smoke import launch

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "e2e"
SCHEMA = json.loads((ROOT / "portcheck" / "smoke" / "run.schema.json").read_text())
TIMEOUT_S = 120
# gloo now and then aborts a worker while it exits, after its work is done: a teardown race in
# torch (see tests/test_e2e_flow.py); such a run is started over once.
GLOO_TEARDOWN_ABORT = "terminate called without an active exception"


def portcheck_run(folder: Path, *args: str, command: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess, dict]:
    """`portcheck run --report FILE ARGS` in `folder`; the process and the validated report."""
    report = folder / "report.json"
    report.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["PYTHONWARNINGS"] = "ignore"
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    command = command or (sys.executable, "-m", "portcheck")
    done = subprocess.run(
        [*command, "run", "--report", str(report), *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
    )
    document = json.loads(report.read_text()) if report.exists() else {}
    if document:
        jsonschema.validate(document, SCHEMA)
    return done, document


def fixed_copy(folder: Path, name: str, target: str, *, unsafe: bool = False) -> Path:
    copy = folder / name
    shutil.copyfile(FIXTURES / name, copy)
    report = api.fix_paths([copy], Config(root=folder), target, unsafe=unsafe)
    assert any(outcome.changed for outcome in report.outcomes)
    return copy


def write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


@pytest.mark.parametrize("target", ["tpu", "neuron"])
def test_the_ported_trainer_runs_with_autocast_on_the_device(tmp_path: Path, target: str) -> None:
    fixed_copy(tmp_path, "gpt_trainer.py", target)
    program = ["gpt_trainer.py", "--max_iters=2", "--eval_iters=1", "--batch_size=4"]
    done, report = portcheck_run(tmp_path, "--emulate", target, *program)
    assert done.returncode == 0, done.stderr
    assert "final: train loss" in done.stdout
    assert report["exit_code"] == 0 and report["command"] == program
    emulation = report["processes"][0]["emulation"]
    # 2 iterations of 2 micro-steps, and 2 evaluations (at step 0 and at the end) of 1 batch per split
    assert emulation["autocast"] == [{"device_type": target, "dtype": "bfloat16", "enabled": True, "count": 8}]
    assert emulation["data_dependent_ops"] == {} and emulation["recompilations"] == 0
    assert f"autocast: {target} bfloat16 x8" in done.stderr
    assert "emulated: numerics computed on the CPU, not measured on hardware" in done.stderr


@pytest.mark.parametrize("target", ["tpu", "neuron"])
def test_the_ported_ddp_job_runs_on_two_emulated_processes(tmp_path: Path, target: str) -> None:
    # On tpu the safe fix names the process's own device in DDP's device_ids (it named
    # LOCAL_RANK, a device rank 1 does not have where a process owns one); a neuron process
    # computes on the device of its LOCAL_RANK, as on CUDA, so device_ids stays.
    fixed_copy(tmp_path, "ddp_torchrun.py", target)
    own = "torch.accelerator.current_device_index()" if target == "tpu" else "self.gpu_id"
    assert f"device_ids=[{own}]" in (tmp_path / "ddp_torchrun.py").read_text()
    done, report = portcheck_run(tmp_path, "--emulate", target, "--nproc", "2", "ddp_torchrun.py", "2", "1")
    if done.returncode != 0 and GLOO_TEARDOWN_ABORT in done.stderr:
        (tmp_path / "snapshot.pt").unlink(missing_ok=True)
        done, report = portcheck_run(tmp_path, "--emulate", target, "--nproc", "2", "ddp_torchrun.py", "2", "1")
    assert done.returncode == 0, done.stderr
    assert "[rank 0] Epoch 1 | Steps: 4" in done.stdout
    assert (
        "[rank 0] checksum -0.319179" in done.stdout
    )  # what the hand port prints on CPU torch: gradients were all-reduced
    assert [process["rank"] for process in report["processes"]] == [0, 1]
    assert "rank 1: exit code 0" in done.stderr


COLLECTIVE = """\
    import sys

    import torch
    import torch.distributed as dist

    dist.init_process_group({backend})
    total = torch.ones(2, device="tpu") * (dist.get_rank() + 1)
    dist.all_reduce(total)
    # one write per line: the processes share the pipe, and print writes the newline separately
    sys.stdout.write(f"rank {{dist.get_rank()}}: {{total.device}} {{total.tolist()}} {{dist.get_backend()}}\\n")
    dist.destroy_process_group()
"""


@pytest.mark.parametrize("backend", ["", 'dist.get_default_backend_for_device("tpu")'])
def test_the_target_s_backend_runs_on_gloo(tmp_path: Path, backend: str) -> None:
    write(tmp_path, "collective.py", COLLECTIVE.format(backend=backend))
    done, _ = portcheck_run(tmp_path, "--emulate", "tpu", "--nproc", "2", "collective.py")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == [f"rank {rank}: tpu:0 [3.0, 3.0] gloo" for rank in (0, 1)], (
        done.stdout,
        done.stderr,
    )


def test_it_runs_under_torchrun(tmp_path: Path) -> None:
    write(tmp_path, "collective.py", COLLECTIVE.format(backend='backend="tpu"'))
    torchrun = (
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "portcheck",
    )
    done, _ = portcheck_run(tmp_path, "--emulate", "tpu", "collective.py", command=torchrun)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == [f"rank {rank}: tpu:0 [3.0, 3.0] gloo" for rank in (0, 1)], (
        done.stdout,
        done.stderr,
    )


def test_when_one_process_fails_the_others_are_stopped(tmp_path: Path) -> None:
    write(
        tmp_path,
        "one_fails.py",
        """\
        import os
        import sys
        import time

        if os.environ["RANK"] == "1":
            sys.exit(5)
        time.sleep(100)
        """,
    )
    started = time.monotonic()
    done, report = portcheck_run(tmp_path, "--emulate", "tpu", "--nproc", "2", "one_fails.py")
    assert time.monotonic() - started < 60
    assert done.returncode == 5 and report["exit_code"] == 5
    assert [process["exit_code"] for process in report["processes"]] == [-15, 5]  # rank 0 got SIGTERM


def test_neuron_refuses_a_data_dependent_shape_at_the_user_s_line(tmp_path: Path) -> None:
    write(
        tmp_path,
        "masked.py",
        """\
        import torch

        x = torch.tensor([1.0, -1.0, 2.0], device="neuron")
        positives = x[x > 0]
        print("unreachable")
        """,
    )
    done, report = portcheck_run(tmp_path, "--emulate", "neuron", "masked.py")
    assert done.returncode == 1
    assert "unreachable" not in done.stdout
    assert "masked.py:4: the emulated neuron refused aten::index.Tensor (PC502" in done.stderr
    assert "positives = x[x > 0]" in done.stderr and "Traceback" not in done.stderr
    error = report["processes"][0]["error"]
    assert (error["kind"], error["rule"], error["where"]) == ("data-dependent-shape", "PC502", "masked.py:4")


def test_neuron_refuses_a_slice_bound_read_from_the_device(tmp_path: Path) -> None:
    write(
        tmp_path,
        "sliced.py",
        """\
        import torch

        x = torch.arange(6.0, device="neuron")
        lengths = torch.tensor([2, 4], device="neuron")
        head = x[: lengths.max()]
        """,
    )
    done, report = portcheck_run(tmp_path, "--emulate", "neuron", "sliced.py")
    assert done.returncode == 1
    assert "sliced.py:5: the emulated neuron refused Tensor.__getitem__ (PC505" in done.stderr
    error = report["processes"][0]["error"]
    assert (error["kind"], error["rule"], error["where"]) == ("data-dependent-shape", "PC505", "sliced.py:5")


def test_host_syncs_are_counted_apart_from_data_dependent_ops(tmp_path: Path) -> None:
    write(
        tmp_path,
        "scaled.py",
        """\
        import torch

        x = torch.arange(4.0, device="tpu")
        for step in range(3):
            x = x * float(x.mean())
        """,
    )
    done, report = portcheck_run(tmp_path, "--emulate", "tpu", "scaled.py")
    assert done.returncode == 0, done.stderr
    emulation = report["processes"][0]["emulation"]
    assert (emulation["host_syncs"], emulation["data_dependent_ops"]) == ({"aten::_local_scalar_dense": 3}, {})
    assert "host syncs: aten::_local_scalar_dense x3" in done.stderr


def test_the_program_sees_what_python_gives_it_and_its_exit_code_is_ours(tmp_path: Path) -> None:
    write(
        tmp_path,
        "sub/show.py",
        """\
        import json
        import sys

        import torch

        accelerator = str(torch.accelerator.current_accelerator())
        print(json.dumps([__name__, sys.argv, sys.path[0], accelerator, torch.cuda.is_available()]))
        sys.exit(3)
        """,
    )
    done, report = portcheck_run(tmp_path, "--emulate", "tpu", "sub/show.py", "a", "--nproc=2", "--report", "x")
    assert done.returncode == 3 and report["exit_code"] == 3
    name, argv, path, accelerator, cuda = json.loads(done.stdout)
    assert (name, argv, accelerator, cuda) == (
        "__main__",
        ["sub/show.py", "a", "--nproc=2", "--report", "x"],
        "tpu",
        False,
    )
    assert Path(path) == (tmp_path / "sub").resolve()


def test_a_module_runs_like_python_dash_m(tmp_path: Path) -> None:
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/main.py", "import sys\nprint(__name__, sys.argv[1:], sys.path[0])\n")
    done, report = portcheck_run(tmp_path, "--emulate", "neuron", "-m", "pkg.main", "--config", "small.toml")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["__main__", "['--config',", "'small.toml']", str(tmp_path)]
    assert report["module"] and report["command"] == ["pkg.main", "--config", "small.toml"]


def test_an_uncaught_exception_prints_its_traceback_and_exits_1(tmp_path: Path) -> None:
    write(tmp_path, "fails.py", "def main():\n    raise ValueError('no data')\n\n\nmain()\n")
    done, report = portcheck_run(tmp_path, "--emulate", "tpu", "fails.py")
    assert done.returncode == 1
    assert 'Traceback (most recent call last):\n  File "fails.py", line 5' in done.stderr
    assert "ValueError: no data" in done.stderr and "runpy" not in done.stderr
    error = report["processes"][0]["error"]
    assert (error["kind"], error["op"], error["where"]) == ("exception", "ValueError", "fails.py:2")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--emulate", "gpu", "x.py"], "unknown target 'gpu'"),
        (["--emulate", "cpu", "x.py"], "cpu cannot be emulated"),
        (["--emulate", "tpu", "missing.py"], "can't open file 'missing.py'"),
        (["--emulate", "tpu", "--nproc", "0", "x.py"], "--nproc must be at least 1"),
        (["--emulate", "tpu"], "name the program"),
        (["x.py"], "choose the target with --emulate"),
    ],
)
def test_usage_errors_exit_2_before_any_process_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    write(tmp_path, "x.py", "")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launch.subprocess, "Popen", lambda *a, **k: pytest.fail("a process was started"))
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 2
    assert f"portcheck: error: {message}" in result.stderr


def test_cuda_calls_that_pass_silently_are_reported(tmp_path: Path) -> None:
    write(
        tmp_path,
        "leftovers.py",
        """\
        import torch

        x = torch.ones(2, device="tpu")
        if not torch.cuda.is_available():
            torch.cuda.empty_cache()
        with torch.cuda.amp.autocast():
            y = x * 2
        """,
    )
    done, report = portcheck_run(tmp_path, "--emulate", "tpu", "leftovers.py")
    assert done.returncode == 0, done.stderr
    calls = report["processes"][0]["emulation"]["cuda_calls"]
    assert [(c["op"], c["rule"], c["line"]) for c in calls] == [
        ("torch.cuda.is_available", "PC201", 4),
        ("torch.cuda.empty_cache", "PC204", 5),
        ("torch.cuda.amp.autocast", "PC301", 6),
    ]
    assert "CUDA calls: torch.cuda.is_available (PC201) at leftovers.py:4 x1; " in done.stderr
