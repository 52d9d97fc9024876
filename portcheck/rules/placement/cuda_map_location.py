from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

import libcst as cst

from portcheck import patterns, project
from portcheck.findings import FixSafety
from portcheck.rewrites import amp, calls, edits, placement
from portcheck.rewrites.edits import Edit, Spelling
from portcheck.rule import ERROR, OFF, WARNING, FileContext, Invalid, Rule, Valid, per_target
from portcheck.rules.placement.cuda_device_string import describe
from portcheck.walk import descendants

_SAVERS = frozenset({"torch.save", "torch.serialization.save"})
_IN_MEMORY = frozenset({"io.BytesIO", "_io.BytesIO"})  # a stream of bytes the process holds
# What such a stream is made of where the process wrote it itself (not a download's `.content`).
_PROCESS_BYTES = frozenset({"numpy", "tobytes", "getvalue", "getbuffer"})
_ACCELERATORS = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
_UNMAPPED = frozenset({"torch.load", "torch.serialization.load"})  # loaders that restore where the data was saved
_UNMAPPED_LOAD = "`torch.load` without map_location"
# A path that names a checkpoint (`args.resume`, "best_model.pth"), when it is not the very path saved to.
_UNKNOWN_ORIGIN = per_target(WARNING, rocm=OFF)  # a checkpoint this module does not write
_CHECKPOINT_WORDS = re.compile(r"ckpt|checkpoint|resume|weight|model|state|best|last|\.pth?\b|\.tar\b", re.IGNORECASE)
# A path that names a dataset rather than a checkpoint (lit-llama's `data_dir / "train.pt"`).
_DATA_WORDS = re.compile(r"data|\b(?:train|test|val|valid|validation)\.pt\b|tokens|features", re.IGNORECASE)
_HOST_STATE = re.compile(r"sched|scaler|sampler", re.IGNORECASE)  # objects whose state holds no tensors
_MODEL_WORDS = re.compile(r"ckpt|checkpoint|resume|weight|model|state_dict", re.IGNORECASE)


@dataclass(frozen=True)
class _Load:
    """A `torch.load` without map_location, and the fix for it (made where the call is)."""

    call: cst.Call
    edit: Edit | None
    restores_model: bool  # its value goes into a model's state (`["state_dict"]`, `.load_state_dict(...)`)
    path: str  # how it names its file, as written; the path opened where it reads an open file


