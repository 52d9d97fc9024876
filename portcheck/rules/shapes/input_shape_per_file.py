from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property

import libcst as cst

from portcheck import flow, patterns
from portcheck.rule import Invalid, Valid
from portcheck.rules.shapes import RECOMPILE_SEVERITY, TensorRule, advice, shown
from portcheck.walk import descendants

# What lists a folder's files.
_LISTINGS = frozenset({"os.listdir", "os.scandir", "glob.glob", "glob.iglob", "natsort.natsorted"})
_PATH_LISTINGS = frozenset({"glob", "rglob", "iterdir"})  # pathlib.Path's
# What an iterable is wrapped in without changing its items.
_WRAPPERS = frozenset({"enumerate", "sorted", "list", "reversed", "tuple"})
_TQDM = frozenset({"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm"})
# What reads one file into an array or a tensor.
_READERS = frozenset(
    {
        "torch.load", "torch.serialization.load", "numpy.load", "numpy.fromfile", "PIL.Image.open", "cv2.imread", "imageio.imread",
        "imageio.v2.imread", "imageio.v3.imread", "librosa.load", "torchaudio.load", "soundfile.read",
        "scipy.io.wavfile.read", "skimage.io.imread", "torchvision.io.read_image", "torchvision.io.decode_image",
    }
)  # fmt: skip
# Helpers whose names say they bring an input to a fixed size: the shape no longer follows the file.
_FIXES_SIZE = re.compile(r"resize|crop|transform|preprocess|interpolate|letterbox|bucket", re.IGNORECASE)
_MODULE_METHODS = frozenset({"eval", "load_state_dict"})  # what only a model is asked
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
# A model's methods that set it up rather than run it.
_HANDLING = frozenset(
    {
        "load_state_dict", "state_dict", "to", "cuda", "cpu", "eval", "train", "half", "float", "double",
        "bfloat16", "requires_grad_", "register_buffer", "register_parameter", "add_module", "apply",
        "parameters", "named_parameters", "modules", "named_modules", "zero_grad",
    }
)  # fmt: skip


