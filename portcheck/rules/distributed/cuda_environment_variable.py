from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.rule import INFO, OFF, WARNING, Invalid, Rule, Valid, per_target

_VISIBILITY = "CUDA_VISIBLE_DEVICES"
_NO_EFFECT = frozenset(
    {"CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_ORDER", "PYTORCH_CUDA_ALLOC_CONF", "CUBLAS_WORKSPACE_CONFIG"}
)


class CudaEnvironmentVariable(Rule):
    """## What it does
    Reports CUDA and NCCL environment variables read or written from Python:
    `CUDA_VISIBLE_DEVICES`, `NCCL_*`, `CUDA_LAUNCH_BLOCKING`, `PYTORCH_CUDA_ALLOC_CONF`,
    `CUBLAS_WORKSPACE_CONFIG`, `CUDA_DEVICE_ORDER` (any string literal naming them).

    ## Why is this bad?
    Other backends ignore them. A launcher that pins each process to a device with
    `os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)` pins nothing on a TPU or Trainium host,
    so every process may grab the same device; NCCL tuning variables silently do nothing.

    ## Example
    ```python
    os.environ["CUDA_VISIBLE_DEVICES"] = str(local_rank)
    ```

    ## Use instead
    The target's own mechanism: Trainium `NEURON_RT_VISIBLE_CORES`; TorchTPU
    `torch.tpu.distributed.set_tpu_launch_env(...)`; XLA `TPU_VISIBLE_CHIPS` and
    `TPU_PROCESS_BOUNDS`; Ascend `ASCEND_RT_VISIBLE_DEVICES`; Intel GPUs `ZE_AFFINITY_MASK`;
    Gaudi `HABANA_VISIBLE_MODULES`. Better, pass the device index explicitly
    (`torch.accelerator.set_device_index`, `init_process_group(device_id=...)`).

    ## Targets
    A warning for device visibility and NCCL settings, info for debugging and allocator
    switches that just stop having an effect, and for a fixed choice of GPUs
    (`os.environ["CUDA_VISIBLE_DEVICES"] = "0"`), which pins no process to its own device;
    off on ROCm, which honours them.

    ## Fix safety
    No automatic fix. An environment variable is process state that any library, launcher or
    child process may read, so removing a line that sets or reads it cannot be shown to change
    nothing; and the targets' own controls (NeuronCore ranges, TorchTPU's launch helper, XLA's
    chip bounds) do not map one to one onto a list of CUDA device indices. Such settings
    usually live in launch scripts too.
    """

    code = "PC404"
    name = "cuda-environment-variable"
    message = "`{variable}` is read by CUDA or NCCL only; other backends ignore it"
    hint = "{advice}"
    severity = per_target(WARNING, rocm=OFF)
    triggers = (b"CUDA_", b"NCCL_", b"CUBLAS_")

    VALID = [
        Valid('import os\nos.environ["NEURON_RT_VISIBLE_CORES"] = "0-3"\n'),
        Valid('print("set CUDA_VISIBLE_DEVICES to choose a GPU")\n'),
        Valid('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n', options={"targets": ["rocm"]}),
        Valid("def f(torch, os):\n    return os.environ.get('HOME')\n"),
    ]
    INVALID = [
        Invalid(  # yolov5: hiding every GPU for a CPU run
            'import os\nimport torch\nif cpu:\n    os.environ["CUDA_VISIBLE_DEVICES"] = "-1"\n',
            lines=[4],
            message="other backends ignore it",
        ),
        Invalid('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = str(rank)\n', lines=[2]),
        Invalid('import os\nimport torch as T\ndebug = os.getenv("CUDA_LAUNCH_BLOCKING") == "1"\n', lines=[3]),
        Invalid(
            'from os import environ\nfrom torch import cuda\nenviron.setdefault("NCCL_DEBUG", "INFO")\n', lines=[3]
        ),
        Invalid(
            'from torch.cuda import device_count as n\nimport torch.cuda\nenv = {"CUDA_VISIBLE_DEVICES": ",".join(ids)}\n',
            lines=[3],
        ),
        Invalid('import torch\nimport os\nif "PYTORCH_CUDA_ALLOC_CONF" in os.environ:\n    pass\n', lines=[3]),
        Invalid(
            'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\nos.environ.setdefault("CUDA_VISIBLE_DEVICES", "0,1")\n',
            lines=[2, 3],
            message="CUDA_VISIBLE_DEVICES",
        ),
    ]

    def _fixed_choice(self, node: cst.SimpleString) -> bool:
        """`os.environ["CUDA_VISIBLE_DEVICES"] = "0"` (or `setdefault(..., "0,1")`): one fixed
        choice of GPUs, which pins nothing per process, unlike `str(rank)`."""
        ancestors = self.ctx.ancestors
        for parent, child in zip(reversed(ancestors), (node, *reversed(ancestors))):
            if isinstance(parent, cst.Assign):
                return child is not parent.value and _device_list(parent.value)
            if isinstance(parent, cst.Call):
                value = patterns.positional(parent, 1)
                return patterns.method_name(parent) == "setdefault" and value is not None and _device_list(value.value)
            if isinstance(parent, cst.BaseStatement):
                return False
        return False

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = patterns.string_value(node)
        if value is None:
            return
        if value == _VISIBILITY and self._fixed_choice(node):
            self.report(
                node,
                severity=per_target(INFO, rocm=OFF),
                variable=value,
                advice="drop it for other targets: it picks fixed CUDA devices, and the target's process uses its own",
            )
        elif value == _VISIBILITY or value.startswith("NCCL_") and value[5:].isupper():
            self.report(node, variable=value, advice=_visibility_advice(self.ctx.targets, value))
        elif value in _NO_EFFECT:
            self.report(
                node,
                severity=per_target(INFO, rocm=OFF),
                variable=value,
                advice="drop it for other targets; it only affects CUDA debugging or allocation",
            )


def _device_list(node: cst.BaseExpression) -> bool:
    """`"0"`, `"0,1"`, `"-1"` (none): a literal list of device indexes."""
    value = patterns.string_value(node)
    return (
        value is not None and value != "" and all(part.strip().removeprefix("-").isdigit() for part in value.split(","))
    )


def _visibility_advice(selected: tuple[str, ...], variable: str) -> str:
    if variable != _VISIBILITY:
        return "tune the target's collective library instead (its own variables), or drop it"
    choices = [
        f"{name}: {target.visibility_env}"
        for name in selected
        if (target := target_data.get(name)).visibility_env and not target.keeps_cuda_api
    ]
    return "use the target's visibility control (" + "; ".join(choices) + "), or pass the device index explicitly"
