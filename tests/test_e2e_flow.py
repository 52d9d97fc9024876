"""End to end, where the device flows through the program: an index, a rank, a config string.

The programs under tests/fixtures/e2e/ here are the common public shapes of CUDA training code:
the DDP tutorial's single-GPU baseline (`device = 0`), its mp.spawn and torchrun versions (the
rank or LOCAL_RANK is the device, a snapshot is resumed with map_location=f"cuda:{id}"), and a
nanoGPT-style trainer (`device = 'cuda'`, `device_type`, autocast and GradScaler chosen from it).
ported/ holds each one ported by hand. Each original fails on the CPU-only torch build; after
`fix --device cpu` and `fix --device auto` each must run there and print exactly what the hand
port prints. For tpu and neuron, which CI cannot run, the fixed code is checked statically and,
for the trainer, its configuration is evaluated as a host with that device would evaluate it.

Shared helpers come from test_e2e_fix (pytest puts tests/ on sys.path: rootdir-relative
"prepend" imports, no tests/__init__.py).
"""

from __future__ import annotations

import ast
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest
from test_e2e_fix import FIXTURES, _free_port, fixable_errors_left, fixed_copy

from portcheck import api
from portcheck.config import Config

torch = pytest.importorskip("torch")

# What each original raises on CPU torch. ddp_spawn.py spawns torch.cuda.device_count() == 0
# workers, which mp.spawn accepts silently; the parent then finds no checkpoint.
PROGRAMS = {
    "ddp_single_gpu.py": "module 'torch._C' has no attribute '_cuda_setDevice'",
    "ddp_spawn.py": "No such file or directory: 'checkpoint.pt'",
    "ddp_torchrun.py": "module 'torch._C' has no attribute '_cuda_setDevice'",
    "gpt_trainer.py": "Torch not compiled with CUDA enabled",
}
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
# How each program runs: one command, or for ddp_torchrun.py a 2-epoch job (a snapshot every
# epoch), then the same job asked for 4 epochs, which resumes from the snapshot at epoch 2.
COMMANDS = {
    "ddp_torchrun.py": [[*TORCHRUN, "ddp_torchrun.py", "2", "1"], [*TORCHRUN, "ddp_torchrun.py", "4", "1"]],
}
TIMEOUT_S = 120


# Gloo on a loaded 2-core host now and then aborts a worker while it exits, after its work is
# done ("terminate called without an active exception", SIGABRT): a teardown race in torch, not
# in the program. Such a run is started over from a clean directory, up to four times: under the
# parallel suite two aborts in a row were seen (a fresh-clone CI run, 2026-12-03), and three
# (the hand port of ddp_torchrun.py, 2026-12-05).
GLOO_TEARDOWN_ABORT = "terminate called without an active exception"
GLOO_ATTEMPTS = 5


def run_flow(path: Path) -> subprocess.CompletedProcess[str]:
    """Run the program in its own directory (it writes checkpoints there), again if gloo
    aborted at teardown (see GLOO_TEARDOWN_ABORT)."""
    pristine = {entry.name for entry in path.parent.iterdir()}
    done = _run_commands(path)
    for _ in range(GLOO_ATTEMPTS - 1):
        if done.returncode == 0 or GLOO_TEARDOWN_ABORT not in done.stderr:
            break
        for entry in path.parent.iterdir():
            if entry.name not in pristine and entry.is_file():
                entry.unlink()  # the snapshot, so that the first launch starts afresh
        done = _run_commands(path)
    return done


