from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial

import libcst as cst

from portcheck import kwargs, patterns
from portcheck import targets as target_data
from portcheck.flow import ANYWHERE, Home, Reach, is_self_attribute
from portcheck.rule import OFF, WARNING, FileContext, Invalid, Rule, Valid, at_most_info
from portcheck.rules.placement.hf_cuda_device_map import is_hf_pipeline
from portcheck.rules.precision import FLOAT16, chooses_float16, tests_equal, under_test
from portcheck.rules.shapes import values_reaching
from portcheck.walk import descendants
from portcheck.wording import verb

_LOADERS = frozenset({"from_pretrained", "from_single_file", "from_pipe", "from_config"})
_CLIP_LOADERS = frozenset({"clip.load", "clip.clip.load"})  # OpenAI's CLIP package
_LIBRARIES = ("transformers.", "diffusers.", ".")  # "." : a relative import, the package itself
_DTYPE_KEYWORDS = ("torch_dtype", "dtype")
# Autocasts whose second argument (or `dtype=`) is the dtype the region computes in.
_AUTOCASTS = frozenset(
    {"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast", "torch.cuda.amp.autocast"}
)
_HF_DTYPE = "torch_dtype"  # Hugging Face's own name: a setting for a loader wherever it is written
_DTYPE_NAME = re.compile(r"(^|_)(dtype|data_type)$")  # `dtype`, `inputs_dtype`, `self.data_type`: what casts read
_FLOAT16_STRINGS = frozenset({"float16", "half"})
_TO_FP16 = "convert_to_fp16"  # guided-diffusion's UNet method that halves its weights
_WIDENING = frozenset({"float", "double", "bfloat16"})  # casts that leave float16
_RAISES = frozenset({"raises", "assertRaises", "assertRaisesRegex"})
_MODULE_ITERATORS = frozenset({"modules", "children"})  # what `for m in model.modules():` iterates
_PASS_THROUGH = frozenset({"to", "eval", "train", "requires_grad_"})  # `m.to(dev).half()` is `m.half()`
# Receivers of `.half()` taken for models: names that end in a model-ish word (`unet`,
# `text_encoder_2`, `self.model`), never tensors such as `encoder_hidden_states`.
_MODEL_NAME = re.compile(
    r"(^|_)(model|module|net|network|unet|vae|vqvae|encoder|decoder|transformer|bert|controlnet"
    r"|backbone|teacher|student|classifier)(_?\d+)?$",
    re.IGNORECASE,
)

_FLOAT32 = frozenset({"torch.float32", "torch.float"})
_NOT_THE_CPU = Reach(frozenset({"cpu"}))  # every device type but the CPU


