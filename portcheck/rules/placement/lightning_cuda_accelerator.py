from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import PurePosixPath

import libcst as cst

from portcheck import configs, filekinds, patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety, Severity
from portcheck.rewrites.edits import Edit, string_like
from portcheck.rule import ERROR, OFF, FileContext, Invalid, Span, Valid
from portcheck.setting_rule import SettingValueRule

_PACKAGES = ("lightning.", "pytorch_lightning.", "lightning_fabric.")
_ENTRY_POINTS = ("Trainer", "Fabric")
# What Lightning's accelerator connector does with each GPU name: "gpu" picks MPS, else CUDA,
# else raises ("No supported gpu backend found!"); "cuda" raises where CUDAAccelerator is not
# available ("`CUDAAccelerator` can not run on your system since the accelerator is not available").
_RUNS_ON = {"cuda": frozenset({"cuda"}), "gpu": frozenset({"cuda", "mps"})}
GPU_ACCELERATORS = frozenset(_RUNS_ON)
CUDA_CLASSES = frozenset({"CUDAAccelerator"})


def _severity(name: str, target: target_data.Target) -> Severity:
    """An error wherever Lightning's own accelerator for the device is not one `name` selects."""
    return OFF if target.lightning_accelerator in _RUNS_ON[name] else ERROR


_SEVERITY = {name: {t: _severity(name, target) for t, target in target_data.all_targets().items()} for name in _RUNS_ON}


def is_lightning_entry(names: frozenset[str]) -> bool:
    """`lightning.Trainer`, `pytorch_lightning.Trainer`, `lightning.fabric.Fabric`..."""
    return any(name.startswith(_PACKAGES) and name.rsplit(".", 1)[-1] in _ENTRY_POINTS for name in names)


def makes_cuda_accelerator(value: cst.BaseExpression, names: Callable[[cst.BaseExpression], frozenset[str]]) -> bool:
    """`CUDAAccelerator()`, by the qualified names `names` gives for a callee."""
    return isinstance(value, cst.Call) and any(name.rsplit(".", 1)[-1] in CUDA_CLASSES for name in names(value.func))


def _accelerator_name(node: cst.CSTNode) -> str | None:
    value = patterns.string_value(node)
    return value.lower() if value is not None and value.lower() in _RUNS_ON else None