def _run_commands(path: Path) -> subprocess.CompletedProcess[str]:
    """The program's commands in order, stopping at the first failure: the concatenated stdout
    and stderr of those that ran, and the last exit code."""
    # One intra-op thread, as torchrun gives its workers: the programs are tiny, and several run at
    # once under pytest-xdist, where OpenMP threads spinning on shared cores made them 5x slower.
    env = {**os.environ, "MASTER_PORT": _free_port(), "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    env["TMPDIR"] = str(path.parent)  # torchrun's log folders go with the run, not into /tmp
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR"):
        env.pop(name, None)
    stdout, stderr, returncode = "", "", 0
    for command in COMMANDS.get(path.name, [[sys.executable, path.name]]):
        done = subprocess.run(command, cwd=path.parent, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        stdout, stderr, returncode = stdout + done.stdout, stderr + done.stderr, done.returncode
        if returncode != 0:
            break
    return subprocess.CompletedProcess(command, returncode, stdout, stderr)


def run_copy(source: Path) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as directory:
        copy = Path(directory) / source.name
        shutil.copyfile(source, copy)
        return run_flow(copy)


@functools.cache
def hand_ported_output(name: str) -> str:
    done = run_copy(FIXTURES / "ported" / name)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_original_fails_on_cpu_torch(name: str) -> None:
    done = run_copy(FIXTURES / name)
    assert done.returncode != 0
    assert PROGRAMS[name] in done.stderr


@pytest.mark.parametrize("device", ["cpu", "auto"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_fixed_program_runs_and_matches_the_hand_port(tmp_path: Path, name: str, device: str) -> None:
    fixed = fixed_copy(tmp_path, name, device)
    done = run_flow(fixed)
    assert done.returncode == 0, f"{fixed.read_text()}\n{done.stderr[-4000:]}"
    assert done.stdout == hand_ported_output(name)


@pytest.mark.parametrize("device", ["tpu", "neuron"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_fixed_program_is_clean_of_fixable_errors_for_the_target(tmp_path: Path, name: str, device: str) -> None:
    assert fixable_errors_left(fixed_copy(tmp_path, name, device), device) == []


# --- guards -----------------------------------------------------------------------------------


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def cuda_calls_under_accelerator_guards(source: str) -> list[str]:
    """`torch.cuda.*` uses in the body of an `if` whose test asks `torch.accelerator` (e.g. is_available()).

    Such a guard is true on a TPU or Trainium host, where `torch.cuda.*` raises: a fixer that
    rewrites the guard must rewrite (or drop) what it guards too. Spelled `torch.cuda` (the
    fixtures do not alias torch).
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.If):
            continue
        if not any(isinstance(n, ast.Attribute) and "accelerator" in _dotted(n) for n in ast.walk(node.test)):
            continue
        for statement in node.body:
            for n in ast.walk(statement):
                if isinstance(n, ast.Attribute) and _dotted(n).startswith("torch.cuda."):
                    found.append(f"{n.lineno}: {ast.unparse(statement).splitlines()[0]}")
                    break
    return found


@pytest.mark.parametrize("device", ["auto", "tpu", "neuron"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_no_cuda_call_is_left_under_an_accelerator_guard(tmp_path: Path, name: str, device: str) -> None:
    fixed = fixed_copy(tmp_path, name, device)
    assert cuda_calls_under_accelerator_guards(fixed.read_text()) == []


def test_the_guard_check_sees_a_rewritten_guard_with_its_cuda_body() -> None:
    source = "import torch\nif torch.accelerator.is_available():\n    p = torch.cuda.get_device_properties(0)\n"
    assert cuda_calls_under_accelerator_guards(source) == ["3: p = torch.cuda.get_device_properties(0)"]
    assert cuda_calls_under_accelerator_guards(source.replace("accelerator", "cuda", 1)) == []


# --- the trainer's configuration on a simulated TPU / Trainium / XPU host ------------------------


class _Device:
    """torch.device as the target's host spells it; CPU torch rejects "tpu" and "neuron"."""

    def __init__(self, spec: object, index: int | None = None) -> None:
        if isinstance(spec, (_Device, torch.device)):
            self.type, self.index = spec.type, spec.index
            return
        kind, _, number = str(spec).partition(":")
        self.type, self.index = kind, int(number) if number else index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (_Device, torch.device)) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))


class _Autocast:
    def __init__(self, device_type: str, dtype: torch.dtype | None = None, enabled: bool = True, **_: object):
        self.device_type, self.dtype, self.enabled = str(device_type), dtype, enabled


class _Namespace(types.SimpleNamespace):
    def __getattr__(self, name: str) -> object:
        raise AttributeError(f"not simulated on the target host: {name}")


def simulated_torch(device_type: str) -> types.ModuleType:
    capability = {"supported_dtypes": {torch.float32, torch.float16, torch.bfloat16}}
    accelerator = _Namespace(
        is_available=lambda: True,
        current_accelerator=lambda check_available=False: _Device(device_type),
        device_count=lambda: 1,
        current_device_index=lambda: 0,
        get_device_capability=lambda device=None: capability,
    )
    device_module = _Namespace(is_bf16_supported=lambda *args, **kwargs: True, device_count=lambda: 1)
    overrides = {
        "device": _Device,
        "accelerator": accelerator,
        "amp": _Namespace(autocast=_Autocast),
        "autocast": _Autocast,
        "get_device_module": lambda device=None: device_module,
        device_type: device_module,
    }

    class TargetHostTorch(types.ModuleType):
        def __getattr__(self, name: str) -> object:
            return overrides[name] if name in overrides else getattr(torch, name)

    return TargetHostTorch("torch")


def _assigned_names(statement: ast.stmt) -> list[str] | None:
    """The names a plain `a = ...`, `a = b = ...` or `a: T = ...` binds; None for any other statement."""
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets = [statement.target]
    else:
        return None
    return [t.id for t in targets] if all(isinstance(t, ast.Name) for t in targets) else None


def trainer_configuration(source: str, device_type: str) -> dict[str, object]:
    """The trainer's configuration names as a host with one `device_type` device and no CUDA binds them."""
    namespace: dict[str, object] = {"__name__": "gpt_trainer_config"}
    fake_torch = simulated_torch(device_type)
    for statement in ast.parse(source).body:
        code = compile(ast.Module([statement], type_ignores=[]), "<config>", "exec")
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            try:
                exec(code, namespace)
            except ModuleNotFoundError:  # the target's own package (torch_tpu...), absent here
                for alias in statement.names:
                    namespace[(alias.asname or alias.name).split(".")[0]] = _Namespace()
            namespace["torch"] = fake_torch
            continue
        names = _assigned_names(statement)
        if names is None and not isinstance(statement, ast.FunctionDef):
            continue
        try:
            exec(code, namespace)
        except Exception as error:
            raise AssertionError(f"line {statement.lineno}: {ast.unparse(statement)}\n  raises {error!r}") from error
        if names and "ctx" in names:
            return namespace
    raise AssertionError("no module-level `ctx = ...`")


def check_autocasts_in_bfloat16(source: str, device_type: str) -> None:
    config = trainer_configuration(source, device_type)
    lines = "\n".join(line for line in source.splitlines() if line.startswith(("device", "dtype", "ptdtype", "ctx")))
    assert config["device_type"] == device_type, lines
    assert config["dtype"] == "bfloat16", lines
    assert config["ptdtype"] is torch.bfloat16, lines
    ctx = config["ctx"]
    assert isinstance(ctx, _Autocast), f"ctx is {ctx!r}, not an autocast\n{lines}"
    assert (ctx.device_type, ctx.dtype, ctx.enabled) == (device_type, torch.bfloat16, True), lines


# (fix --device, the simulated host's device, --unsafe-fixes). Under auto the bfloat16 check
# becomes `torch.bfloat16 in get_device_capability()["supported_dtypes"]`, which the CUDA API
# table calls unsafe (what a device stores is not what it computes fast): without
# --unsafe-fixes the check and the CUDA guard before it are kept together (float16 elsewhere).
HOSTS = [("tpu", "tpu", False), ("neuron", "neuron", False), ("auto", "xpu", True)]


@pytest.mark.parametrize("device, host, unsafe", HOSTS)
def test_the_fixed_trainer_autocasts_in_bfloat16_on_the_target(
    tmp_path: Path, device: str, host: str, unsafe: bool
) -> None:
    """Fixed for `device`, the trainer's configuration evaluated on a `host` device autocasts there in bfloat16.

    gpt_trainer.py decides everything at module level, nanoGPT style:
        device = 'cuda'; dtype = 'bfloat16' if <CUDA bf16 support> else 'float16'
        device_type = 'cuda' if 'cuda' in device else 'cpu'; ptdtype = {...}[dtype]
        ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=..., dtype=ptdtype)
    Fixed for tpu or neuron, it must autocast with that device type in bfloat16 (the target's
    autocast default is float16, which it does not run natively). Fixed for auto, on a host with
    another accelerator that supports bfloat16 (XPU here), it must do the same with that
    accelerator's type, as the original does on a bfloat16-capable GPU.

    None of these hosts is here, and running the whole program would need one. Matching the
    fixed spelling with regexes would be brittle (the fixer may write `device = 'tpu'`, a
    torch.accelerator expression, a new DEVICE binding...), so the configuration is evaluated
    as that host would evaluate it (trainer_configuration): the module's top-level imports, defs
    and plain `name = ...` assignments, in order, up to the one that binds `ctx`; the argv
    override loop, the seeds, the backends flags and the properties block are statements of
    other kinds and are skipped. `torch` there is torch on a host with one `host` device and
    no CUDA (the CPU build's own torch.cuda): torch.accelerator reports that device with
    bfloat16 support, torch.device accepts its type, torch.amp.autocast records its arguments.
    The hand port passes this check and the original fails it (the next test), so the
    simulation is neither vacuous nor stricter than a correct port needs.
    """
    fixed = tmp_path / "gpt_trainer.py"
    shutil.copyfile(FIXTURES / "gpt_trainer.py", fixed)
    report = api.fix_paths([fixed], Config(root=tmp_path), device, unsafe=unsafe)
    assert not report.errors and not any(outcome.error for outcome in report.outcomes)
    check_autocasts_in_bfloat16(fixed.read_text(), host)


@pytest.mark.parametrize("host", sorted({host for _, host, _ in HOSTS}))
def test_the_simulated_host_passes_the_hand_port_and_fails_the_original(host: str) -> None:
    check_autocasts_in_bfloat16((FIXTURES / "ported" / "gpt_trainer.py").read_text(), host)
    with pytest.raises(AssertionError):
        check_autocasts_in_bfloat16((FIXTURES / "gpt_trainer.py").read_text(), host)
