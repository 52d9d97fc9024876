from __future__ import annotations

import libcst as cst

from portcheck import patterns, project
from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.project import Project
from portcheck.rule import OFF, WARNING, Invalid, Rule, Valid, per_target
from portcheck.targets.library_defaults import CudaDefault, table

_ALWAYS = "works on CUDA whatever it is given"
_ANY_ARGUMENTS = (
    "do its work with torch's own API and the target's device: torch.distributed.init_process_group with the"
    " target's backend, the model moved to the program's device"
)


def _severities(api: CudaDefault) -> dict[str, Severity]:
    return {name: OFF if t.keeps_cuda_api else api.severity for name, t in target_data.all_targets().items()}


class LibraryCudaDefault(Rule):
    """## What it does
    Reports calls of other packages' functions and classes whose device parameter defaults to
    CUDA, made without giving it: Ultralytics' `autocast(enabled)` (device "cuda"), timm's
    `NativeScaler()`, MMSegmentation's `init_segmentor` / `init_model`, MMDetection's
    `init_detector` and MMPose's `init_pose_model` / `init_model` (device "cuda:0"), timm's
    `create_loader` (its prefetcher, on by default, moves batches to CUDA; not with
    `use_prefetcher=False`), and
    those that use CUDA whatever they are given: MMCV 1.x's `init_dist` (it sets the CUDA
    device), MMDetection 2.x's `train_detector` / MMSegmentation 0.x's `train_segmentor`
    (they move the model to CUDA) and BasicSR's `train_pipeline` (Real-ESRGAN's, GFPGAN's
    training entry: it counts CUDA devices to decide where to train); also
    through the repository's own modules that re-export them (yolov5's `utils.torch_utils`
    binds `smart_amp_autocast` to Ultralytics' `autocast`). The table is
    portcheck/targets/library_defaults.toml.

    ## Why is this bad?
    Nothing in the call says "cuda", so changing the program's device leaves it on CUDA: the
    MM* loaders build the model on `cuda:0` and raise without CUDA, and the AMP wrappers
    enter an autocast or a GradScaler for CUDA, which silently does nothing for tensors on
    the target (the run stays in float32, or drops loss scaling).

    ## Example
    ```python
    from mmseg.apis import init_segmentor
    model = init_segmentor(cfg, checkpoint)
    ```

    ## Use instead
    ```python
    model = init_segmentor(cfg, checkpoint, device=device)
    ```
    For the AMP wrappers, `torch.autocast(device.type, dtype=torch.bfloat16)` and no loss
    scaler on bfloat16 targets.

    ## Targets
    The table's severity (an error where the call raises, a warning where it silently does
    nothing) on every target but ROCm, where HIP answers to "cuda".

    ## Fix safety
    No automatic fix: the device to pass is the program's, and an AMP wrapper also needs the
    target's dtype, which it does not take.
    """

    code = "PC109"
    name = "library-cuda-default"
    message = "`{called}` {works}: {what}"
    hint = "pass `{parameter}=` the program's device, or use the torch API with the target's device type"
    severity = per_target(WARNING, rocm=OFF)  # each report carries its API's own (`_severities`)
    triggers = tuple(sorted({name.rsplit(".", 1)[-1].encode() for name in table()}))

    VALID = [
        Valid(  # lit-llama: the strategy's class only asked about
            "import torch\nfrom lightning.fabric.strategies import DeepSpeedStrategy\n"
            "def save(fabric):\n    return isinstance(fabric.strategy, DeepSpeedStrategy)\n"
        ),
        Valid(
            "import torch\nfrom mmseg.apis import init_segmentor\nmodel = init_segmentor(cfg, ckpt, device=device)\n"
        ),
        Valid(  # timm's loader without its prefetcher, or given the device (timm 0.9 on)
            "import torch\nfrom timm.data import create_loader\na = create_loader(ds, (3, 224, 224), 64, use_prefetcher=False)\n"
            "b = create_loader(ds, (3, 224, 224), 64, device=device)\n"
        ),
        Valid("import torch\nfrom mmdet.apis import init_detector\nmodel = init_detector(cfg, ckpt, 'cpu')\n"),
        Valid("import torch\nfrom torch.amp import autocast\nwith autocast('cpu'):\n    pass\n"),
        Valid("def load(torch, init_segmentor, cfg):\n    return init_segmentor(cfg)\n"),
        Valid(  # what a dict of options may hold is not read
            "import torch\nfrom timm.utils import NativeScaler\nscaler = NativeScaler(**scaler_options)\n"
        ),
    ]
    INVALID = [
        Invalid(  # stable-audio-tools: Lightning's DeepSpeed strategy, chosen by an option
            "import torch\nimport pytorch_lightning as pl\nif args.strategy == 'deepspeed':\n"
            "    from pytorch_lightning.strategies import DeepSpeedStrategy\n"
            "    strategy = DeepSpeedStrategy(stage=2, contiguous_gradients=True)\n",
            lines=[5],
            message="Lightning's DeepSpeed strategy runs only with its CUDA accelerator",
        ),
        Invalid(  # GFPGAN's inference script: the background upsampler takes CUDA or the CPU
            "import torch\nfrom realesrgan import RealESRGANer\n"
            "bg_upsampler = RealESRGANer(scale=2, model_path=path, model=model, tile=400, half=True)\n",
            lines=[3],
            message="unless given `device=`",
        ),
        Invalid(  # poolformer's train.py: the prefetcher is on unless --no-prefetcher
            "import torch\nfrom timm.data import create_loader\nloader_train = create_loader(\n"
            "    dataset_train, input_size=(3, 224, 224), batch_size=128, is_training=True,\n"
            "    use_prefetcher=args.prefetcher,\n)\n",
            lines=[3],
            message="moves each batch to CUDA on a CUDA stream",
        ),
        Invalid(  # dinov2's segmentation notebook; DeiT's training script
            "import torch\nfrom mmseg.apis import init_segmentor\nfrom timm.utils import NativeScaler\n"
            "model = init_segmentor(cfg)\nloss_scaler = NativeScaler()\n",
            lines=[4, 5],
        ),
        Invalid(  # Real-ESRGAN's training entry
            "import os.path as osp\nimport torch\nfrom basicsr.train import train_pipeline\n"
            "if __name__ == '__main__':\n    root_path = osp.abspath(osp.join(__file__, osp.pardir, osp.pardir))\n"
            "    train_pipeline(root_path)\n",
            lines=[6],
            message="works on CUDA whatever it is given",
        ),
        Invalid(  # XCiT's detection and segmentation tools (the Swin-Transformer template)
            "import torch\nfrom mmcv.runner import init_dist\nfrom mmdet.apis import train_detector\n"
            "init_dist(args.launcher, **cfg.dist_params)\ntrain_detector(model, datasets, cfg, distributed=True)\n",
            lines=[4, 5],
            message="works on CUDA whatever it is given",
        ),
        Invalid(
            "import torch as T\nimport mmdet.apis as apis\nfrom torch.nn import Linear as L\nfrom torch import nn\n"
            "import torch.nn\nfrom ultralytics.utils.torch_utils import autocast as amp_autocast\n"
            "model = apis.init_detector(cfg, ckpt)\nwith amp_autocast(True):\n    pass\n",
            lines=[7, 8],
            message="unless given `device=`",
        ),
    ]

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        """The names the repository's modules re-export the table's APIs under."""
        return tuple(sorted({name.rsplit(".", 1)[-1].encode() for name, _ in known.aliases}))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        """In the first pass, note what a module-level import binds to one of the table's APIs
        (`from ultralytics.utils.torch_utils import autocast as smart_amp_autocast`): other
        modules may import it from here."""
        if self.ctx.project.complete or node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        if any(isinstance(parent, (cst.FunctionDef, cst.ClassDef)) for parent in self.ctx.ancestors):
            return
        module = patterns.dotted(node.module)
        for alias in node.names:
            target = f"{module}.{patterns.dotted(alias.name)}"
            local = alias.asname.name if alias.asname is not None else alias.name
            if target in table() and isinstance(local, cst.Name) and self.ctx.module.name:
                self.record(project.ALIAS, f"{self.ctx.module.name}.{local.value}", node, target=target)

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        known = self.ctx.project
        if known.complete:  # through a re-export; the first pass reported the table's own names
            apis = sorted(filter(None, (known.alias_target(name) for name in names)))
        else:
            apis = sorted(name for name in names if name in table())
        if not apis or known.is_local(apis[0]):
            return  # GFPGAN's own `GFPGANer`: its default is reported where the repository writes it
        api = table()[apis[0]]
        called = patterns.dotted(node.func) or api.qualified
        switch = patterns.keyword(node, api.unless) if api.unless else None
        if switch is not None and isinstance(switch.value, cst.Name) and switch.value.value == "False":
            return  # `create_loader(..., use_prefetcher=False)`: no CUDA work
        if not api.parameter:  # CUDA whatever it is given
            self.report(
                node.func, severity=_severities(api), hint=_ANY_ARGUMENTS, called=called, works=_ALWAYS, what=api.what
            )
            return
        given = patterns.keyword(node, api.parameter) is not None or any(arg.star for arg in node.args)
        positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
        if given or len(positional) > api.position:
            return
        works = f'works on "{api.default}" unless given `{api.parameter}=`'
        self.report(
            node.func, severity=_severities(api), called=called, works=works, parameter=api.parameter, what=api.what
        )