class LightningCudaAccelerator(SettingValueRule):
    """## What it does
    Reports a Lightning `Trainer` or `Fabric` told to run on a GPU: `accelerator="cuda"` or
    `"gpu"` (as a keyword, through a name bound once, a parameter default, an argparse option's
    default or a config entry named `accelerator` in a module that uses Lightning),
    `accelerator=CUDAAccelerator()`, and Lightning 1.x's `gpus=` given a device count or list;
    also in a trainer's YAML config (`accelerator: gpu`, `gpus: 0,1` in a `trainer:` section or
    in a `trainer/` config group, as Hydra keeps them; `accelerator: cuda` there is PC101's).

    ## Why is this bad?
    Lightning chooses the device itself from the accelerator name. `"gpu"` means MPS or CUDA
    and, with neither, raises `MisconfigurationException: No supported gpu backend found!`;
    `"cuda"` raises "`CUDAAccelerator` can not run on your system since the accelerator is not
    available". So the script stops at start-up on a TPU or Trainium host, whatever device
    the rest of it was ported to. Lightning has an accelerator of its own only for CPU, CUDA,
    MPS and XLA TPUs (`"tpu"`, which needs torch_xla), plus HPU through lightning-habana.

    ## Example
    ```python
    fabric = L.Fabric(accelerator="cuda", devices=4, precision="bf16-mixed")
    ```

    ## Use instead
    On targets Lightning knows, its name for them (`accelerator="tpu"` under torch_xla,
    `"mps"`, `"hpu"`, `"cpu"`). For TorchTPU and TorchNeuron, which Lightning has no
    accelerator for, drive the device from plain PyTorch (`device = torch.device("tpu")`) or
    through the vendor's integration for Lightning where there is one.

    ## Targets
    An error on every target whose device Lightning's chosen accelerator does not drive:
    everywhere for `"cuda"` but ROCm (torch.cuda is HIP there), and for `"gpu"` everywhere but
    ROCm and MPS. Under a CUDA check (`"gpu" if torch.cuda.is_available() else "cpu"`) it is
    info: the check is the finding.

    ## Fix safety
    Safe, where the target has a Lightning accelerator and the name is written in the setting
    itself: `"cuda"` / `"gpu"` becomes `"tpu"` on xla, `"mps"`, `"hpu"` or `"cpu"` (the script
    raised there before), and `"auto"` with `--device auto`, which keeps CUDA where CUDA is.
    Not fixed: tpu and neuron (no accelerator to name), an accelerator instance, `gpus=`
    (removed in Lightning 2.0: port to `accelerator=` and `devices=`), and a value behind a
    name other code may read.
    """

    code = "PC108"
    name = "lightning-cuda-accelerator"
    message = "{what} makes Lightning run on {device}, {problem}"
    hint = "{advice}"
    severity = {t: max(_SEVERITY["cuda"][t], _SEVERITY["gpu"][t]) for t in target_data.TARGET_ORDER}
    fix_safety = FixSafety.SAFE
    triggers = (b"accelerator", b"gpus")
    file_kinds = (filekinds.PYTHON, filekinds.CONFIG)
    cuda_only = True

    VALID = [
        Valid('import lightning as L\nfabric = L.Fabric(accelerator="auto", devices=1)\n'),
        Valid('import pytorch_lightning as pl\ntrainer = pl.Trainer(accelerator="tpu", devices=8)\n'),
        Valid("import pytorch_lightning as pl\ntrainer = pl.Trainer(gpus=0, max_epochs=1)\n"),
        Valid("import pytorch_lightning as pl\ntrainer = pl.Trainer(gpus=None)\n"),
        # not Lightning: Accelerate's Accelerator, a config of another library
        Valid('from accelerate import Accelerator\naccelerator = Accelerator()\nopts = {"accelerator": "gpu"}\n'),
        Valid("import pytorch_lightning\ndef fit(Trainer, torch):\n    return Trainer(gpus=1)\n"),
        Valid(  # a device chosen by Lightning's "auto", moved on from plain torch
            "import torch as T\nfrom torch import nn\nimport torch.cuda\nfrom torch.nn import functional as F\n"
            'import lightning as L\nfabric = L.Fabric(accelerator="auto")\n'
        ),
        Valid('import lightning as L\nfabric = L.Fabric(accelerator="cuda")\n', options={"targets": ["rocm"]}),
        Valid('import lightning as L\nfabric = L.Fabric(accelerator="gpu")\n', options={"targets": ["mps", "rocm"]}),
        Valid(  # an accelerate config, not a trainer's
            "compute_environment: LOCAL_MACHINE\naccelerator: gpu\n", path="configs/accelerate.yaml"
        ),
        Valid("trainer:\n  accelerator: auto\n  gpus: 0\n", path="configs/train.yaml"),
    ]
    INVALID = [
        Invalid(  # s4's Hydra trainer group, and latent-diffusion's `lightning.trainer` section
            "accelerator: gpu\ndevices: 1\nmax_epochs: 10\n",
            lines=[1],
            path="configs/trainer/default.yaml",
            message="`accelerator: gpu` makes Lightning run on an MPS or CUDA GPU",
        ),
        Invalid("lightning:\n  trainer:\n    benchmark: true\n    gpus: 0,1\n", lines=[4], path="configs/ldm.yaml"),
        # lit-llama's finetuning scripts
        Invalid(
            'import lightning as L\nfabric = L.Fabric(accelerator="cuda", devices=1, precision="bf16-true")\n',
            lines=[2],
            message='accelerator="cuda"',
        ),
        Invalid(
            'import lightning as L\nfabric = L.Fabric(accelerator="cuda", devices=1)\n',
            lines=[2],
            device="cpu",
            fixed='import lightning as L\nfabric = L.Fabric(accelerator="cpu", devices=1)\n',
        ),
        Invalid(
            "from pytorch_lightning import Trainer\ntrainer = Trainer(accelerator='gpu', devices=2)\n",
            lines=[2],
            device="xla",
            fixed="from pytorch_lightning import Trainer\ntrainer = Trainer(accelerator='tpu', devices=2)\n",
        ),
        Invalid(
            "from pytorch_lightning import Trainer\ntrainer = Trainer(accelerator='gpu', devices=2)\n",
            lines=[2],
            device="auto",
            fixed="from pytorch_lightning import Trainer\ntrainer = Trainer(accelerator='auto', devices=2)\n",
        ),
        Invalid(
            "from pytorch_lightning import Trainer\ntrainer = Trainer(accelerator='cuda', devices=1)\n",
            lines=[2],
            device="mps",
            options={"targets": ["cpu"]},
            fixed="from pytorch_lightning import Trainer\ntrainer = Trainer(accelerator='mps', devices=1)\n",
        ),
        # ControlNet's tutorial_train.py: Lightning 1.x
        Invalid(
            "import pytorch_lightning as pl\ntrainer = pl.Trainer(gpus=1, precision=32, callbacks=[logger])\n",
            lines=[2],
            message="`gpus=1`",
        ),
        Invalid("import pytorch_lightning as pl\ntrainer = pl.Trainer(gpus=[0, 1])\n", lines=[2]),
        Invalid(
            "import argparse\nimport lightning.pytorch as pl\nparser = argparse.ArgumentParser()\n"
            'parser.add_argument("--accelerator", default="gpu")\nargs = parser.parse_args()\n'
            "trainer = pl.Trainer(accelerator=args.accelerator)\n",
            lines=[4],
            device="cpu",
            fixed="import argparse\nimport lightning.pytorch as pl\nparser = argparse.ArgumentParser()\n"
            'parser.add_argument("--accelerator", default="cpu")\nargs = parser.parse_args()\n'
            "trainer = pl.Trainer(accelerator=args.accelerator)\n",
        ),
        Invalid(
            "from lightning.fabric import Fabric\nfrom lightning.fabric.accelerators import CUDAAccelerator\n"
            "fabric = Fabric(accelerator=CUDAAccelerator(), devices=1)\n",
            lines=[3],
            message="CUDAAccelerator()",
        ),
        # behind a name: reported where it is written, not rewritten (other code may read it)
        Invalid(
            'import lightning as L\nACCELERATOR = "cuda"\nfabric = L.Fabric(accelerator=ACCELERATOR)\n',
            lines=[2],
            device="cpu",
        ),
        Invalid(
            'import torch\nimport lightning as L\nfabric = L.Fabric(accelerator="gpu" if torch.cuda.is_available() else "cpu")\n',
            lines=[3],
            message="reached only under a CUDA check",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._uses_lightning = b"lightning" in ctx.source
        self._direct: set[int] = set()  # literals written in the setting itself, not behind a name

    def names_setting(self, name: str) -> bool:
        return name == "accelerator" and self._uses_lightning

    def literals(self, expression: cst.CSTNode) -> Iterator[cst.CSTNode]:
        return patterns.value_literals(expression, lambda node: _accelerator_name(node) is not None)

    def check(self, expression: cst.BaseExpression) -> None:
        self._direct.update(id(literal) for literal in self.literals(expression))
        super().check(expression)

    def report_literal(self, literal: cst.CSTNode) -> None:
        name = _accelerator_name(literal)
        assert name is not None
        edit = self._edit(literal, name) if id(literal) in self._direct else None
        self._report(literal, f'accelerator="{name}"', name, edit)

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        if not self._uses_lightning or not is_lightning_entry(self.ctx.qualified_names(node.func)):
            return
        accelerator = patterns.keyword(node, "accelerator")
        made = accelerator.value if accelerator is not None else None
        if made is not None and makes_cuda_accelerator(made, self.ctx.qualified_names):
            self._report(made, "`CUDAAccelerator()`", "cuda", None)
        gpus = patterns.keyword(node, "gpus")
        if gpus is not None and _asks_for_gpus(gpus.value):
            code = cst.Module([]).code_for_node(gpus.value)
            self._report(gpus.value, f"`gpus={code}`", "gpu", None)

    def _edit(self, literal: cst.CSTNode, name: str) -> Edit | None:
        replacement = self.ctx.fix_target.lightning_accelerator
        if not replacement or replacement in _RUNS_ON[name]:
            return None
        return Edit(literal, string_like(literal, replacement), FixSafety.SAFE, f"accelerator -> {replacement!r}")

    def check_text(self, text: str) -> None:
        """A Lightning trainer's config (Hydra's `configs/trainer/*.yaml`, a `trainer:` section):
        `accelerator: gpu` and Lightning 1.x's `gpus: 1`. `accelerator: cuda` is PC101's, as
        any device setting in a config."""
        for setting in configs.settings(text):
            if not _in_trainer_config(setting, self.ctx.path):
                continue
            if setting.key == "accelerator" and not setting.quoted and setting.value.lower() == "gpu":
                self._report_span(setting.span, f"`accelerator: {setting.value}`", "gpu")
            elif setting.key == "gpus" and _lists_gpus(setting.value):
                self._report_span(setting.span, f"`gpus: {setting.value}`", "gpu")

    def _report_span(self, span: Span, what: str, name: str) -> None:
        severity, fields = self._fields(what, name)
        self.report_span(span, severity=severity, **fields)

    def _report(self, node: cst.CSTNode, what: str, name: str, edit: Edit | None) -> None:
        severity, fields = self._fields(what, name)
        self.report(node, severity=severity, edit=edit, **fields)

    def _fields(self, what: str, name: str) -> tuple[dict[str, Severity], dict[str, str]]:
        severity = _SEVERITY[name]
        failing = [t for t in self.ctx.targets if severity[t] > OFF]
        device = "CUDA" if name == "cuda" else "an MPS or CUDA GPU"
        problem = f"and raises MisconfigurationException on {'/'.join(failing) or 'the selected targets'}"
        known = {t: target_data.get(t).lightning_accelerator for t in failing}
        named = [f'"{accelerator}" ({t})' for t, accelerator in known.items() if accelerator]
        missing = [t for t, accelerator in known.items() if not accelerator]
        advice = []
        if named:
            advice.append(f"use Lightning's accelerator for the target: {', '.join(named)}")
        if missing:
            advice.append(
                f"Lightning has no accelerator for {'/'.join(missing)}: run the model on the device "
                "from plain PyTorch (or the vendor's Lightning integration)"
            )
        return severity, {"what": what, "device": device, "problem": problem, "advice": "; ".join(advice)}


def _in_trainer_config(setting: configs.Setting, path: str) -> bool:
    """A setting of a Lightning trainer: in a `trainer:` mapping, or in a file of a `trainer`
    config group (Hydra's `configs/trainer/gpu.yaml`)."""
    return "trainer" in setting.within or "trainer" in PurePosixPath(path).parts[:-1]


def _lists_gpus(value: str) -> bool:
    """`gpus: 1`, `gpus: 0,1`, `gpus: -1` as YAML writes them; not 0, nothing or a variable."""
    text = value.strip().strip("[]")
    return (
        bool(text)
        and text not in ("0", "null", "None")
        and all(part.strip().lstrip("-").isdigit() for part in text.split(",") if part.strip())
    )


def _asks_for_gpus(value: cst.BaseExpression) -> bool:
    """A GPU count other than 0, a list of GPU indexes, or a string of them ("0,1", "-1")."""
    if isinstance(value, cst.Integer):
        return value.value != "0"
    if isinstance(value, cst.UnaryOperation):
        return isinstance(value.expression, cst.Integer)
    if isinstance(value, cst.List):
        return bool(value.elements)
    text = patterns.string_value(value)
    return text is not None and text.strip() not in ("", "0")