class CudaMapLocation(Rule):
    """## What it does
    Reports `map_location="cuda"` (or `"cuda:N"`, a dict mapping to those, or
    `lambda storage, loc: storage.cuda()`) when loading a checkpoint with `torch.load`,
    `torch.jit.load` or any loader taking `map_location=`; and `torch.load(path)` without
    `map_location` in a module that writes its checkpoints from CUDA (it calls `torch.save`
    and puts its model on CUDA: a `.cuda()` call, a `"cuda"` device, or an Accelerate
    `Accelerator`'s `prepare(model)`), where the path is the
    one saved to or names a checkpoint (`args.resume`, `"best_model.pth"`); as a warning, where
    a module that puts its model on CUDA loads a checkpoint it does not write (a released
    model's `last.ckpt`, another script's `pytorch_model.bin`, or a file an option or a
    configuration's entry names, `args.tune_from`, `config["params_path"]`, or a name bound to
    a checkpoint's file (`controlnet_dir / f"{name}.pt"`), whose value goes
    into `.load_state_dict(...)` or is read at `["state_dict"]`):
    such files are mostly saved
    from the GPU, and `map_location="cpu"` costs nothing where they were not. So is a load of
    a checkpoint (by the path it names or opens, or by its use) in a module that puts nothing on CUDA, where
    another file of the repository puts its model on CUDA (a script beside the training
    script, a package's loader under it), unless the module saves that path itself (from the
    host). Not a load straight into an LR scheduler's, a GradScaler's or a
    sampler's `load_state_dict()`, whose state is numbers, nor one from bytes the process
    made (`torch.load(io.BytesIO(t.numpy()))`, sam2's all_gather of pickled objects): they were
    saved in the same run, on the device it runs on.

    ## Why is this bad?
    Without CUDA, `torch.load(f, map_location="cuda")` raises `RuntimeError: Attempting to
    deserialize object on a CUDA device but torch.cuda.is_available() is False`. The file itself
    is fine: only the destination is wrong. Without `map_location`, `torch.load` restores each
    tensor onto the device it was saved from: a checkpoint the program wrote on a GPU raises
    the same error when the ported program resumes from it.

    ## Example
    ```python
    state = torch.load("ckpt.pt", map_location="cuda:0")
    ```

    ## Use instead
    Load to the CPU, then move (torch_xla recommends saving and loading CPU tensors anyway):
    ```python
    state = torch.load("ckpt.pt", map_location="cpu")
    model.load_state_dict(state)
    model.to(device)
    ```

    ## Targets
    An error on every target but ROCm.

    ## Fix safety
    Safe: the CUDA device becomes the target's (`"tpu"`, `"xpu:1"`, `"cpu"`), so the tensors
    land where the code expects them; `lambda storage, loc: storage.cuda()` becomes that device
    too. An index is kept or dropped as cuda-device-string does. With `--device auto` it is
    the module's device binding (`DEVICE`; `DEVICE.type` where the string is bound to a name
    first), and an index is kept only where there is an accelerator
    (`f"{DEVICE.type}:1" if DEVICE.type != "cpu" else "cpu"`): `"cpu:1"` is not a location
    `torch.load` restores to.

    Where torch's own serialization cannot restore onto the target's device (the torch_xla
    device is no `torch.accelerator`, and `torch.load` has no deserializer for it), the fix
    loads to `"cpu"` instead, as torch_xla recommends; that is unsafe, since code using the
    loaded tensors directly then finds them on the CPU (move them with `.to(device)`).
    A `map_location` function other than `storage.cuda(...)` is not fixed.

    A `torch.load` without `map_location` gets `map_location=<the target's device>`
    (`"cpu"` for `--device cpu`, `DEVICE` for `auto`): the CUDA tensors land where the
    program now runs. That is safe where the result goes straight into `.load_state_dict(...)`
    (it copies into the module's own tensors wherever they come from) and on the CPU target;
    elsewhere it is unsafe, since tensors the checkpoint holds on the CPU (an RNG state) move
    to the device too.
    """

    code = "PC104"
    name = "cuda-map-location"
    message = "{what} loads the checkpoint onto a CUDA device{why}"
    hint = 'use map_location="cpu" and move with .to(device) afterwards (or map_location=device)'
    severity = per_target(ERROR, rocm=OFF)
    fix_safety = FixSafety.SAFE
    triggers = (b"cuda", b"Accelerator")
    cuda_only = True

    VALID = [
        Valid(  # the Hugging Face Trainer's resume: a scheduler's and a scaler's state are numbers
            "import torch\nmodel.cuda()\ntorch.save(model.state_dict(), 'ckpt/model.pt')\n"
            "self.lr_scheduler.load_state_dict(torch.load('ckpt/scheduler.pt'))\n"
            "scaler.load_state_dict(torch.load('ckpt/scaler.pt'))\n"
        ),
        Valid(  # lit-llama: datasets saved with torch.save, loaded by a module that saves its model from CUDA
            "import os\nimport torch\ndef load_datasets(data_dir):\n"
            '    return torch.load(os.path.join(data_dir, "train.pt")), torch.load(os.path.join(data_dir, "test.pt"))\n'
            "def save(model, path):\n    model.cuda()\n    torch.save(model.state_dict(), path)\n"
        ),
        Valid(
            "import torch\nfeatures = torch.load(args.features)\nmodel = model.cuda()\n"
        ),  # no checkpoint by its name
        Valid('import torch\nstate = torch.load("ckpt.pt", map_location="cpu")\n'),
        Valid('import torch\nstate = torch.load("ckpt.pt", map_location={"cuda:1": "cpu"})\n'),
        Valid('def load(torch):\n    return torch.load("x.pt", "cuda")\n'),
        Valid(
            'import torch\ndevice = "cuda"\nstate = torch.load("ckpt.pt", map_location=device)\n',
            options={"select": ["PC104"]},
        ),
        Valid('import torch\nstate = torch.load("ckpt.pt", "cuda")\n', options={"targets": ["rocm"]}),
        # saved from the CPU, or a file this module does not write
        Valid('import torch\ntorch.save(model.state_dict(), "m.pt")\nstate = torch.load("m.pt")\n'),
        Valid(  # sam2's all_gather: pickled objects sent as tensors, read back from bytes in memory
            "import io\nimport torch\nbuffer = io.BytesIO()\ntorch.save(obj, buffer)\n"
            "data = torch.ByteTensor(list(buffer.getvalue())).cuda()\n"
            "def unpack(tensor):\n    buffer = io.BytesIO(tensor.cpu().numpy())\n    return torch.load(buffer)\n"
        ),
        Valid('import torch\nmodel.cuda()\ntorch.save(model.state_dict(), "m.pt")\ndata = torch.load(args.data)\n'),
        Valid(  # min-DALL·E: weights the program names itself (downloaded, converted on the host)
            "import torch\nclass MinDalle:\n    def init_encoder(self):\n        params = torch.load(self.encoder_params_path)\n"
            "        self.encoder.load_state_dict(params, strict=False)\n        self.encoder = self.encoder.cuda()\n"
        ),
    ]
    INVALID = [
        Invalid(  # muse-maskgit: Accelerate prepares the model (on CUDA, on a GPU host); the trainer resumes it
            "import torch\nfrom accelerate import Accelerator\nclass Trainer:\n    def __init__(self, vae):\n"
            "        self.accelerator = Accelerator()\n        self.vae = self.accelerator.prepare(vae)\n"
            "    def save(self, path):\n        torch.save(self.vae.state_dict(), path)\n"
            "    def load(self, path):\n        self.vae.load_state_dict(torch.load(path))\n",
            lines=[10],
            message="this module writes its checkpoints from CUDA",
            fixed="import torch\nfrom accelerate import Accelerator\nclass Trainer:\n    def __init__(self, vae):\n"
            "        self.accelerator = Accelerator()\n        self.vae = self.accelerator.prepare(vae)\n"
            "    def save(self, path):\n        torch.save(self.vae.state_dict(), path)\n"
            '    def load(self, path):\n        self.vae.load_state_dict(torch.load(path, map_location="tpu"))\n',
        ),
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", map_location="cuda")\n',
            lines=[2],
            fixed='import torch\nstate = torch.load("ckpt.pt", map_location="tpu")\n',
        ),
        Invalid(
            'import torch as T\nstate = T.load(path, "cuda:0")\n',
            lines=[2],
            device="cpu",
            fixed='import torch as T\nstate = T.load(path, "cpu")\n',
        ),
        Invalid(
            'import torch as T\nstate = T.load(path, "cuda:1")\n',
            lines=[2],
            device="xpu",
            fixed='import torch as T\nstate = T.load(path, "xpu:1")\n',
        ),
        Invalid(
            'from torch import cuda, load\nstate = load(path, map_location="cuda" if cuda.is_available() else "cpu")\n',
            lines=[2],
            device="auto",
            fixed="from torch import cuda, load\nimport torch\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            'state = load(path, map_location=DEVICE if cuda.is_available() else "cpu")\n',
        ),
        Invalid(
            "from torch.cuda import current_device as cur\nimport torch.cuda\n"
            'm = torch.jit.load("m.pt", map_location=f"cuda:{cur()}")\n',
            lines=[3],
            device="npu",
            fixed="from torch.cuda import current_device as cur\nimport torch.cuda\n"
            'm = torch.jit.load("m.pt", map_location=f"npu:{cur()}")\n',
        ),
        Invalid(
            'import torch\nstate = torch.load(p, map_location={"cuda:1": "cuda:0"})\n',
            lines=[2],
            fixed='import torch\nstate = torch.load(p, map_location={"cuda:1": "tpu"})\n',
        ),
        Invalid(
            'import torch\nLOC = "cuda"\nmodel = Model.load_from_checkpoint(p, map_location=LOC)\n',
            lines=[2],
            device="auto",
            fixed="import torch\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            "LOC = DEVICE.type\nmodel = Model.load_from_checkpoint(p, map_location=LOC)\n",
        ),
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", map_location=lambda storage, loc: storage.cuda())\n',
            lines=[2],
            fixed='import torch\nstate = torch.load("ckpt.pt", map_location="tpu")\n',
        ),
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", lambda s, loc: s.cuda(1))\n',
            lines=[2],
            device="hpu",
            fixed='import torch\nstate = torch.load("ckpt.pt", "hpu:1")\n',
        ),
        # auto: the index where there is an accelerator ("cpu:1" is no torch.load location).
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", map_location="cuda:1")\n',
            lines=[2],
            device="auto",
            fixed="import torch\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            'state = torch.load("ckpt.pt", map_location=f"{DEVICE.type}:1" if DEVICE.type != "cpu" else "cpu")\n',
        ),
        # torch.load cannot restore onto the torch_xla device: to the CPU, with --unsafe-fixes.
        Invalid('import torch\nstate = torch.load("ckpt.pt", map_location="cuda")\n', lines=[2], device="xla"),
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", map_location="cuda")\n',
            lines=[2],
            device="xla",
            unsafe=True,
            fixed='import torch\nstate = torch.load("ckpt.pt", map_location="cpu")\n',
        ),
        # `args.gpu` holds an index (portcheck.flow): kept where indices are kept.
        Invalid(
            "import torch\ndef load(args):\n"
            '    return torch.load("c.pt", map_location=lambda storage, loc: storage.cuda(args.gpu))\n',
            lines=[3],
            device="xpu",
            fixed='import torch\ndef load(args):\n    return torch.load("c.pt", map_location=f"xpu:{args.gpu}")\n',
        ),
        # `args.where` may hold an int, None or a device: no one spelling fits where indices are kept.
        Invalid(
            "import torch\ndef load(args):\n"
            '    return torch.load("c.pt", map_location=lambda storage, loc: storage.cuda(args.where))\n',
            lines=[3],
            device="xpu",
        ),
        # a released checkpoint loaded by a module that runs on CUDA: likely saved from the GPU
        Invalid(
            'import torch\nsd = torch.load("models/ldm/inpainting_big/last.ckpt")["state_dict"]\n'
            "model.load_state_dict(sd)\nmodel = model.cuda()\n",
            lines=[2],
            message="if it was saved from one",
            fixed='import torch\nsd = torch.load("models/ldm/inpainting_big/last.ckpt", map_location="tpu")["state_dict"]\n'
            "model.load_state_dict(sd)\nmodel = model.cuda()\n",
            unsafe=True,
        ),
        # HunyuanDiT's ControlNet weights: a checkpoint by the name its path is bound to
        Invalid(
            "import torch\nclass Runner:\n    def __init__(self, args, controlnet_dir):\n"
            '        self.device = "cuda" if torch.cuda.is_available() else "cpu"\n'
            '        controlnet_path = controlnet_dir / f"{args.control_type}.pt"\n'
            "        self.controlnet = Net().half().to(self.device)\n"
            "        self.controlnet.load_state_dict(torch.load(controlnet_path), strict=False)\n",
            lines=[7],
            message="if it was saved from one",
            fixed="import torch\nclass Runner:\n    def __init__(self, args, controlnet_dir):\n"
            '        self.device = "cuda" if torch.cuda.is_available() else "cpu"\n'
            '        controlnet_path = controlnet_dir / f"{args.control_type}.pt"\n'
            "        self.controlnet = Net().half().to(self.device)\n"
            '        self.controlnet.load_state_dict(torch.load(controlnet_path, map_location="tpu"), strict=False)\n',
        ),
        # a checkpoint this module writes from CUDA, loaded without map_location
        Invalid(
            'import torch\nmodel = Net().cuda()\ntorch.save(model.state_dict(), "mnist_cnn.pt")\n'
            'model.load_state_dict(torch.load("mnist_cnn.pt", weights_only=True))\n',
            lines=[4],
            message="writes its checkpoints from CUDA",
            fixed='import torch\nmodel = Net().cuda()\ntorch.save(model.state_dict(), "mnist_cnn.pt")\n'
            'model.load_state_dict(torch.load("mnist_cnn.pt", weights_only=True, map_location="tpu"))\n',
        ),
        Invalid(
            "from torch import load, save\nDEVICE = 'cuda:0'\n\ndef resume(args, model):\n"
            "    checkpoint = load(args.resume)\n    model.load_state_dict(checkpoint['model'])\n\n"
            "def checkpoint(state, filename):\n    save(state, filename)\n",
            lines=[5],
            device="cpu",
            fixed="from torch import load, save\nDEVICE = 'cuda:0'\n\ndef resume(args, model):\n"
            "    checkpoint = load(args.resume, map_location=\"cpu\")\n    model.load_state_dict(checkpoint['model'])\n\n"
            "def checkpoint(state, filename):\n    save(state, filename)\n",
        ),
        # a checkpoint by its use (TSM's fine-tuning start): its state dict goes into the model
        Invalid(
            "import torch\nmodel = torch.nn.DataParallel(model).cuda()\n"
            "def tune(args):\n    sd = torch.load(args.tune_from)\n    model.load_state_dict(sd['state_dict'])\n"
            "def save_checkpoint(state, filename):\n    torch.save(state, filename)\n",
            lines=[4],
            message="if it was saved from one",
        ),
        # DALLE-pytorch's generate.py: the path an option names, the weights popped from the load
        Invalid(
            "import torch\nfrom pathlib import Path\ndalle_path = Path(args.dalle_path)\n"
            "load_obj = torch.load(str(dalle_path))\nweights = load_obj.pop('weights')\n"
            "dalle = DALLE(**load_obj.pop('hparams')).cuda()\ndalle.load_state_dict(weights)\n",
            lines=[4],
            message="if it was saved from one",
        ),
        # Kandinsky-2's training script: a configuration's entry names the weights the model takes
        Invalid(
            "import torch\nconfig = OmegaConf.load(args.config)\nmodel = create_model().cuda()\n"
            "model.load_state_dict(torch.load(config['params_path']))\n",
            lines=[4],
            message="if it was saved from one",
            fixed="import torch\nconfig = OmegaConf.load(args.config)\nmodel = create_model().cuda()\n"
            "model.load_state_dict(torch.load(config['params_path'], map_location=\"tpu\"))\n",
        ),
        # the RNG state it holds would move to the device: only with --unsafe-fixes
        Invalid(
            "import torch.serialization as ser\nimport torch\nnet.cuda()\nstate = ser.load(PATH)\n"
            "torch.save({'model': net.state_dict(), 'rng': torch.get_rng_state()}, PATH)\n",
            lines=[4],
            device="neuron",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._loads: list[_Load] = []
        self._saves: list[cst.Call] = []
        self._on_cuda: cst.CSTNode | None = None  # where the module first puts something on CUDA

    @classmethod
    def project_triggers(cls, known: project.Project) -> tuple[bytes, ...]:
        """Where a script puts its model on CUDA, the loads of the files that do not."""
        return (b"torch.load", b"serialization.load") if known.on_cuda else ()

    @classmethod
    def in_second_pass(cls, known: project.Project, path: str, module: str) -> bool:
        return bool(known.on_cuda)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if self._on_cuda is None and "cuda" in node.value and patterns.is_cuda_device_literal(node):
            self._on_cuda = node

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if self._on_cuda is None and patterns.is_cuda_device_literal(node):
            self._on_cuda = node

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        if names & _SAVERS:
            self._saves.append(node)
        elif patterns.method_name(node) == "cuda" and not names and self._on_cuda is None:
            self._on_cuda = node
        elif patterns.method_name(node) == "prepare" and self._on_cuda is None and self._accelerator(node):
            self._on_cuda = node  # Accelerate puts the models it prepares on CUDA, where there is one
        arg = placement.map_location_argument(self.ctx, node)
        if arg is None:
            if (
                names & _UNMAPPED
                and not amp.has_star(node)
                and not _into_host_state(self.ctx)
                and not self._in_memory(node)
            ):
                restores = _restores_model(self.ctx, node)
                self._loads.append(_Load(node, self._unmapped_edit(node), restores, _loaded_path(self.ctx, node)))
        elif not self.ctx.project.complete:
            self._report_map_location(arg)

    def _in_memory(self, load: cst.Call) -> bool:
        """A load from bytes this run made (sam2's all_gather: `buffer = io.BytesIO(t.numpy())`,
        then `torch.load(buffer)`; an empty stream, or one of a tensor's or a buffer's bytes):
        what it reads was saved in this process, on the device it runs on, not a checkpoint
        from a CUDA host (a download's bytes may be one)."""
        read = patterns.positional(load, 0)
        values = [read.value] if read is not None else []
        if values and type(values[0]) is cst.Name:
            values = self.ctx.assigned_values(values[0])
        return bool(values) and all(
            type(value) is cst.Call
            and bool(self.ctx.qualified_names(value.func) & _IN_MEMORY)
            and all(
                type(arg.value) is cst.Call and patterns.method_name(arg.value) in _PROCESS_BYTES for arg in value.args
            )
            for value in values
        )

    def _accelerator(self, call: cst.Call) -> bool:
        """`accelerator.prepare(...)` (or `self.accelerator.prepare(...)`) of an Accelerate
        `Accelerator` the module makes (muse-maskgit's trainers)."""
        made = self.ctx.flow.bound_values(call.func.value) if self.ctx.flow is not None else []  # type: ignore[attr-defined]
        return any(type(value) is cst.Call and self.ctx.qualified_names(value.func) & _ACCELERATORS for value in made)

    def leave_Module(self, node: cst.Module) -> None:
        """Loads without map_location, once the module's saves and CUDA placements are known;
        in the second pass, those of a module that puts nothing on CUDA in a repository that does."""
        if self.ctx.project.complete:
            writer = self.ctx.project.on_cuda_nearest(self.ctx.path)
            if self._on_cuda is None and writer is not None:
                self._report_elsewhere_written(writer)
            return
        if self._on_cuda is None:
            return
        self.record(project.CUDA_PLACEMENT, self.ctx.path, self._on_cuda)
        for load in self._loads:
            save = self._saved_by(load.call)
            if save is not None:
                why = f": this module writes its checkpoints from CUDA (`torch.save(..., {_path_code(save, 1)})`)"
                self.report(load.call, edit=load.edit, what=_UNMAPPED_LOAD, why=why)
            elif load.restores_model or (not self._saves and _names_checkpoint(load.path)):
                why = " if it was saved from one, as checkpoints of a module that runs on CUDA often are"
                self.report(load.call, edit=load.edit, severity=_UNKNOWN_ORIGIN, what=_UNMAPPED_LOAD, why=why)

    def _report_elsewhere_written(self, runs_on_cuda: str) -> None:
        """A checkpoint this module loads is most likely one the repository wrote from CUDA,
        a script beside it first."""
        beside = PurePosixPath(runs_on_cuda).parent == PurePosixPath(self.ctx.path).parent
        where = f"`{PurePosixPath(runs_on_cuda).name}` beside it" if beside else f"`{runs_on_cuda}` in this repository"
        why = f" if it was saved from one: {where} runs on CUDA"
        for load in self._loads:
            saved_here = any(_path_code(save, 1) == load.path for save in self._saves)  # from the host, back to it
            if (load.restores_model or _names_checkpoint(load.path)) and not saved_here:
                self.report(load.call, edit=load.edit, severity=_UNKNOWN_ORIGIN, what=_UNMAPPED_LOAD, why=why)

    def _saved_by(self, load: cst.Call) -> cst.Call | None:
        """The save that writes what `load` reads: the one to the same path, or for a path
        that names a checkpoint, the module's first."""
        path = _path_code(load, 0)
        same = next((save for save in self._saves if _path_code(save, 1) == path and path), None)
        if same is not None or not _names_checkpoint(path):
            return same
        return self._saves[0] if self._saves else None

    def _unmapped_edit(self, call: cst.Call) -> Edit | None:
        """`map_location=<the target's device>` added (made while the walk is at the call)."""
        spelled = placement.device_spelling(self.ctx, placement.cuda_literal(), index_on_cpu=False)
        if spelled is None:
            return None
        spelling, safety = spelled
        spelling = placement.device_object(self.ctx, spelling)
        target = self.ctx.fix_target
        written = patterns.string_value(spelling.node)
        if not target.accelerator_api and written != "cpu":
            spelling, safety = Spelling(cst.SimpleString('"cpu"')), FixSafety.UNSAFE  # see _edit
        elif written != "cpu" and not _into_state_dict(self.ctx):
            safety = FixSafety.UNSAFE  # the checkpoint's CPU tensors would move too
        new = calls.with_keyword(call, "map_location", spelling.node)
        return Edit(call, new, safety, "added map_location", spelling.imports, spelling.prelude)

    def _report_map_location(self, arg: cst.Arg) -> None:
        value = arg.value
        mover = placement.storage_mover(value)
        if mover is not None:
            what = f"map_location={_describe_function(value)}"
            self.report(value, edit=self._mover_edit(value, mover), what=what, why="")
            return
        candidates = [element.value for element in value.elements] if isinstance(value, cst.Dict) else [value]
        for candidate in candidates:
            # Through a name, the value stays a string: the name may be used as one elsewhere.
            direct = not isinstance(candidate, cst.Name)
            for literal in patterns.device_literals_through_names(candidate, self.ctx.assigned_value):
                spelled = placement.device_spelling(self.ctx, literal, index_on_cpu=False)
                what = f"map_location={describe(literal)}"
                self.report(literal, edit=self._edit(literal, spelled, direct), what=what, why="")

    def _mover_edit(self, function: cst.BaseExpression, mover: cst.Call) -> Edit | None:
        """`lambda storage, loc: storage.cuda(i)` is `map_location=<what .cuda(i) moves to>`."""
        readable, device, non_blocking = placement.cuda_call_device(mover)
        if not readable or non_blocking is not None or len(mover.args) > (device is not None):
            return None
        moved = placement.moved_to(self.ctx, device.value if device else None, index_on_cpu=False)
        if moved is None:
            return None
        spelling, safety = moved
        spelling = Spelling(edits.with_parentheses_of(function, spelling.node), spelling.imports, spelling.prelude)
        return self._edit(function, (spelling, safety), direct=True)

    def _edit(self, original: cst.CSTNode, spelled: tuple[Spelling, FixSafety] | None, direct: bool) -> Edit | None:
        if spelled is None:
            return None
        spelling, safety = spelled
        if direct:
            spelling = placement.device_object(self.ctx, spelling)
        target = self.ctx.fix_target
        written = patterns.string_value(spelling.node)
        if not target.accelerator_api and written != "cpu":
            # torch.load restores onto the CPU and torch.accelerator's devices only (not xla).
            node = edits.with_parentheses_of(original, edits.string_like(original, "cpu"))  # type: ignore[arg-type]
            spelling, safety = Spelling(node), FixSafety.UNSAFE
        where = cst.Module([]).code_for_node(spelling.node)
        return spelling.edit(original, safety, f"map_location -> {where}")


def _names_checkpoint(path: str) -> bool:
    """A path that names a checkpoint (`args.resume`, "best_model.pth"), not a dataset saved
    with torch (`os.path.join(data_dir, "train.pt")`)."""
    if not _CHECKPOINT_WORDS.search(path):
        return False
    return not _DATA_WORDS.search(path) or bool(_MODEL_WORDS.search(path))


def _describe_function(function: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(function)


def _loaded_path(ctx: FileContext, load: cst.Call) -> str:
    """How the load being visited names its file; for a file it reads open, the path opened
    (segment-anything's `with open(checkpoint, "rb") as f: torch.load(f)`)."""
    arg = patterns.argument(load, 0, "f")
    if arg is None or type(arg.value) is not cst.Name:
        return _path_code(load, 0)
    for node in reversed(ctx.ancestors):
        for item in node.items if type(node) is cst.With else ():
            bound = item.asname.name if item.asname is not None else None
            if type(bound) is cst.Name and bound.value == arg.value.value:
                opened = item.item
                is_open = type(opened) is cst.Call and patterns.dotted(opened.func) == "open" and opened.args
                return cst.Module([]).code_for_node(opened.args[0].value) if is_open else ""  # type: ignore[attr-defined]
    return _path_code(load, 0)


def _bound_path(ctx: FileContext, load: cst.Call) -> str:
    """The value a load's path name is bound to once, as written; '' for anything else."""
    arg = patterns.argument(load, 0, "f")
    bound = ctx.assigned_value(arg.value) if arg is not None and type(arg.value) is cst.Name else None
    return cst.Module([]).code_for_node(bound) if bound is not None else ""


def _path_code(call: cst.Call, index: int) -> str:
    """How a save or load call names its file (`f`), as written; '' when it cannot tell."""
    arg = patterns.argument(call, index, "f")
    return cst.Module([]).code_for_node(arg.value) if arg is not None else ""


def _into_host_state(ctx: FileContext) -> bool:
    """Whether the call being visited is loaded into an object whose state is Python numbers
    (`lr_scheduler.load_state_dict(torch.load(path))`, a GradScaler's, a sampler's): no tensor
    of it goes to a device."""
    if not _into_state_dict(ctx):
        return False
    loading = ctx.ancestors[-2]
    assert isinstance(loading, cst.Call) and isinstance(loading.func, cst.Attribute)
    return _HOST_STATE.search(patterns.target_name(loading.func.value) or "") is not None


def _restores_model(ctx: FileContext, load: cst.Call) -> bool:
    """Whether the load being visited reads a checkpoint the user names (`args.tune_from`), which
    is a model's by its use, whatever the option is called (TSM's `sd =
    torch.load(args.tune_from); sd = sd['state_dict']`; also `str(...)` or `Path(...)` of one):
    its value goes into `.load_state_dict(...)` or is read (or popped) at a model's key,
    directly or through the name bound to it. So does a checkpoint's file a name is bound to
    (HunyuanDiT's `controlnet_path = controlnet_dir / f"{control_type}.pt"`). Not another
    file the program names itself (min-DALL·E's `self.encoder_params_path`, weights it
    downloads and converts on the host)."""
    path = patterns.argument(load, 0, "f")
    if path is None or not (_names_option(ctx, path.value) or _names_checkpoint(_bound_path(ctx, load))):
        return False
    ancestors = ctx.ancestors
    parent = ancestors[-1] if ancestors else None
    if _into_state_dict(ctx) or (isinstance(parent, cst.Subscript) and _model_key(parent)):
        return True
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
        return False
    name = parent.targets[0].target
    if not isinstance(name, cst.Name):
        return False
    scope = next((node for node in reversed(ancestors) if isinstance(node, cst.FunctionDef)), ancestors[0])
    for node in descendants(scope):
        if isinstance(node, cst.Subscript) and _is_name(node.value, name.value) and _model_key(node):
            return True
        if _popped_model_key(node, name.value):
            return True
        if (
            isinstance(node, cst.Call)
            and patterns.method_name(node) == "load_state_dict"
            and node.args
            and _is_name(node.args[0].value, name.value)
        ):
            return True
    return False


def _names_option(ctx: FileContext, path: cst.BaseExpression, depth: int = 0) -> bool:
    """`args.tune_from` or a configuration's `config["params_path"]`, also as `str(...)` or
    `Path(...)` of one, or through a name bound once to one (DALLE-pytorch's `dalle_path =
    Path(args.dalle_path)`, then `torch.load(str(dalle_path))`)."""
    if isinstance(path, cst.Attribute):
        return isinstance(path.value, cst.Name) and path.value.value not in ("self", "cls")
    if isinstance(path, cst.Subscript) and len(path.slice) == 1 and isinstance(path.slice[0].slice, cst.Index):
        keyed = patterns.string_value(path.slice[0].slice.value) is not None
        return keyed and isinstance(path.value, (cst.Name, cst.Subscript))  # `cfg["model"]["ckpt"]` too
    if (
        isinstance(path, cst.Call)
        and len(path.args) == 1
        and patterns.dotted(path.func) in ("str", "Path", "pathlib.Path")
    ):
        return _names_option(ctx, path.args[0].value, depth)
    if isinstance(path, cst.Name) and depth < 2:
        bound = ctx.assigned_value(path)
        return bound is not None and _names_option(ctx, bound, depth + 1)
    return False


def _popped_model_key(node: cst.CSTNode, name: str) -> bool:
    """`state.pop("weights")`, `state.get("model")`: a model's weights taken out of the load."""
    if not (isinstance(node, cst.Call) and patterns.method_name(node) in ("pop", "get") and node.args):
        return False
    key = patterns.string_value(node.args[0].value)
    return _is_name(node.func.value, name) and key is not None and _MODEL_WORDS.search(key) is not None  # type: ignore[attr-defined]


def _model_key(subscript: cst.Subscript) -> bool:
    """`[...]` at a key naming a model's weights (`"state_dict"`, `"model"`)."""
    element = subscript.slice[0].slice if len(subscript.slice) == 1 else None
    key = patterns.string_value(element.value) if isinstance(element, cst.Index) else None
    return key is not None and _MODEL_WORDS.search(key) is not None


def _is_name(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _into_state_dict(ctx: FileContext) -> bool:
    """Whether the call being visited is the argument of `.load_state_dict(...)`, which copies
    into the module's own tensors wherever the loaded ones are."""
    ancestors = ctx.ancestors
    return (
        len(ancestors) >= 2
        and isinstance(ancestors[-1], cst.Arg)
        and isinstance(ancestors[-2], cst.Call)
        and patterns.method_name(ancestors[-2]) == "load_state_dict"
    )
