from __future__ import annotations

import re
from collections.abc import Iterable

import libcst as cst

from portcheck import configs, filekinds, patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety
from portcheck.rewrites import edits
from portcheck.rewrites.edits import Edit
from portcheck.rule import ERROR, OFF, FileContext, Invalid, Valid, per_target
from portcheck.setting_rule import SettingValueRule
from portcheck.targets import library_devices

_INDEXED_CUDA = re.compile(r"cuda:\d+")
_DEVICE_FIRST_ARGUMENT = frozenset({"torch.device", "torch.set_default_device", "torch.Generator"})
# Calls another rule owns: AMP's and device meshes' device types, and the APIs that take only
# some device types (PC110), where the target's would raise.
_OWNED_ELSEWHERE = patterns.AMP_DEVICE_CALLS | patterns.DEVICE_MESH_CALLS | frozenset(library_devices.table())


class CudaDeviceString(SettingValueRule):
    """## What it does
    Reports `"cuda"`, `"cuda:N"` and `f"cuda:{i}"` where they are used as a device: in
    `torch.device(...)`, `.to(...)`, any `device=` keyword, `torch.set_default_device`, the
    default of a `device` parameter, `--device` option (argparse's or click's) or dataclass field, an assignment to a
    name, attribute or dict key called `device`, and a string bound to a name that is later
    used as a device, or a value of a dict bound to a name that such a use looks up
    (`t5_device[size]`); in YAML configs, a key named for a device (`device: cuda` in a runner's
    config) or a trainer's `accelerator: cuda` (reported but not fixed). A Hugging Face `device_map` is hf-cuda-device-map's (PC106).

    ## Why is this bad?
    Without CUDA, `torch.zeros(3, device="cuda")` raises `AssertionError: Torch not compiled
    with CUDA enabled`. On TPU, Trainium and the others, every hard-coded `"cuda"` is a place
    the port must touch, and one that is missed fails at run time.

    ## Example
    ```python
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.zeros(3, device="cuda:0")
    ```

    ## Use instead
    One device, chosen once, used everywhere:
    ```python
    device = torch.accelerator.current_accelerator() or torch.device("cpu")
    x = torch.zeros(3, device=device)
    ```

    ## Targets
    An error on every target but ROCm, where `"cuda"` is the right spelling (HIP reuses it).
    On TPU prefer `"tpu"` without an index: a process owns exactly one TPU.

    ## Fix safety
    Safe: the string becomes the target's device (`"tpu"`, `"neuron"`, `"xpu:1"`...). Where a
    process owns one device (tpu, xla, cpu) the index is dropped, since the only device a
    process can use is its own (also `torch.device("cuda", local_rank)`'s index argument);
    elsewhere it is kept.
    """

    code = "PC101"
    name = "cuda-device-string"
    message = "{literal} hard-codes a CUDA device"
    hint = "{advice}"
    severity = per_target(ERROR, rocm=OFF)
    fix_safety = FixSafety.SAFE
    triggers = (b"cuda",)
    file_kinds = (filekinds.PYTHON, filekinds.CONFIG)
    cuda_only = True

    VALID = [
        Valid(  # a comparison (PC105's), a map_location table's key, a lookup: no device is set
            "import torch\ndef load(path, device):\n    if device == 'cuda:0':\n        print(device)\n"
            "    stats = {'cuda:1': 0}['cuda:1']\n    torch.load(path, map_location='cuda:0')\n"
            "    return torch.load(path, map_location={'cuda:0': 'cpu'})\n"
        ),
        Valid(  # safetensors takes no "tpu": PC110 reports it, and rewriting the string would raise
            "import torch\nfrom safetensors.torch import load_file\nstate = load_file(path, device='cuda')\n"
        ),
        Valid(
            'import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument("--device", dest="run_on", default="cuda")\n'
        ),
        Valid('import torch\nx = torch.zeros(3, device="cpu")\n'),
        Valid('print("running on cuda")\nstats = {"cuda": True, "name": "cuda:0"}\n'),
        Valid('import torch\nbackend = "cuda"\nprint(backend)\n'),
        Valid('cuda = "cuda"\nprint(cuda)\n'),
        Valid('def f(torch):\n    return torch.device("cuda")\n'),
        Valid('import torch as T\nwith T.amp.autocast(device_type="cuda"):\n    pass\n'),
        Valid('import torch\nx = torch.zeros(3, device="cuda_graph_pool")\n'),
        Valid('import torch\ndevice = torch.device("cuda")\n', options={"targets": ["rocm"]}),
        Valid("run:\n  device: cpu\n  backend: cuda\n  note: cuda:0\n", path="train_configs/stage1.yaml"),
    ]
    INVALID = [
        Invalid(  # open_clip: the fallback of a lookup; and a config's
            "import torch\ndef init(args, config):\n    device = getattr(args, 'device', 'cuda')\n"
            "    return torch.device(device), run(device=config.get('device', 'cuda:0'))\n",
            lines=[3, 4],
            fixed="import torch\ndef init(args, config):\n    device = getattr(args, 'device', 'tpu')\n"
            "    return torch.device(device), run(device=config.get('device', 'tpu'))\n",
        ),
        Invalid(  # PixArt's interface.py: the device looked up in a table by image size
            "import torch\nt5_device = {512: 'cuda', 1024: 'cpu'}\nemb = T5Embedder(device=t5_device[size])\n",
            lines=[2],
            fixed="import torch\nt5_device = {512: 'tpu', 1024: 'cpu'}\nemb = T5Embedder(device=t5_device[size])\n",
        ),
        Invalid(  # pytorch/examples' RPC pipeline: each shard's device, passed in the remote call's arguments
            "import torch\nfrom torch.distributed import rpc\ndef shards(workers, Shard, args):\n"
            "    return rpc.remote(workers[0], Shard, args=('cuda:0',) + args)\n",
            lines=[4],
            message="'cuda:0' hard-codes a CUDA device",
            fixed="import torch\nfrom torch.distributed import rpc\ndef shards(workers, Shard, args):\n"
            "    return rpc.remote(workers[0], Shard, args=('tpu',) + args)\n",
        ),
        Invalid(  # yolact: a list of devices, also made by a comprehension
            "import torch\ndef scatter(device_ids, args):\n    devices = ['cuda:' + str(x) for x in device_ids]\n"
            "    if args.cpu:\n        devices = ['cuda:0'] if args.cuda else ['cpu']\n    return devices\n",
            lines=[3, 5],
            fixed='import torch\ndef scatter(device_ids, args):\n    devices = ["tpu" for x in device_ids]\n'
            "    if args.cpu:\n        devices = ['tpu'] if args.cuda else ['cpu']\n    return devices\n",
        ),
        Invalid(  # MiniGPT-4's runner config
            'run:\n  task: image_text_pretrain\n  device: "cuda"\n  eval_device: cuda:1\n',
            lines=[3, 4],
            path="train_configs/minigpt4_stage1_pretrain.yaml",
            message="hard-codes a CUDA device",
        ),
        Invalid(  # sam2's trainer config: the accelerator it makes its torch.device of
            "trainer:\n  _target_: training.trainer.Trainer\n  accelerator: cuda\n  seed_value: 123\n",
            lines=[3],
            path="configs/sam2.1_training/finetune.yaml",
        ),
        Invalid(  # ControlNet: a loader's own parameter, handed on to torch.load(map_location=...)
            "import torch\nsd = load_state_dict('./models/control_sd15_canny.pth', location='cuda')\n",
            lines=[2],
            fixed="import torch\nsd = load_state_dict('./models/control_sd15_canny.pth', location='tpu')\n",
        ),
        Invalid(
            'import torch\nx = torch.zeros(3, device="cuda")\n',
            lines=[2],
            fixed='import torch\nx = torch.zeros(3, device="tpu")\n',
        ),
        Invalid(
            "import torch as T\ndev = T.device('cuda:0')\n",
            lines=[2],
            fixed="import torch as T\ndev = T.device('tpu')\n",
        ),
        Invalid(
            'import torch as T\ndev = T.device("cuda:1")\n',
            lines=[2],
            device="xpu",
            fixed='import torch as T\ndev = T.device("xpu:1")\n',
        ),
        Invalid(
            'from torch import cuda\ndevice = "cuda" if cuda.is_available() else "cpu"\n',
            lines=[2],
            device="neuron",
            fixed='from torch import cuda\ndevice = "neuron" if cuda.is_available() else "cpu"\n',
        ),
        Invalid(
            "import torch\nfrom torch.cuda import is_available as has_cuda\n"
            'DEVICE = torch.device("cuda" if has_cuda() else "cpu")\n',
            lines=[3],
            fixed="import torch\nfrom torch.cuda import is_available as has_cuda\n"
            'DEVICE = torch.device("tpu" if has_cuda() else "cpu")\n',
        ),
        Invalid(
            'import torch.cuda\nrank = 0\nx = torch.empty(1, device=f"cuda:{rank}")\n',
            lines=[3],
            fixed='import torch.cuda\nrank = 0\nx = torch.empty(1, device="tpu")\n',
        ),
        Invalid(
            'import torch.cuda\nrank = 0\nx = torch.empty(1, device=f"cuda:{rank}")\n',
            lines=[3],
            device="npu",
            fixed='import torch.cuda\nrank = 0\nx = torch.empty(1, device=f"npu:{rank}")\n',
        ),
        Invalid(
            'import torch\ntarget = "cuda:1"\nmodel = torch.nn.Linear(2, 2).to(target)\n',
            lines=[2],
            device="cpu",
            fixed='import torch\ntarget = "cpu"\nmodel = torch.nn.Linear(2, 2).to(target)\n',
        ),
        Invalid(
            'import torch as T\n\ndevice = T.device("cuda" if T.cuda.is_available() else "cpu")\n'
            'x = T.zeros(2, device="cuda:1")\n\ndef f(rank):\n    return T.ones(1).to(f"cuda:{rank}")\n',
            lines=[3, 4, 7],
            device="auto",
            fixed='import torch as T\n\ndevice = T.accelerator.current_accelerator(check_available=True) or T.device("cpu")\n'
            'x = T.zeros(2, device=f"{device.type}:1")\n\ndef f(rank):\n    return T.ones(1).to(f"{device.type}:{rank}")\n',
        ),
        Invalid(
            '"""Doc."""\nimport torch\n\nx = torch.zeros(2, device="cuda")\ny = torch.ones(2).to("cuda:%d" % 0)\n',
            lines=[4, 5],
            device="auto",
            fixed='"""Doc."""\nimport torch\n\nDEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            'x = torch.zeros(2, device=DEVICE.type)\ny = torch.ones(2).to(f"{DEVICE.type}:%d" % 0)\n',
        ),
        Invalid(
            'import torch\nGPU = "cuda"\n\ndef run(m):\n    return m.to(GPU)\n',
            lines=[2],
            fixed='import torch\nGPU = "tpu"\n\ndef run(m):\n    return m.to(GPU)\n',
        ),
        Invalid(
            'import torch\ndef train(model, device="cuda"):\n    return model.to(device)\n',
            lines=[2],
            fixed='import torch\ndef train(model, device="tpu"):\n    return model.to(device)\n',
        ),
        Invalid(
            'import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument("--device", default="cuda")\n',
            lines=[3],
            device="mps",
            fixed='import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument("--device", default="mps")\n',
        ),
        Invalid(
            'import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument("-d", "--device", default="cuda")\n'
            'parser.add_argument("--gpu", dest="device", default="cuda:0")\n',
            lines=[3, 4],
            fixed='import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument("-d", "--device", default="tpu")\n'
            'parser.add_argument("--gpu", dest="device", default="tpu")\n',
        ),
        Invalid(  # fish-speech's command-line tools
            'import click\n@click.option("--device", "-d", default="cuda")\n@click.option("run_on", "--gpu", default="cuda")\n'
            "def main(device, run_on):\n    pass\n",
            lines=[2],
            fixed='import click\n@click.option("--device", "-d", default="tpu")\n@click.option("run_on", "--gpu", default="cuda")\n'
            "def main(device, run_on):\n    pass\n",
        ),
        Invalid(
            'cfg = {"device": "cuda:0", "lr": 0.1}\ncfg["eval_device"] = "cuda:1"\n',
            lines=[1, 2],
            fixed='cfg = {"device": "tpu", "lr": 0.1}\ncfg["eval_device"] = "tpu"\n',
        ),
        Invalid(
            'class Trainer:\n    def __init__(self):\n        self.device = "cuda"\n',
            lines=[3],
            fixed='class Trainer:\n    def __init__(self):\n        self.device = "tpu"\n',
        ),
        Invalid(
            'import torch\nrank = 1\na = torch.device("cuda:" + str(rank))\nb = "cuda:%d" % rank\n'
            'c = torch.device("cuda:{}".format(rank))\nt = torch.ones(1).to(b)\n',
            lines=[3, 4, 5],
            fixed='import torch\nrank = 1\na = torch.device("tpu")\nb = "tpu"\n'
            'c = torch.device("tpu")\nt = torch.ones(1).to(b)\n',
        ),
        Invalid(
            'import torch\nrank = 1\na = torch.device("cuda:" + str(rank))\nb = "cuda:%d" % rank\n'
            'c = torch.device("cuda:{}".format(rank))\nt = torch.ones(1).to(b)\n',
            lines=[3, 4, 5],
            device="xpu",
            fixed='import torch\nrank = 1\na = torch.device("xpu:" + str(rank))\nb = "xpu:%d" % rank\n'
            'c = torch.device("xpu:{}".format(rank))\nt = torch.ones(1).to(b)\n',
        ),
        Invalid(  # the index as torch.device's second argument goes with the type where a process owns one device
            'import os\nimport torch\ndevice = torch.device("cuda", int(os.environ["LOCAL_RANK"]))\n',
            lines=[3],
            fixed='import os\nimport torch\ndevice = torch.device("tpu")\n',
        ),
        Invalid(
            'import os\nimport torch\ndevice = torch.device("cuda", int(os.environ["LOCAL_RANK"]))\n',
            lines=[3],
            device="xpu",
            fixed='import os\nimport torch\ndevice = torch.device("xpu", int(os.environ["LOCAL_RANK"]))\n',
        ),
        Invalid(  # hifi-gan's train.py: the index through a format spec
            "import torch\ndevice = torch.device('cuda:{:d}'.format(rank))\nx = y.to('cuda:%(r)02d' % {'r': rank})\n",
            lines=[2, 3],
            device="xpu",
            fixed="import torch\ndevice = torch.device('xpu:{:d}'.format(rank))\nx = y.to('xpu:%(r)02d' % {'r': rank})\n",
        ),
        Invalid(
            'import torch\ntorch.set_default_device("cuda")\nwith torch.device("cuda"):\n    pass\n',
            lines=[2, 3],
            fixed='import torch\ntorch.set_default_device("tpu")\nwith torch.device("tpu"):\n    pass\n',
        ),
        # `--device auto` binds the device with `current_accelerator(check_available=True)`:
        # torch 2.7 and later.
        Invalid(
            'import torch\nx = torch.zeros(2, device="cuda")\n',
            lines=[2],
            device="auto",
            options={"torch-version": "2.6"},
        ),
        Invalid(
            'import torch\nx = torch.ones(2).to(device=args.device or "cuda", non_blocking=True)\n',
            lines=[2],
            fixed='import torch\nx = torch.ones(2).to(device=args.device or "tpu", non_blocking=True)\n',
        ),
    ]

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        """`"cuda:0"` wherever it is a value (pytorch/examples' `rpc.remote(w, Shard, args=("cuda:0",))`):
        a CUDA device with an index is nothing else. Not in a comparison (PC105's), a dict key (a
        `map_location` table), a call another rule owns, or a `map_location=` (PC104's) or
        `device_map=` (PC106's)."""
        if "cuda:" not in node.value:
            return  # most strings: no need to read them
        value = patterns.string_value(node)
        if value is None or not _INDEXED_CUDA.fullmatch(value) or type(self.ctx.parent) is cst.DictElement:
            return
        for ancestor in self.ctx.ancestors:
            if type(ancestor) in (cst.Comparison, cst.Dict, cst.Subscript):
                return
            if type(ancestor) is cst.Arg and ancestor.keyword is not None and _owned_keyword(ancestor.keyword.value):
                return
            if type(ancestor) is cst.Call and self.skips_call(self.ctx.qualified_names(ancestor.func)):
                return
        self.report_once(node)

    def names_setting(self, name: str) -> bool:
        return patterns.is_device_name(name) and not patterns.is_device_map_name(name)

    def literals(self, expression: cst.CSTNode) -> Iterable[cst.CSTNode]:
        return patterns.cuda_device_literals(expression)

    def skips_call(self, names: frozenset[str]) -> bool:
        return bool(names & _OWNED_ELSEWHERE) or any(name.startswith("torch.cuda.") for name in names)

    def check_text(self, text: str) -> None:
        """A device setting in a YAML config, also a trainer's `accelerator: cuda` (sam2's)."""
        for setting in configs.settings(text):
            named = self.names_setting(setting.key) or setting.key == "accelerator"
            if named and patterns.is_cuda_device_string(setting.value):
                self.report_span(setting.span, literal=repr(setting.value), advice=device_advice(self.ctx.targets))

    def positional_setting(self, call: cst.Call, names: frozenset[str]) -> cst.Arg | None:
        if names & _DEVICE_FIRST_ARGUMENT or patterns.method_name(call) == "to":
            return patterns.positional(call, 0)
        return None

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._call: cst.Call | None = None  # the call whose arguments the walk checks

    def visit_Call(self, node: cst.Call) -> None:
        self._call = node
        try:
            super().visit_Call(node)
        finally:
            self._call = None

    def report_literal(self, literal: cst.CSTNode) -> None:
        spelling = edits.device_type(self.ctx, literal)  # type: ignore[arg-type]
        edit = None
        if spelling is not None:
            title = f"{describe(literal)} -> {self.ctx.fix_target.device_type or 'the device present'}"
            edit = self._without_index(literal, spelling, title) or spelling.edit(literal, FixSafety.SAFE, title)
        self.report(literal, edit=edit, literal=describe(literal), advice=device_advice(self.ctx.targets))

    def _without_index(self, literal: cst.CSTNode, spelling: edits.Spelling, title: str) -> Edit | None:
        """`torch.device("cuda", local_rank)` where a process owns one device (tpu, xla): the
        index goes with the type, as it does from `"cuda:1"`; the process's own device is the
        only one it may name (TorchTPU raises for another index)."""
        call = self._call
        if call is None or not self.ctx.fix_target.one_device_per_process or spelling.imports or spelling.prelude:
            return None
        given = patterns.argument(call, 0, "type")
        index = patterns.argument(call, 1, "index")
        if (
            given is None
            or given.value is not literal
            or index is None
            or "torch.device" not in self.ctx.qualified_names(call.func)
        ):
            return None
        kept = [arg.with_changes(value=spelling.node) if arg is given else arg for arg in call.args if arg is not index]
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return Edit(call, call.with_changes(args=kept), FixSafety.SAFE, f"{title}, its index dropped")


def _owned_keyword(keyword: str) -> bool:
    """Arguments whose CUDA devices other rules report: cuda-map-location's, hf-cuda-device-map's."""
    return keyword == "map_location" or patterns.is_device_map_name(keyword)


def describe(literal: cst.CSTNode) -> str:
    value = patterns.string_value(literal)
    return repr(value) if value is not None else "'cuda:<index>'"


def device_advice(selected: tuple[str, ...]) -> str:
    """Tell the user what to write on the selected targets."""
    devices = []
    for name in selected:
        device_type = target_data.get(name).device_type
        if device_type != "cuda" and device_type not in devices:
            devices.append(device_type)
    spelled = " / ".join(f'"{device}"' for device in devices)
    return (
        f"use the target's device ({spelled}), or better one device chosen once: "
        'torch.accelerator.current_accelerator() or torch.device("cpu")'
    )