class InputShapePerFile(TensorRule):
    """## What it does
    Reports a model run, in a loop over files (`os.listdir`, `glob.glob`, `Path.glob`, or a list
    whose items the loop opens with `torch.load`, `np.load`, `Image.open`, `cv2.imread`,
    `librosa.load`...), on a tensor made from the file the iteration read: hifi-gan's and
    WaveGlow's inference over a folder of mels, SwinIR's over a folder of images. A model is a
    name the module calls `.eval()` or `.load_state_dict(...)` on, or one named like a model
    (`model`, `net`); the run is a call of it, of one of its methods (`waveglow.infer(mel)`), or
    of a function given both (`test(img, model)`). Not where a call on the way resizes, crops or
    transforms the input (`cv2.resize`, `transform(img)`, `letterbox`), which fixes its shape,
    or asserts its shape (`assert img.shape[:2] == (512, 512)`), nor where the function of the
    module the loop runs does (yolact's `evalimage(net, path)`).

    ## Why is this bad?
    Audio clips and images differ in length and size, so every file gives the model a new input
    shape. A compiled or lazily traced model (TorchTPU, torch_xla, Gaudi) compiles a new graph
    for each, which takes longer than the run itself, and Trainium needs every shape known ahead
    of time.

    ## Example
    ```python
    for name in os.listdir(mel_dir):
        mel = torch.FloatTensor(np.load(os.path.join(mel_dir, name))).to(device)
        audio = generator(mel)
    ```

    ## Use instead
    Pad (or resize) inputs to a few fixed sizes and cut the output back:
    ```python
    for name in os.listdir(mel_dir):
        mel = torch.FloatTensor(np.load(os.path.join(mel_dir, name)))
        frames = mel.shape[-1]
        mel = F.pad(mel, (0, -frames % 256)).to(device)  # one graph per 256 frames
        audio = generator(mel)[..., : frames * hop]
    ```

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: the sizes to pad to, and how to cut the output back, depend on the model.
    """

    code = "PC513"
    name = "input-shape-per-file"
    message = "`{call}` runs the model on `{given}`, read from each file the loop lists: every new input shape compiles a new graph"
    hint = "pad or resize inputs to a few fixed sizes (and cut the outputs back){advice}"
    severity = RECOMPILE_SEVERITY
    triggers = (b"listdir", b"glob", b"iterdir", b"scandir", b"load", b"open", b"imread", b"read")

    VALID = [
        # resized to one size on the way in
        Valid(
            "import os\nimport cv2\nimport torch\nmodel.eval()\nfor name in os.listdir(folder):\n"
            "    img = cv2.resize(cv2.imread(os.path.join(folder, name)), (512, 512))\n"
            "    out = model(torch.from_numpy(img).to('cuda'))\n"
        ),
        Valid(
            "import glob\nimport torch\nfrom PIL import Image\nnet.load_state_dict(state)\n"
            "for path in sorted(glob.glob('imgs/*.png')):\n    x = transform(Image.open(path)).unsqueeze(0)\n"
            "    y = net(x)\n"
        ),
        # CodeFormer's colorization: every file's size asserted before the run
        Valid(
            "import cv2\nimport torch\nnet.eval()\nfor i, path in enumerate(paths):\n    face = cv2.imread(path)\n"
            "    assert face.shape[:2] == (512, 512), 'Input must be 512x512'\n"
            "    out = net(torch.from_numpy(face).to('cuda'))\n"
        ),
        # yolact: the helper run on each path resizes what it reads
        Valid(
            "import os\nimport cv2\nimport torch\ndef evalimage(net, path):\n"
            "    frame = torch.from_numpy(cv2.imread(path)).cuda().float()\n"
            "    return net(FastBaseTransform()(frame.unsqueeze(0)))\n"
            "net.eval()\nfor p in os.listdir(inp):\n    evalimage(net, os.path.join(inp, p))\n"
        ),
        # AnimateDiff, TSM: weights read from each file are loaded, not run
        Valid(
            "import torch\ncontrolnet.eval()\nfor path in ckpt_paths:\n    state = torch.load(path, map_location='cpu')\n"
            "    controlnet.load_state_dict(state)\n    net.load_state_dict(state)\n"
        ),
        # the file is not what the model is given
        Valid(
            "import os\nimport torch\nmodel.eval()\nz = torch.randn(1, 512)\nfor name in os.listdir(out_dir):\n"
            "    print(name)\n    img = model(z)\n"
        ),
        # a loop over a DataLoader: batching fixes the shape (pad-to-longest-batching says otherwise)
        Valid("import torch\nmodel.eval()\nfor x in loader:\n    y = model(x.to('cuda'))\n"),
        # `torch` is a parameter: its `load` is not torch's
        Valid(
            "import torch.nn\ndef run(torch, net, files):\n    net.eval()\n    for f in files:\n"
            "        out = net(torch.load(f))\n"
        ),
        # shapes may change freely there
        Valid(
            "import os\nimport numpy as np\nimport torch\ngenerator.eval()\nfor f in os.listdir(d):\n"
            "    y = generator(torch.from_numpy(np.load(f)))\n",
            options={"targets": ["cpu", "mps"]},
        ),
    ]
    INVALID = [
        # hifi-gan: each mel file its own length
        Invalid(
            "import os\nimport numpy as np\nimport torch\ngenerator = Generator(h).to(device)\n"
            "filelist = os.listdir(a.input_mels_dir)\ngenerator.eval()\nwith torch.no_grad():\n"
            "    for i, filname in enumerate(filelist):\n        x = np.load(os.path.join(a.input_mels_dir, filname))\n"
            "        x = torch.FloatTensor(x).to(device)\n        y_g_hat = generator(x)\n"
            "        audio = y_g_hat.squeeze()\n",
            lines=[11],
            message="`generator(...)` runs the model on `x`",
        ),
        # WaveGlow: the files come from a list; the loop opens each with torch.load
        Invalid(
            "import torch as T\ndef main(mel_files, waveglow_path):\n"
            "    waveglow = T.load(waveglow_path, map_location='cpu')['model']\n    waveglow.cuda().eval()\n"
            "    for i, file_path in enumerate(mel_files):\n        mel = T.load(file_path)\n"
            "        mel = T.unsqueeze(mel.cuda(), 0)\n        with T.no_grad():\n"
            "            audio = waveglow.infer(mel, sigma=0.6)\n",
            lines=[9],
        ),
        # SwinIR: padded only to a multiple of the window, then run through a helper given the model
        Invalid(
            "import glob\nimport os\nfrom torch import cat, flip, from_numpy\nmodel.eval()\nmodel = model.to(device)\n"
            "for idx, path in enumerate(sorted(glob.glob(os.path.join(folder, '*')))):\n"
            "    imgname, img_lq, img_gt = get_image_pair(args, path)\n"
            "    img_lq = from_numpy(img_lq).float().unsqueeze(0).to(device)\n"
            "    img_lq = cat([img_lq, flip(img_lq, [2])], 2)[:, :, :h_old + h_pad, :]\n"
            "    output = test(img_lq, model, args, window_size)\n",
            lines=[10],
        ),
        Invalid(
            "from torch.serialization import load as load_mel\ndef run(net, files):\n    for f in files:\n"
            "        out = net(load_mel(f).cuda())\n",
            lines=[4],
        ),
        Invalid(
            "from pathlib import Path\nimport torch.cuda\nimport librosa\nfor wav in Path(d).glob('*.wav'):\n"
            "    y, sr = librosa.load(wav)\n    text = asr_model(torch.tensor(y).cuda())\n",
            lines=[6],
        ),
    ]

    @cached_property
    def _models(self) -> frozenset[str]:
        """The names the module asks what only a model is asked: `.eval()`, `.load_state_dict()`
        (found once, for the first loop over files)."""
        found = set()
        for call in _calls_in(self.ctx.ancestors[0], into_functions=True):  # the module
            if patterns.method_name(call) in _MODULE_METHODS:
                base = _base_name(call.func.value)  # type: ignore[attr-defined]
                if base is not None:
                    found.add(base.value)
        return frozenset(found)

    def visit_For(self, node: cst.For) -> None:
        if not self._imports_torch:
            return
        target = node.target
        if _is_enumerate(node.iter) and type(target) is cst.Tuple and len(target.elements) == 2:
            target = target.elements[1].value  # `for i, name in enumerate(files)`: the index is no file
        items = flow.target_names(target)
        if not items or not (self._lists_files(node.iter) or self._opens_each(node.body, items)):
            return
        run = self._model_run(node.body, set(items))
        if run is not None:
            call, given = run
            self.report(call, call=shown(call.func) + "(...)", given=shown(given), advice=advice(self.ctx.targets))

    def _lists_files(self, iterable: cst.BaseExpression, depth: int = 0) -> bool:
        """`os.listdir(d)`, `sorted(glob.glob(p))`, `enumerate(files)` where `files = os.listdir(d)`."""
        if depth > 3:
            return False
        if type(iterable) is cst.Name:
            bound = self.ctx.assigned_value(iterable)
            return bound is not None and self._lists_files(bound, depth + 1)
        if type(iterable) is not cst.Call:
            return False
        names = self.ctx.qualified_names(iterable.func)
        if names & _LISTINGS or (not names and patterns.method_name(iterable) in _PATH_LISTINGS):
            return True
        wrapped = type(iterable.func) is cst.Name and iterable.func.value in _WRAPPERS and not names
        if (wrapped or names & _TQDM) and iterable.args:
            return self._lists_files(iterable.args[0].value, depth + 1)
        return False

    def _opens_each(self, body: cst.BaseSuite, items: set[str]) -> bool:
        """Whether the loop reads the file an item names (`torch.load(file_path)`,
        `Image.open(os.path.join(d, name))`)."""
        for node in descendants(body, _SCOPES + (cst.For, cst.While)):  # an inner loop's reads are its own
            if type(node) is not cst.Call or not node.args or not _reads_any(node.args[0].value, items):
                continue
            if self.ctx.qualified_names(node.func) & _READERS or _is_open(node):
                return True
        return False

    def _model_run(self, body: cst.BaseSuite, derived: set[str]) -> tuple[cst.Call, cst.BaseExpression] | None:
        """The first model run given what the loop derives from its file, statement by statement
        (`x = np.load(f)`, `x = torch.FloatTensor(x)`, then `generator(x)`), and that argument."""
        for statement in _statements(body):
            if _asserts_shape(statement, derived):
                return None
            for call in _calls_in(statement):
                if self._fixes_size(call):
                    return None
                given = next((arg.value for arg in call.args if _reads_any(arg.value, derived)), None)
                if given is not None and self._runs_model(call):
                    return None if self._helper_fixes_size(call) else (call, given)
            for target, value in _assignments(statement):
                if _reads_any(value, derived):
                    derived |= flow.target_names(target)
        return None

    def _fixes_size(self, call: cst.Call) -> bool:
        named = patterns.method_name(call) or (call.func.value if type(call.func) is cst.Name else "")
        return bool(named) and _FIXES_SIZE.search(named) is not None

    def _helper_fixes_size(self, call: cst.Call) -> bool:
        """A function of the module run on the file that resizes what it reads (yolact's
        `evalimage(net, path)`, whose `FastBaseTransform()` resizes every frame)."""
        module_flow = self.ctx.flow
        if type(call.func) is not cst.Name or module_flow is None:
            return False
        helper = module_flow.module_functions().get(call.func.value)
        return helper is not None and any(self._fixes_size(inner) for inner in _calls_in(helper.body))

    def _runs_model(self, call: cst.Call) -> bool:
        """A call of a model, of its method, or of a function given one (`test(img, model)`)."""
        if flow.runs_model(call):
            return True
        func = call.func
        if type(func) is cst.Attribute and (func.attr.value in _HANDLING or flow.handles_model(func.attr.value)):
            return False  # `net.load_state_dict(state)`: what is loaded, not what is run
        base = _base_name(func.value) if type(func) is cst.Attribute else func
        if base is not None and self._is_model(base):
            return True
        return any(type(arg.value) is cst.Name and self._is_model(arg.value) for arg in call.args)

    def _is_model(self, name: cst.Name) -> bool:
        return name.value in self._models


