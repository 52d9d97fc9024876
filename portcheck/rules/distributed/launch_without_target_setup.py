from __future__ import annotations

import libcst as cst

from portcheck import targets as target_data
from portcheck.rule import OFF, WARNING, FileContext, Invalid, Rule, Valid

# What starts one worker process per device from Python (torchrun's own entry runs outside the code).
_LAUNCHERS = frozenset(
    {
        "torch.multiprocessing.spawn",
        "torch.multiprocessing.start_processes",
        "torch.multiprocessing.spawn.spawn",
        "torch.multiprocessing.spawn.start_processes",
        "torch.distributed.launcher.elastic_launch",
        "torch.distributed.launcher.api.elastic_launch",
    }
)
_SETUPS = frozenset(t.launch_setup for t in target_data.all_targets().values() if t.launch_setup)


class LaunchWithoutTargetSetup(Rule):
    """## What it does
    Reports where the program starts its distributed workers itself, with
    `torch.multiprocessing.spawn` (`mp.spawn(main_worker, nprocs=ngpus, ...)`),
    `start_processes` (also called through a name bound to it: sam2's `mp_runner =
    torch.multiprocessing.start_processes`, then `mp_runner(...)`) or torchrun's
    `elastic_launch`, and the module
    never calls what the target needs first: TorchTPU's
    `torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=...)`.

    ## Why is this bad?
    TorchTPU's workers find their slice, topology and peers in `TORCH_TPU_*` environment
    variables (and `MASTER_ADDR`, `MASTER_PORT`, `NNODES`, `NODE_RANK` on several hosts) that
    `set_tpu_launch_env` sets in the parent; the launch then works with torchrun,
    `elastic_launch` or `mp.spawn`. Without it, each spawned process starts with none of them,
    and the process group cannot form over the TPU chips.

    ## Example
    ```python
    import torch.multiprocessing as mp
    mp.spawn(main_worker, nprocs=ngpus_per_node, args=(args,))
    ```

    ## Use instead
    ```python
    import torch.multiprocessing as mp
    torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=nprocs)
    mp.spawn(main_worker, nprocs=nprocs, args=(args,))
    ```

    ## Targets
    A warning where the target data names a launch setup (`launch-setup`: tpu); off elsewhere,
    and where the module calls that setup itself. Workers started outside Python (`torchrun`
    in a shell script) are not seen.

    ## Fix safety
    No automatic fix: the number of processes per host is the launch's to choose.
    """

    code = "PC408"
    name = "launch-without-target-setup"
    message = "`{launcher}` starts the worker processes, but this module never calls {setups} before"
    hint = "call {setups} in the parent process before the workers start"
    severity = {name: WARNING if t.launch_setup else OFF for name, t in target_data.all_targets().items()}
    triggers = (b"spawn", b"start_processes", b"elastic_launch")
    watched_names = tuple(sorted(_LAUNCHERS | _SETUPS))

    VALID = [
        Valid(
            "import torch\nimport torch.multiprocessing as mp\n"
            "torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=4)\nmp.spawn(main_worker, nprocs=4)\n"
        ),
        Valid("import torch.multiprocessing as mp\nmp.spawn(main_worker, nprocs=4)\n", options={"targets": ["neuron"]}),
        Valid("import multiprocessing as mp\nctx = mp.get_context('spawn')\np = ctx.Process(target=work)\n"),
        Valid("def launch(torch, fn):\n    torch.multiprocessing.spawn(fn, nprocs=2)\n"),
    ]
    INVALID = [
        Invalid(  # MoCo, SimSiam: one process per CUDA GPU
            "import torch\nimport torch.multiprocessing as mp\ndef main(args):\n"
            "    mp.spawn(main_worker, nprocs=torch.cuda.device_count(), args=(args,))\n",
            lines=[4],
            message="set_tpu_launch_env",
        ),
        Invalid(  # sam2: the launcher bound to a name first, then called
            "import torch\nmp_runner = torch.multiprocessing.start_processes\n"
            "mp_runner(single_proc_run, args=(0,), nprocs=8, start_method='spawn')\n",
            lines=[3],
        ),
        Invalid("from torch.multiprocessing import spawn as start\nstart(work, nprocs=2)\n", lines=[2]),
        Invalid("import torch as T\nT.multiprocessing.spawn(work, nprocs=2)\n", lines=[2]),
        Invalid("from torch import multiprocessing\nmultiprocessing.start_processes(work, nprocs=2)\n", lines=[2]),
        Invalid(
            "from torch.distributed.launcher.api import LaunchConfig, elastic_launch\n"
            "elastic_launch(LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=8), train)(cfg)\n",
            lines=[2],
        ),
        Invalid(
            "import torch.multiprocessing\ntorch.multiprocessing.spawn(work, nprocs=2)\n",
            lines=[2],
            options={"targets": ["tpu", "neuron"]},
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._launches: list[tuple[cst.Name | cst.Attribute, str, tuple[cst.CSTNode, ...]]] = []
        self._set_up: set[str] = set()

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        if qualified_name in _SETUPS:
            self._set_up.add(qualified_name)
        elif qualified_name in _LAUNCHERS and not isinstance(self.ctx.parent, (cst.ImportAlias, cst.Assign)):
            self._launches.append((node, qualified_name, self.ctx.chain(node)))  # bound to a name: at its calls

    def visit_Call(self, node: cst.Call) -> None:
        """A call of a name bound to a launcher (sam2's `mp_runner(single_proc_run, ...)`)."""
        if type(node.func) is not cst.Name:
            return
        for value in self.ctx.assigned_values(node.func):
            launchers = sorted(self.ctx.qualified_names(value) & _LAUNCHERS)
            if launchers:
                self._launches.append((node.func, launchers[0], self.ctx.chain(node.func)))
                return

    def leave_Module(self, node: cst.Module) -> None:
        needed = {name: target_data.get(name).launch_setup for name in self.ctx.targets}
        missing = {name: setup for name, setup in needed.items() if setup and setup not in self._set_up}
        if not missing:
            return
        setups = " / ".join(sorted({f"`{setup}(nproc_per_node=...)`" for setup in missing.values()}))
        assert isinstance(self.severity, dict)
        severity = {name: level if name in missing else OFF for name, level in self.severity.items()}
        for launch, launcher, chain in self._launches:
            self.reports.append(
                self.report_here(launch, chain=chain, severity=severity, launcher=launcher, setups=setups)
            )