class Float16OnBf16Target(Rule):
    """## What it does
    Reports loading a model in float16 (`torch_dtype=torch.float16`, `dtype=torch.half`,
    `torch_dtype="float16"`, also per component in a dict) in `from_pretrained`-style calls
    and `transformers.pipeline(...)`, or with OpenAI CLIP's `clip.load(name, device=device)`,
    which keeps its float16 weights on any device but "cpu"; also through `**kwargs` of a dict built in the module,
    Hugging Face's `torch_dtype` wherever it is set (`kwargs["torch_dtype"] = torch.float16`,
    `dict(torch_dtype=...)`) and a `torch_dtype` parameter's default, a float16 dtype bound to a
    name that casts read (`self.dtype = torch.float16`, `inputs_dtype = torch.half`, `self.data_type`), `.half()`
    and `.to(torch.float16)` on models (also what a loading function returns:
    `attempt_load(w, device).half()`, and each of `for m in self.modules(): m.half()`), and
    guided-diffusion's `model.convert_to_fp16()`, and on
    their parameters' data (`l.weight.data.half()`), and tensors on the device in float16
    (`x.to(device, dtype=torch.float16)`, `x.half().cuda()`, `im.half()` after `im =
    im.to(device)`, `torch.empty(n, dtype=torch.half, device=device)`, `self.images.half()`
    where `self.images` was loaded with `torch.load(path, map_location=device)`) or cast in step
    code (forward(), a step loop: yolov5's `im = im.half() if half else im.float()` for each
    batch) unless in host memory, and autocast to float16 (`torch.autocast(device_type,
    dtype=torch.float16)`, also a parameter's float16 default given as the dtype, directly or
    through the attribute it is set to once (detectron2's `self.precision`), unless it
    names a device that is neither CUDA nor a bfloat16 target's), when a selected target
    computes natively in bfloat16.

    Also a check that casts back to float32 for the CPU alone, with no `else` (CLIP's `if
    str(device) == "cpu": model.float()`): every other device, the target too, keeps the
    float16 the model was converted to.

    ## Why is this bad?
    float16 is the half precision of NVIDIA GPUs. TPU, Trainium, XLA and Gaudi compute in
    bfloat16 and emulate or slowly support float16, and CPUs are fast in bfloat16 only.
    float16 also overflows above 65504, which bfloat16 (float32's exponent range) does not,
    so float16 weights that were tuned with loss scaling on CUDA are the wrong port.

    ## Example
    ```python
    pipe = DiffusionPipeline.from_pretrained(name, torch_dtype=torch.float16)
    model = model.half()
    ```

    ## Use instead
    ```python
    pipe = DiffusionPipeline.from_pretrained(name, torch_dtype=torch.bfloat16)
    model = model.to(torch.bfloat16)
    ```

    ## Targets
    A warning on targets whose target data gives `amp-dtype = "bfloat16"` (tpu, neuron, xla,
    hpu, cpu); off on float16 targets. Code in a branch that only other devices take
    (`if device.type == "cuda":`, `elif device == "mps":`, the CUDA guards of portcheck.flow,
    `torch.float16 if device.type == "cuda" else ...`) is not reported for the targets whose
    device type never takes it: float16 is the right choice there; but code after an `assert
    torch.cuda.is_available()` is, since the assert stops the target until a port drops it
    (detectron2's AMPTrainer). Float16 that the user's
    option chooses (`if args.fp16:`, `torch.float16 if use_fp16 else torch.float32`, `elif
    precision == "fp16":`) is reported with the option named: on these targets the
    half-precision option should mean bfloat16; as info where the same choice gives bfloat16
    on another path (`torch.float16 if "fp16" in precision else torch.bfloat16`, an `elif`
    for "bf16"): the program has the option these targets want. `from_pretrained` counts when its class comes
    from transformers or diffusers, from the repository itself (MiniGPT-4's own
    `LlamaForCausalLM`), or from nowhere portcheck can see. Nor is float16 in a conversion script,
    which loads and saves weights and places nothing on a device (no `.cuda()`, `.to(device)`,
    `device=` or `device_map=` but the CPU), or a model loaded with `device_map="cpu"`: the
    dtype there is the checkpoint's, and what runs on the target loads it again.

    ## Fix safety
    No automatic fix: changing a dtype changes numerics.
    """

    code = "PC308"
    name = "float16-on-bf16-target"
    message = "{what} {runs} in float16, but {targets} {compute} natively in bfloat16"
    hint = "use torch.bfloat16 on {targets}: the same memory as float16, with float32's range"
    severity = {name: WARNING if t.amp_dtype == "bfloat16" else OFF for name, t in target_data.all_targets().items()}
    triggers = (b"float16", b"half", b"clip", b".float()", b"fp16")

    VALID = [
        Valid(  # the other devices get a choice of their own
            "import torch\ndef load(name, device):\n    model = build_model(name).to(device)\n"
            "    if str(device) == 'cpu':\n        model.float()\n    else:\n        model.to(torch.bfloat16)\n"
            "    return model\n"
        ),
        Valid(  # on the CPU target the check keeps float32
            "import torch\ndef load(name, device):\n    model = build_model(name)\n"
            "    if device == 'cpu':\n        model.float()\n    return model\n",
            options={"targets": ["cpu"]},
        ),
        Valid(  # in host memory: a smaller copy of an output, not what the step computes in
            "import torch\nfor im, targets in loader:\n    out = model(im.to(device))\n    saved.append(out.cpu().half())\n"
        ),
        Valid(  # loaded into host memory: a float16 copy to save, not to compute with
            "import torch\nclass Loader:\n    def __init__(self, path):\n"
            "        self.images = torch.load(path, map_location='cpu')['images']\n"
            "        self.small = self.images.half()\n"
        ),
        Valid(  # yolov5: anchors rounded through float16, the model kept in float32
            "import torch\nmodel = Model(cfg).to(device)\nmodel.half().float()\n"
        ),
        Valid(
            "import torch\nfrom transformers import AutoModel\n"
            'm = AutoModel.from_pretrained("x", torch_dtype=torch.bfloat16)\n'
        ),
        Valid(
            "import torch\nfrom diffusers import DiffusionPipeline\n"
            'p = DiffusionPipeline.from_pretrained("x", torch_dtype=torch.float16)\n',
            options={"targets": ["mps", "xpu", "rocm"]},
        ),
        Valid(
            "import torch\nfrom peft import PeftModel\n"
            'm = PeftModel.from_pretrained(base, "x", torch_dtype=torch.float16)\n'
        ),
        Valid(
            "import torch\nx = torch.randn(3, dtype=torch.float16)\n"
            "latents = latents.half()\nstates = encoder_hidden_states.half()\n"
        ),
        Valid('def load(torch, Model):\n    return Model.from_pretrained("x", torch_dtype=torch.float16)\n'),
        Valid("import torch\nif model.dtype == torch.float16:\n    model = model.to(torch.bfloat16)\n"),
        Valid(
            'import torch\ndtype = torch.float16 if device.type == "cuda" else torch.float32\n'
            'unet = UNet2DConditionModel.from_pretrained("x", torch_dtype=dtype)\n'
        ),
        Valid(
            "from torch.cuda import is_available as has_cuda\nimport torch\nif has_cuda():\n"
            '    pipe = DiffusionPipeline.from_pretrained("x", torch_dtype=torch.float16)\n'
        ),
        Valid("import pytest\nimport torch\nwith pytest.raises(ValueError):\n    model.half()\n"),
        Valid(
            "import torch\nupcast = self.vae.dtype == torch.float16 and self.vae.config.force_upcast\n"
            "if upcast:\n    self.vae.float()\nimage = self.vae.decode(latents)\nif upcast:\n    self.vae.half()\n"
        ),
        # branches that only another device takes (CUDA, MPS): float16 is right there
        Valid(
            'import torch\nif device == "cuda":\n    model = model.to(device)\nelif device == "mps":\n'
            "    model = model.half()\n"
        ),
        Valid("import torch\nif device.type == 'cuda':\n    model.half()\n"),
        Valid(
            "import torch\nif torch.cuda.is_available():\n    pass\nelif torch.backends.mps.is_available():\n"
            '    pipe = DiffusionPipeline.from_pretrained("x", torch_dtype=torch.float16)\n'
        ),
        Valid(
            'import torch\ndtype = torch.float16 if device.type in ("cuda", "mps") else torch.bfloat16\n'
            'unet = UNet2DConditionModel.from_pretrained("x", torch_dtype=dtype)\n'
        ),
        Valid(
            "import torch\ndef load(device):\n    if not str(device).startswith('cuda'):\n        return None\n"
            "    return Net().half()\n"
        ),
        Valid(  # a comparison sets nothing; dtypes read back from a model
            "import torch\nassert dtype_kwargs('float16') == {'torch_dtype': 'float16'}\nself.dtype = model.dtype\n"
            "dtype = torch.bfloat16\n"
        ),
        # a cast on the host, a move to the CPU
        Valid('import torch\nx = x.to(torch.float16)\ny = y.to("cpu", dtype=torch.float16)\nz = z.half().cpu()\n'),
        # conversion scripts: weights loaded on the host and saved (LLaVA's apply_delta, alpaca-lora's export)
        Valid(
            "import torch\nfrom transformers import AutoModelForCausalLM\n"
            "base = AutoModelForCausalLM.from_pretrained(p, torch_dtype=torch.float16, low_cpu_mem_usage=True)\n"
            "base.half()\nbase.save_pretrained(out)\n"
        ),
        Valid(
            "import torch\nfrom transformers import LlamaForCausalLM\n"
            'm = LlamaForCausalLM.from_pretrained(p, torch_dtype=torch.float16, device_map={"": "cpu"})\n'
        ),
    ]
    INVALID = [
        Invalid(  # consistency_models (guided-diffusion's descendants): the UNet halves its own weights
            "import torch\ndef main(args):\n    model = create_model(args)\n    model.to(dist_util.dev())\n"
            "    if args.use_fp16:\n        model.convert_to_fp16()\n    target_model.convert_to_fp16()\n"
            "    table.convert_to_fp16()\n",
            lines=[6, 7],
            message="`.convert_to_fp16()`",
        ),
        Invalid(  # YOLOX's trainer: the batch cast to the dtype it keeps as `data_type`
            "import torch\nclass Trainer:\n    def __init__(self, args):\n"
            "        self.data_type = torch.float16 if args.fp16 else torch.float32\n"
            "    def train_one_iter(self, inps):\n        return self.model(inps.to(self.data_type))\n",
            lines=[4],
        ),
        Invalid(  # CLIP's load(): the weights were converted to float16; only the CPU gets them back in float32
            "import torch\ndef load(name, device='cuda'):\n    model = build_model(name).to(device)\n"
            "    if str(device) == 'cpu':\n        model.float()\n    return model\n",
            lines=[4],
            message="`if str(device) == 'cpu':` keeps float32 for the CPU alone: every other device, the target too,",
        ),
        Invalid(  # shap-e's frozen CLIP: float16 weights unless the device is the CPU
            "import clip\nimport torch\nmodel, preprocess = clip.load('ViT-L/14', device=device)\n"
            "cpu_model, _ = clip.load('ViT-L/14', device='cpu')\ndefault_model, _ = clip.load('ViT-B/32')\n"
            "def host_copy(name):\n    device = 'cpu'\n    return clip.load(name, device=device)\n",
            lines=[3],
            message="`clip.load(...)` keeps CLIP's weights and runs it in float16",
        ),
        Invalid(  # yolov5's val.py and consistency models' attention: tensors cast in step code
            "import torch\nfor im, targets in loader:\n    im = im.half() if half else im.float()\n    out = model(im)\n"
            "class QKVAttention(torch.nn.Module):\n    def forward(self, qkv):\n        qkv = qkv.half()\n"
            "        return qkv.softmax(-1)\n",
            lines=[3, 7],
            message="computes the step in float16",
        ),
        Invalid(  # airbench: the network made float16 module by module, its norms kept in float32
            "import torch\nfrom torch import nn\nclass Net(nn.Sequential):\n    def __init__(self, layers):\n"
            "        super().__init__(*layers)\n        for mod in self.modules():\n"
            "            if isinstance(mod, nn.BatchNorm2d):\n                mod.float()\n"
            "            else:\n                mod.half()\n",
            lines=[10],
            message="runs the model in float16",
        ),
        Invalid(  # airbench: the dataset loaded onto the device, then kept there in float16
            "import torch\nclass Loader:\n    def __init__(self, path):\n"
            "        data = torch.load(path, map_location=torch.device('cuda'))\n"
            "        self.images, self.labels = data['images'], data['labels']\n"
            "        self.images = (self.images.half() / 255).permute(0, 3, 1, 2)\n",
            lines=[6],
            message="puts the tensor on the device in float16",
        ),
        Invalid(  # pytorch/examples' minGPT-ddp: float16 autocast, whatever the device type
            "import torch\nwith torch.amp.autocast(device_type=self.device_type, dtype=torch.float16, enabled=amp):\n"
            "    loss = model(x)\nwith torch.autocast('mps', dtype=torch.float16):\n    pass\n",
            lines=[2],
            message="autocast to `torch.float16` runs the region in float16",
        ),
        Invalid(  # guided diffusion's convert_module_to_f16, applied to the model's layers
            "import torch.nn as nn\ndef convert_module_to_f16(l):\n    if isinstance(l, (nn.Conv1d, nn.Conv2d)):\n"
            "        l.weight.data = l.weight.data.half()\n        if l.bias is not None:\n            l.bias.data = l.bias.data.half()\n",
            lines=[4, 6],
        ),
        Invalid(
            "import torch\nfrom transformers import AutoModelForCausalLM\n"
            'm = AutoModelForCausalLM.from_pretrained("x", torch_dtype=torch.float16)\n',
            lines=[3],
            message="float16",
        ),
        Invalid('import torch as T\np = StableDiffusionPipeline.from_single_file("x.ckpt", dtype=T.half)\n', lines=[2]),
        Invalid(
            'from torch import float16\nfrom transformers import pipeline\nclf = pipeline("ner", torch_dtype=float16)\n',
            lines=[3],
        ),
        Invalid(
            "from torch.nn import Module as Base\nimport torch.nn\n"
            "DTYPE = torch.float16 if args.low_memory else torch.float32\n"
            'unet = UNet2DConditionModel.from_pretrained("x", torch_dtype=DTYPE)\n',
            lines=[3],
        ),
        Invalid(
            'from ..models import AutoencoderKL\nvae = AutoencoderKL.from_pretrained("x", torch_dtype="float16")\n',
            lines=[2],
        ),
        Invalid(
            "import torch\n"
            'p = DiffusionPipeline.from_pretrained("x", torch_dtype={"unet": torch.bfloat16, "default": torch.float16})\n',
            lines=[2],
        ),
        Invalid(
            "import torch\nunet = unet.half()\nself.text_encoder_2.half()\n"
            "net = Net().half()\nm = module.to(device).half()\n",
            lines=[2, 3, 4, 5],
        ),
        Invalid('import torch\nm = AutoModel.from_pretrained("x").half()\n', lines=[2], options={"targets": ["cpu"]}),
        # the branches another device does not take: the `else`, and `!=`
        Invalid(
            'import torch\nif device.type == "cuda":\n    pass\nelse:\n    model.half()\n'
            'if device.type != "mps":\n    unet.half()\n',
            lines=[5, 7],
        ),
        Invalid("import torch\nif device == 'cpu':\n    model.half()\n", lines=[3], options={"targets": ["cpu"]}),
        Invalid(
            "import torch\nif dtype in (torch.float16, torch.bfloat16):\n    pipe.unet.half()\n"
            'if device.type in ("cuda", "cpu"):\n    m = Model.from_pretrained("x", torch_dtype=torch.float16)\n',
            lines=[3, 5],
        ),
        Invalid(  # LLaVA's builder: the loader's keyword arguments gathered in a dict
            "import torch\nfrom transformers import AutoModel\ndef load(p, device, kwargs):\n"
            '    kwargs = {"device_map": "auto", **kwargs}\n    if device == "cuda":\n        kwargs["load_in_8bit"] = True\n'
            '    else:\n        kwargs["torch_dtype"] = torch.float16\n    return AutoModel.from_pretrained(p, **kwargs)\n'
            'model_kwargs = dict(torch_dtype=torch.float16)\nkw = {"dtype": torch.half}\n'
            'm = AutoModel.from_pretrained("x", **kw)\n',
            lines=[8, 10, 11],
        ),
        # casts: a model, a tensor moved to the device in float16 (LLaVA's serving code)
        Invalid(
            "import torch\nmodel.to(torch.float16)\nimages = images.to(model.device, dtype=torch.float16)\n"
            "x = x.half().cuda()\ny = y.cuda().half()\nz = z.to(device, torch.half)\n",
            lines=[2, 3, 4, 5, 6],
        ),
        Invalid(  # float16 where the user's option asks for half precision: named in the message
            "import torch\nfrom transformers import AutoModel\nkw = {}\nif cfg.dtype == 'float16':\n"
            "    kw['torch_dtype'] = torch.float16\nelif cfg.dtype in ('bf16', 'bfloat16'):\n"
            "    kw['torch_dtype'] = torch.bfloat16\nm = AutoModel.from_pretrained('x', **kw)\n"
            "if args.fp16:\n    m.half()\ndtype = torch.float16 if args.precision == 'fp16' else torch.float32\n"
            "unet = UNet2DConditionModel.from_pretrained('x', torch_dtype=dtype)\n",
            lines=[5, 10, 11],
            message="asks for half precision",
        ),
        Invalid(  # open_clip: the option offers bfloat16 too, the one to pick on these targets (info)
            "import torch\ndef cast_dtype(precision):\n    if precision == 'bf16':\n        return torch.bfloat16\n"
            "    elif precision == 'fp16':\n        dtype = torch.float16\n        return dtype\n"
            "def load(model, precision):\n    dtype = torch.float16 if 'fp16' in precision else torch.bfloat16\n"
            "    model.to(dtype=dtype)\n",
            lines=[6, 9],
            message="another choice gives bfloat16",
        ),
        Invalid(  # yolov5 and guided diffusion: inputs on the device, a loaded model, dtypes casts read
            "import torch as th\nim = th.from_numpy(im).to(model.device)\nim = im.half() if model.fp16 else im.float()\n"
            "model = attempt_load(weights, device).half()\n"
            "warm = th.empty((1, 3, 64, 64), dtype=th.half if fp16 else th.float, device=device)\n"
            "class UNet:\n    def __init__(self, use_fp16):\n        self.dtype = th.float16 if use_fp16 else th.float32\n"
            "inputs_dtype = th.half\n",
            lines=[3, 4, 5, 8, 9],
        ),
        Invalid(  # MiniGPT-4: autocast to the parameter's default, float16, for every caller that gives none
            "import contextlib\nimport torch\nclass Base(torch.nn.Module):\n"
            "    def maybe_autocast(self, dtype=torch.float16):\n        if self.device != torch.device('cpu'):\n"
            "            return torch.autocast('cuda', dtype=dtype)\n        return contextlib.nullcontext()\n",
            lines=[4],
            message="autocast to `torch.float16` runs the region in float16",
        ),
        Invalid(  # detectron2's AMPTrainer: the attribute is set once, from a parameter that defaults to
            # float16; the assert that CUDA is there stops the target until a port drops it
            "import torch\nclass AMPTrainer:\n    def __init__(self, precision: torch.dtype = torch.float16):\n"
            "        self.precision = precision\n    def run_step(self, model, x):\n"
            "        assert torch.cuda.is_available()\n"
            "        with torch.autocast('cuda', dtype=self.precision):\n            return model(x)\n",
            lines=[3],
            message="autocast to `torch.float16` runs the region in float16",
        ),
        Invalid(  # AutoGPTQ's loader: the parameter's default is the dtype every caller gets
            "import torch\ndef from_quantized(path, device=None, torch_dtype: torch.dtype = torch.float16):\n"
            "    return load(path, torch_dtype=torch_dtype)\n",
            lines=[2],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._reported: set[int] = set()
        self._places = False  # the module moves something to a device
        self._saves = False  # the module writes weights

    def _note_placement(self, node: cst.Call) -> None:
        method = patterns.method_name(node) or patterns.target_name(node.func)
        if method in _SAVES:
            self._saves = True
        elif not self._places:
            self._places = self._moves_to_device(node) or any(
                arg.keyword is not None and arg.keyword.value in _PLACEMENT_KEYWORDS and not self._on_cpu(arg.value)
                for arg in node.args
            )

    def _moved_next(self, node: cst.Call) -> bool:
        """`x.half().cuda()`: the call's result is moved to a device."""
        ancestors = self.ctx.ancestors
        return (
            len(ancestors) > 1
            and isinstance(ancestors[-1], cst.Attribute)
            and ancestors[-1].value is node
            and isinstance(ancestors[-2], cst.Call)
            and ancestors[-2].func is ancestors[-1]
            and self._moves_to_device(ancestors[-2])
        )

    def _cast_back_next(self, node: cst.Call) -> bool:
        """`x.half().float()`: the call's result is cast straight to another dtype."""
        ancestors = self.ctx.ancestors
        if not (len(ancestors) > 1 and isinstance(ancestors[-1], cst.Attribute) and ancestors[-1].value is node):
            return False
        outer = ancestors[-2]
        if not (isinstance(outer, cst.Call) and outer.func is ancestors[-1]):
            return False
        method = ancestors[-1].attr.value
        if method in _WIDENING:
            return True
        dtype = self._to_dtype(outer) if method == "to" else None
        return dtype is not None and self._spells_dtype(dtype) and not self._is_float16(dtype)

    def visit_If(self, node: cst.If) -> None:
        """CLIP's `if str(device) == "cpu": model.float()`, with no `else`: float32 for the CPU
        alone, so every other device keeps the float16 the model was converted to."""
        test, module_flow = node.test, self.ctx.flow
        if node.orelse is not None or type(test) is not cst.Comparison or len(test.comparisons) != 1:
            return
        sides = (test.left, test.comparisons[0].comparator)
        if type(test.comparisons[0].operator) is not cst.Equal or module_flow is None:
            return
        if not any(module_flow.is_cpu(side) for side in sides) or not any(patterns.is_device_like(s) for s in sides):
            return
        if any(type(each) is cst.Call and self._casts_to_float32(each) for each in descendants(node.body)):
            shown = cst.Module([]).code_for_node(test)
            what = f"`if {shown}:` keeps float32 for the CPU alone: every other device, the target too,"
            self._report(test, what, _NOT_THE_CPU)

    def _casts_to_float32(self, call: cst.Call) -> bool:
        """`x.float()`, `x.to(torch.float32)`."""
        method = patterns.method_name(call)
        if method == "float" and not call.args:
            return not patterns.resolves_outside_torch_classes(self.ctx.qualified_names(call.func))
        dtype = self._to_dtype(call) if method == "to" else None
        return dtype is not None and bool(self.ctx.qualified_names(dtype) & _FLOAT32)

    def _to_dtype(self, call: cst.Call) -> cst.BaseExpression | None:
        """The dtype a `.to(...)` casts to: `dtype=`, or a positional argument that is not the
        device (`.to(torch.float16)`, `.to(device, torch.float16)`)."""
        keyword = patterns.keyword(call, "dtype")
        if keyword is not None:
            return keyword.value
        second = patterns.positional(call, 1)
        if second is not None:
            return second.value
        first = patterns.positional(call, 0)
        return first.value if first is not None and self._spells_dtype(first.value) else None

    def _moves_to_device(self, node: cst.CSTNode | None) -> bool:
        """A call that moves its receiver to a device: `.cuda()`, `.to(device)`,
        `.to(device, dtype)`, `.to(device=...)` (not a cast alone, not to the CPU)."""
        if not isinstance(node, cst.Call):
            return False
        method = patterns.method_name(node)
        if method == "cuda":
            return True
        if method != "to":
            return False
        device = patterns.keyword(node, "device")
        if device is not None:
            return not self._on_cpu(device.value)
        first = patterns.positional(node, 0)
        return first is not None and not self._spells_dtype(first.value) and not self._on_cpu(first.value)

    def _bound_on_device(self, receiver: cst.BaseExpression) -> bool:
        """`im.half()` after `im = torch.from_numpy(im).to(model.device)`: a name bound to a
        tensor moved to the device."""
        return any(self._moves_to_device(value) for value in values_reaching(self.ctx, receiver))

    def _spells_dtype(self, node: cst.BaseExpression) -> bool:
        """`torch.float16`, `th.half` (as the flow knows dtypes), `dtype`, `self.dtype`: a cast."""
        flow = self.ctx.flow
        return (flow is not None and flow.is_dtype(node)) or "dtype" in patterns.dotted(node).rpartition(".")[2]

    def _on_cpu(self, node: cst.BaseExpression) -> bool:
        """`"cpu"`, `torch.device("cpu")` (as the flow knows them), `{"": "cpu"}`."""
        if isinstance(node, cst.Dict):
            values = [e.value for e in node.elements if isinstance(e, cst.DictElement)]
            return bool(values) and all(self._on_cpu(value) for value in values)
        flow = self.ctx.flow
        return flow is not None and flow.is_cpu(node)

    def leave_Module(self, node: cst.Module) -> None:
        """A conversion script loads, casts and saves weights on the host: its float16 is the
        checkpoint's, and nothing of it runs on the target."""
        if self._saves and not self._places:
            self.reports.clear()

    def visit_Call(self, node: cst.Call) -> None:
        if self._loads_model(node):
            options = kwargs.call_options(self.ctx, node)  # also what `**model_kwargs` holds
            if any(self._on_cpu(value) for value in options.values("device_map")):
                return  # loaded into host memory: the dtype is the checkpoint's (an export script)
            for keyword in _DTYPE_KEYWORDS:
                for value in options.values(keyword):
                    self._check_dtype(node, keyword, value)
        elif kwargs.is_dict_call(self.ctx, node):
            arg = patterns.keyword(node, _HF_DTYPE)
            if arg is not None:
                self._check_dtype(node, _HF_DTYPE, arg.value)
        elif patterns.method_name(node) in ("half", "to") and isinstance(node.func, cst.Attribute):
            self._check_cast(node, node.func)
        elif patterns.method_name(node) == _TO_FP16 and not node.args and isinstance(node.func, cst.Attribute):
            self._check_to_fp16(node, node.func)
        elif self.ctx.qualified_names(node.func) & _FACTORIES:
            self._check_factory(node)
        elif self.ctx.qualified_names(node.func) & _AUTOCASTS:
            self._check_autocast(node)
        elif self.ctx.qualified_names(node.func) & _CLIP_LOADERS:
            self._check_clip_load(node)
        self._note_placement(node)

    def _check_clip_load(self, node: cst.Call) -> None:
        """OpenAI CLIP's `clip.load(name, device)`: its weights are float16, and it casts them to
        float32 only where `str(device) == "cpu"`. Without a device it picks CUDA or the CPU."""
        device = patterns.argument(node, 1, "device")
        if device is None:
            return
        value = device.value
        bound = self.ctx.assigned_value(value) if isinstance(value, cst.Name) else None  # `device = "cpu"`
        if not self._on_cpu(value) and (bound is None or not self._on_cpu(bound)):
            self._report(node.func, "`clip.load(...)`", self._reach(node), "keeps CLIP's weights and runs it")

    def _check_autocast(self, node: cst.Call) -> None:
        """`torch.autocast(device_type, dtype=torch.float16)`: the region computes in float16
        wherever the port takes it (CUDA's autocast becomes the target's), unless it names a
        device that no selected bfloat16 target is (`"mps"`)."""
        dtype = patterns.argument(node, 1, "dtype")
        device = patterns.keyword(node, "device_type") or patterns.positional(node, 0)
        named = patterns.string_value(device.value) if device is not None else None
        bf16 = (target_data.get(name) for name in self.ctx.targets)
        selected = {"cuda", *(target.device_type for target in bf16 if target.amp_dtype == "bfloat16")}
        if dtype is not None and (named is None or named in selected):
            given = dtype.value
            resolver = self.ctx.resolver
            default = resolver.parameter_default(given) if type(given) is cst.Name and resolver else None
            # MiniGPT-4's `def maybe_autocast(self, dtype=torch.float16)`: what callers get unless they say
            self._report_float16(
                default or self._attribute_default(given) or given, node, "autocast to `{}`", "runs the region"
            )

    def _attribute_default(self, given: cst.BaseExpression) -> cst.BaseExpression | None:
        """The default of the parameter that `self.<name>` is set from, where the module sets it
        once (detectron2's AMPTrainer: `def __init__(..., precision=torch.float16)`, then
        `self.precision = precision`): what every trainer made without it gets."""
        module_flow = self.ctx.flow
        if module_flow is None or not is_self_attribute(given):
            return None
        assert type(given) is cst.Attribute
        values = module_flow.self_attribute_values(given.attr.value)
        if len(values) != 1 or type(values[0][0]) is not cst.Name:
            return None
        value, scope = values[0]
        return module_flow.in_scope(scope, partial(module_flow.resolver.parameter_default, value))

    def _check_factory(self, node: cst.Call) -> None:
        """`torch.empty(shape, dtype=torch.half if fp16 else torch.float, device=self.device)`:
        a tensor made on the device in float16."""
        dtype, device = patterns.keyword(node, "dtype"), patterns.keyword(node, "device")
        if dtype is not None and device is not None and not self._on_cpu(device.value):
            self._report_float16(dtype.value, node, "`dtype={}`", "puts the tensor on the device")

    def _report_float16(self, dtype: cst.BaseExpression, call: cst.Call, what: str, runs: str) -> None:
        """Report each float16 value a call's dtype may take, `what` showing it as written."""
        for literal, where in self._float16_values(dtype, ANYWHERE):
            shown = patterns.string_value(literal) or min(self.ctx.qualified_names(literal))
            self._report(literal, what.format(shown), self._reach(call, where), runs)

    def _check_to_fp16(self, node: cst.Call, method: cst.Attribute) -> None:
        """guided-diffusion's `model.convert_to_fp16()` (copied by its many descendants), which
        halves the model's convolution and linear weights: `.half()` by another name."""
        if self._is_model(method.value) and not self._expects_error():
            if not under_test([*self.ctx.ancestors, node], self._keeps_float16):
                self._report(node, f"`.{_TO_FP16}()`", self._reach(node), "runs the model")

    def _check_cast(self, node: cst.Call, method: cst.Attribute) -> None:
        """`.half()` or `.to(torch.float16)` on a model, and a tensor moved to the device in
        float16 (`x.to(device, dtype=torch.float16)`, `x.half().cuda()`)."""
        if patterns.resolves_outside_torch_classes(self.ctx.qualified_names(method)):
            return
        if method.attr.value == "half":
            if node.args:
                return
            what, dtype = "`.half()`", node
        else:
            dtype = self._to_dtype(node)
            if dtype is None or not self._is_float16(dtype):
                return
            what = f"`.to({min(self.ctx.qualified_names(dtype), default='float16')})`"
        if self._cast_back_next(node):
            return  # `model.half().float()`: rounded through float16, kept in float32
        placed = (
            self._moves_to_device(node)
            or self._moves_to_device(method.value)
            or self._moved_next(node)
            or self._bound_on_device(method.value)
            or (self.ctx.flow is not None and self.ctx.flow.home(method.value) is Home.MOVED)
        )
        model = self._is_model(method.value) or _parameter_data(method.value)
        stepping = not (model or placed) and self._in_step(method.value)
        if (
            (model or placed or stepping)
            and not self._expects_error()
            and not under_test([*self.ctx.ancestors, node], self._keeps_float16)
        ):
            runs = "runs the model" if model else "computes the step" if stepping else "puts the tensor on the device"
            self._report(dtype, what, self._reach(node), runs)

    def _in_step(self, tensor: cst.BaseExpression) -> bool:
        """Whether a cast is of a tensor in step code (forward(), a step loop), where what is
        computed on is on the device, unless it is in host memory."""
        module_flow = self.ctx.flow
        ancestors = self.ctx.ancestors
        if module_flow is None or module_flow.off_the_step_path(ancestors) or module_flow.home(tensor) is Home.HOST:
            return False
        return module_flow.step_context(ancestors) is not None

    def visit_Param(self, node: cst.Param) -> None:
        if node.default is not None and node.name.value == _HF_DTYPE:
            self._check_dtype(node, _HF_DTYPE, node.default)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        key = patterns.string_value(node.key)
        ancestors = self.ctx.ancestors
        compared = len(ancestors) > 1 and isinstance(ancestors[-2], (cst.Comparison, cst.ComparisonTarget))
        if key in _DTYPE_KEYWORDS and not compared:  # `assert kwargs == {"torch_dtype": "float16"}` sets nothing
            self._written(node, key, node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            key = patterns.setting_key(target.target) if isinstance(target.target, cst.Subscript) else None
            if key in _DTYPE_KEYWORDS:
                self._written(node, key, node.value)
            elif _DTYPE_NAME.search(patterns.target_name(target.target) or ""):
                self._check_dtype(node, patterns.dotted(target.target), node.value)

    def _written(self, holder: cst.CSTNode, key: str, value: cst.BaseExpression) -> None:
        """A dtype written into a dict, judged where it is written: reported there for Hugging
        Face's `torch_dtype`, and for `dtype` where the user's option chooses it (elsewhere only
        when a loader receives the dict)."""
        if key == _HF_DTYPE or under_test(self.ctx.ancestors, chooses_float16):
            self._check_dtype(holder, key, value)

    def _loads_model(self, call: cst.Call) -> bool:
        names = self.ctx.qualified_names(call.func)
        if is_hf_pipeline(names):
            return True
        if patterns.method_name(call) not in _LOADERS:
            return False
        return not names or any(
            name.startswith(_LIBRARIES) or self.ctx.project.is_local(self.ctx.module.absolute(name)) for name in names
        )

    def _reach(self, node: cst.CSTNode, narrowed: Reach = ANYWHERE) -> Reach:
        """The device types the node the walk is at can run on (portcheck.flow), within `narrowed`;
        every device where only asserts that CUDA is there keep it on CUDA (detectron2's
        AMPTrainer: `assert torch.cuda.is_available()`): they stop the program on the target,
        so a port drops them, and the target runs what follows."""
        flow = self.ctx.flow
        if flow is None:
            return narrowed
        placement = flow.placement(self.ctx.ancestors, node)
        guards = [flow.guards[index] for index in placement.protected_by]
        if guards and not placement.checks and all(guard.asserts for guard in guards):
            return narrowed
        return flow.reach(self.ctx.ancestors, node) & narrowed

    def _check_dtype(self, holder: cst.CSTNode, keyword: str, expression: cst.BaseExpression) -> None:
        """The float16 values a dtype setting (in `holder`, where the walk is) can take,
        directly, through a name bound once, or per component in a dict (diffusers)."""
        if isinstance(expression, cst.Name):
            expression = self.ctx.assigned_value(expression) or expression
        values = [expression]
        if isinstance(expression, cst.Dict):
            values = [e.value for e in expression.elements if isinstance(e, cst.DictElement)]
        for value in values:
            for literal, where in self._float16_values(value, ANYWHERE):
                spelled = patterns.string_value(literal)
                shown = repr(spelled) if spelled is not None else min(self.ctx.qualified_names(literal))
                self._report(literal, f"`{keyword}={shown}`", self._reach(holder, where))

    def _float16_values(self, node: cst.BaseExpression, reach: Reach) -> Iterator[tuple[cst.BaseExpression, Reach]]:
        """Like `patterns.value_literals`, with the device types each value is chosen on: the
        branch an `if` keeps for another device is that device's
        (`torch.float16 if device.type == "cuda" else torch.float32`)."""
        if self._is_float16(node):
            yield node, reach
        elif isinstance(node, cst.IfExp):
            flow = self.ctx.flow
            holds, fails = flow.condition(node.test) if flow is not None else (ANYWHERE, ANYWHERE)
            yield from self._float16_values(node.body, reach & holds)
            yield from self._float16_values(node.orelse, reach & fails)
        elif isinstance(node, cst.BooleanOperation):
            yield from self._float16_values(node.left, reach)
            yield from self._float16_values(node.right, reach)

    def _keeps_float16(self, test: cst.BaseExpression) -> bool:
        """`model.dtype == torch.float16` (directly, in an `and`, or through a name bound
        once): `.half()` there restores the dtype the model was loaded with."""
        if isinstance(test, cst.Name):
            bound = self.ctx.assigned_value(test)
            return bound is not None and self._keeps_float16(bound)
        if isinstance(test, cst.BooleanOperation):
            return isinstance(test.operator, cst.And) and (
                self._keeps_float16(test.left) or self._keeps_float16(test.right)
            )
        return tests_equal(test, self._is_float16)

    def _expects_error(self) -> bool:
        """Inside `with pytest.raises(...)` or `self.assertRaises(...)`: the call must fail."""
        for ancestor in self.ctx.ancestors:
            if isinstance(ancestor, cst.With):
                for item in ancestor.items:
                    call = item.item
                    if isinstance(call, cst.Call) and patterns.target_name(call.func) in _RAISES:
                        return True
        return False

    def _is_float16(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Name, cst.Attribute)):
            return bool(self.ctx.qualified_names(node) & FLOAT16)
        return patterns.string_value(node) in _FLOAT16_STRINGS

    def _is_model(self, receiver: cst.BaseExpression) -> bool:
        """A `.half()` receiver that is a model: named like one, loaded with from_pretrained,
        a class instantiated in place (`Net().half()`), or a name bound once to either."""
        while (
            isinstance(receiver, cst.Call)
            and isinstance(receiver.func, cst.Attribute)
            and receiver.func.attr.value in _PASS_THROUGH
        ):
            receiver = receiver.func.value
        if isinstance(receiver, cst.Call):
            loads = _LOADING_FUNCTION.search(patterns.target_name(receiver.func) or "") is not None
            return loads or patterns.method_name(receiver) in _LOADERS or _instantiates_class(receiver)
        name = patterns.target_name(receiver)
        if name is not None and _MODEL_NAME.search(name):
            return True
        if isinstance(receiver, cst.Name):
            bound = self.ctx.assigned_value(receiver)
            if isinstance(bound, cst.Call) and (patterns.method_name(bound) in _LOADERS or _instantiates_class(bound)):
                return True
            return self._iterates_modules(receiver)
        return False

    def _iterates_modules(self, name: cst.Name) -> bool:
        """The target of a loop over a model's modules (`for mod in self.modules(): mod.half()`)."""
        for ancestor in reversed(self.ctx.ancestors):
            if isinstance(ancestor, cst.For) and isinstance(ancestor.target, cst.Name):
                if ancestor.target.value == name.value:
                    iterated = ancestor.iter
                    return isinstance(iterated, cst.Call) and patterns.method_name(iterated) in _MODULE_ITERATORS
        return False

    def _offers_bfloat16(self, choice: cst.If | cst.IfExp, chain: list[cst.CSTNode]) -> bool:
        """Whether the option's choice gives bfloat16 on another path: the other value of the
        `if` expression (open_clip's `torch.float16 if 'fp16' in precision else
        torch.bfloat16`), or a branch of the `if`/`elif` chain (`if precision == 'bf16': ...
        elif precision == 'fp16': ...`)."""
        if isinstance(choice, cst.IfExp):
            others: list[cst.CSTNode] = [choice.orelse]
        else:
            top = choice
            for parent, child in zip(reversed(chain[:-1]), reversed(chain[1:])):
                if child is top and isinstance(parent, cst.If) and parent.orelse is top:
                    top = parent  # an `elif`: its chain starts further up
            others = [top.body, *([top.orelse] if top.orelse is not None else [])]
            others = [other for other in others if other is not choice.body]
        return any(
            isinstance(each, (cst.Name, cst.Attribute)) and "torch.bfloat16" in self.ctx.qualified_names(each)
            for other in others
            for each in (other, *descendants(other))
        )

    def _report(self, node: cst.CSTNode, what: str, reach: Reach, runs: str = "runs the model") -> None:
        """Report for the targets whose device type can take the branch `node` is in: float16 is
        the right choice in code that only CUDA (or MPS...) runs."""
        if id(node) in self._reported:
            return
        self._reported.add(id(node))
        chain = [*self.ctx.chain(node), node]
        choice = _choosing_option(chain)
        severity = {
            name: level if reach.includes(target_data.get(name).device_type) else OFF
            for name, level in self.severity.items()
        }
        if choice is not None:
            option = cst.Module([]).code_for_node(choice.test)
            if self._offers_bfloat16(choice, chain):
                what = f"{what}, where `{option}` asks for half precision and another choice gives bfloat16,"
                severity = at_most_info(severity)  # the user picks that one on these targets
            else:
                what = f"{what}, where `{option}` asks for half precision,"
        affected = [t for t in self.ctx.targets if severity[t] > OFF]
        names = "/".join(affected) or "the selected targets"
        compute = verb(affected, "computes", "compute")
        self.report(node, severity=severity, what=what, runs=runs, targets=names, compute=compute)


def _choosing_option(chain: list[cst.CSTNode]) -> cst.If | cst.IfExp | None:
    """The choice by the user's option of the float16 at the end of `chain`: an `if` whose
    body, or an `if` expression whose first value, holds it (`if args.fp16:`, `torch.float16
    if use_fp16 else torch.float32`)."""
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, (cst.If, cst.IfExp)) and child is parent.body and chooses_float16(parent.test):
            return parent
    return None


def _parameter_data(receiver: cst.BaseExpression) -> bool:
    """`l.weight.data`, `p.data`: a module's parameters, cast in place (CLIP's and guided
    diffusion's `convert_weights`)."""
    if not (isinstance(receiver, cst.Attribute) and receiver.attr.value == "data"):
        return False
    owner = receiver.value
    return isinstance(owner, cst.Name) or (isinstance(owner, cst.Attribute) and owner.attr.value in ("weight", "bias"))


def _instantiates_class(call: cst.Call) -> bool:
    """`Net(...)`, `nn.Linear(...)`: a CamelCase callee, but not a tensor type."""
    name = patterns.target_name(call.func)
    return name is not None and name[:1].isupper() and not name.isupper() and not name.endswith("Tensor")


_SAVES = frozenset({"save_pretrained", "save", "save_file", "save_model", "save_checkpoint"})
# Functions named for loading a model (yolov5's `attempt_load(weights, device)`, `load_model(...)`).
_LOADING_FUNCTION = re.compile(r"(^|_)load_?(model|checkpoint|pretrained|weights)?$")
_FACTORIES = frozenset(
    f"torch.{name}" for name in ("empty", "zeros", "ones", "full", "rand", "randn", "tensor", "as_tensor", "arange")
)
_PLACEMENT_KEYWORDS = frozenset({"device", "device_map"})