def _statements(body: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The simple statements under `body` in source order, and each compound statement's header
    (its test, its iterable) before its body."""
    for statement in body.body if isinstance(body, (cst.IndentedBlock, cst.Module)) else ():
        if isinstance(statement, cst.SimpleStatementLine):
            yield statement
        elif isinstance(statement, (cst.With, cst.If, cst.For, cst.While, cst.Try)):
            yield from _statements(statement.body)
            orelse = getattr(statement, "orelse", None)
            if orelse is not None:
                yield from _statements(orelse.body if isinstance(orelse, (cst.Else, cst.If)) else orelse)


def _asserts_shape(statement: cst.CSTNode, derived: set[str]) -> bool:
    """`assert face.shape[:2] == (512, 512)` on what the loop read (CodeFormer's colorization):
    the file's size is checked, so the shape stays."""
    for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
        test = small.test if isinstance(small, cst.Assert) else None
        if type(test) is not cst.Comparison or type(test.comparisons[0].operator) is not cst.Equal:
            continue
        if any(
            type(node) is cst.Attribute and node.attr.value == "shape" and _reads_any(node.value, derived)
            for node in (test.left, *descendants(test.left))
        ):
            return True
    return False


def _assignments(statement: cst.CSTNode) -> Iterator[tuple[cst.BaseExpression, cst.BaseExpression]]:
    for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
        if isinstance(small, cst.Assign):
            for target in small.targets:
                yield target.target, small.value
        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)) and small.value is not None:
            yield small.target, small.value


def _calls_in(node: cst.CSTNode, into_functions: bool = False) -> Iterator[cst.Call]:
    """The calls under `node`, outermost first, in source order (not in the functions and
    classes it defines, unless `into_functions`)."""
    if type(node) is cst.Call:
        yield node
    apart = () if into_functions else _SCOPES
    yield from (each for each in descendants(node, apart) if type(each) is cst.Call)


def _reads_any(node: cst.BaseExpression, names: set[str]) -> bool:
    return any(True for _ in flow.name_reads(node, frozenset(names))) or (
        type(node) is cst.Name and node.value in names
    )


def _base_name(node: cst.BaseExpression) -> cst.Name | None:
    """`waveglow` in `waveglow.cuda()`, `model` in `model.module`."""
    while True:
        if type(node) is cst.Name:
            return node
        if type(node) is cst.Attribute:
            node = node.value
        elif type(node) is cst.Call:
            node = node.func
        else:
            return None


def _is_enumerate(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "enumerate"


def _is_open(call: cst.Call) -> bool:
    return type(call.func) is cst.Name and call.func.value == "open"
