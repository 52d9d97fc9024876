from __future__ import annotations

from functools import partial

import libcst as cst

from portcheck import flow, patterns
from portcheck.rule import FileContext, Invalid, Valid
from portcheck.rules.shapes import RECOMPILE_SEVERITY, StepRule, advice, shown
from portcheck.walk import descendants

# What resizes to a given size or scale.
_RESIZES = frozenset(
    {
        "torch.nn.functional.interpolate", "torch.nn.functional.upsample", "torch.nn.functional.upsample_bilinear",
        "torch.nn.functional.upsample_nearest", "torchvision.transforms.functional.resize",
    }
)  # fmt: skip
_SIZE_KEYWORDS = frozenset({"size", "scale_factor"})
# torchvision's crops of a random size (then resized): run on device tensors in forward(), each
# step slices a new shape. Kornia's crop by a transform of fixed output shape instead.
_RANDOM_CROPS = frozenset(
    f"torchvision.transforms.{where}RandomResizedCrop" for where in ("", "transforms.", "v2.", "v2.transforms.")
)
# What holds augmentations and runs them on its input.
_AUGMENTATION_HOLDERS = frozenset(
    {"torch.nn.Sequential", "torchvision.transforms.Compose", "torchvision.transforms.transforms.Compose",
     "torchvision.transforms.RandomApply", "torchvision.transforms.transforms.RandomApply",
     "torchvision.transforms.v2.Compose", "torchvision.transforms.v2.RandomApply"}
)  # fmt: skip
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
# torch factories, whose positional arguments (or `size=`) are the shape.
_FACTORIES = frozenset(
    f"torch.{name}" for name in ("zeros", "ones", "empty", "full", "rand", "randn", "randperm", "arange")
)
_FILLED = frozenset({"torch.full"})
# Python's and NumPy's random draws.
_DRAW_MODULES = ("random.", "numpy.random.")
_NUMBER_CASTS = frozenset({"int", "float", "round", "max", "min", "abs"})
_ROUNDING = frozenset({"math.ceil", "math.floor", "math.trunc"})
_DEPTH = 12  # names, casts and arithmetic to look through


class RandomShapeInStep(StepRule):
    """## What it does
    Reports, in a step loop, forward() or a method a framework runs every step (a BasicSR
    model's `feed_data()`), a resize or a tensor factory whose size comes from a random draw
    of Python or NumPy (`random.uniform`, `np.random.randint`), directly or through names and
    arithmetic: Real-ESRGAN's degradation, `F.interpolate(out, scale_factor=scale)` after
    `scale = np.random.uniform(1, 1.5)`; efficientvit's random number of point prompts,
    `torch.ones((n, n_p))` after `n_p = int(random.random() * 10 + 1)`. Also torchvision's
    `RandomResizedCrop` run there on the batch (BYOL's and DINO's augmentations in forward():
    `self.augment1(x)`, where the attribute holds an `nn.Sequential` with one), which slices a
    crop of random size before it resizes.

    ## Why is this bad?
    The output shape changes from step to step at random, so a compiled or lazily traced step
    (TorchTPU, torch_xla, Gaudi) compiles a new graph for most steps, and Trainium needs every
    shape known ahead of time. Random augmentation is fine; random shapes are not.

    ## Example
    ```python
    scale = np.random.uniform(0.5, 1.5)
    out = F.interpolate(out, scale_factor=scale, mode="bilinear")
    ```

    ## Use instead
    Draw from a few fixed sizes (each compiles once), or resize back to a fixed size in the
    same step:
    ```python
    scale = random.choice([0.5, 0.75, 1.0, 1.25, 1.5])
    out = F.interpolate(out, scale_factor=scale, mode="bilinear")
    ```

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: which sizes to allow is the augmentation's choice.
    """

    code = "PC514"
    name = "random-shape-in-step"
    message = "`{call}(...)` in {where} takes its size from a random draw (`{drawn}`): most steps get a new shape, and a compiled step recompiles for each"
    hint = "draw from a few fixed sizes (random.choice over a list), or resize back to a fixed size in the step{advice}"
    severity = RECOMPILE_SEVERITY
    every_n_steps = True
    triggers = (b"random", b"RandomResizedCrop")

    VALID = [
        # the random crop in the dataset's transforms, on the host; Kornia's crops to a fixed shape
        Valid(
            "import torch\nimport kornia.augmentation as K\nimport torchvision.transforms as T\n"
            "class Images(torch.utils.data.Dataset):\n    def __init__(self):\n"
            "        self.transform = T.Compose([T.RandomResizedCrop(224), T.ToTensor()])\n"
            "    def __getitem__(self, i):\n        return self.transform(self.images[i])\n"
            "class Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.crop = K.RandomResizedCrop((224, 224))\n"
            "    def forward(self, x):\n        return self.crop(x)\n"
        ),
        # drawn from a fixed list: a few shapes, each compiled once
        Valid(
            "import random\nimport torch.nn.functional as F\nfor x in loader:\n"
            "    scale = random.choice([0.5, 1.0, 2.0])\n    y = F.interpolate(x, scale_factor=scale)\n    y.sum().backward()\n"
        ),
        # a random value that is no size
        Valid(
            "import random\nimport torch\nfor x in loader:\n    p = random.random()\n"
            "    y = torch.full((4, 4), p)\n    (x * y).sum().backward()\n"
        ),
        # once, outside any step
        Valid("import numpy as np\nimport torch\nn = np.random.randint(1, 10)\nz = torch.zeros(n)\n"),
        # `torch` is a parameter here
        Valid(
            "import torch.nn\nimport random\ndef step(torch, loader):\n    for x in loader:\n"
            "        y = torch.nn.functional.interpolate(x, scale_factor=random.uniform(1, 2))\n"
            "        y.sum().backward()\n"
        ),
        Valid(
            "import numpy as np\nimport torch.nn.functional as F\nfor x in loader:\n"
            "    out = F.interpolate(x, scale_factor=np.random.uniform(1, 2))\n    out.sum().backward()\n",
            options={"targets": ["mps", "cpu"]},
        ),
    ]
    INVALID = [
        # BYOL: the augmentations run in forward(), on the device, with a random crop among them
        Invalid(
            "import torch\nfrom torch import nn\nimport torchvision.transforms as T\n"
            "def default(val, def_val):\n    return def_val if val is None else val\n"
            "class BYOL(nn.Module):\n    def __init__(self, net, image_size, augment_fn=None):\n        super().__init__()\n"
            "        DEFAULT_AUG = nn.Sequential(T.RandomHorizontalFlip(), T.RandomResizedCrop((image_size, image_size)))\n"
            "        self.augment1 = default(augment_fn, DEFAULT_AUG)\n        self.augment2 = self.augment1\n"
            "        self.net = net\n"
            "    def forward(self, x):\n        one, two = self.augment1(x), self.augment2(x)\n"
            "        return self.net(one) - self.net(two)\n",
            lines=[14, 14],
            message="in forward() takes its size from a random draw (`T.RandomResizedCrop(",
        ),
        # Real-ESRGAN's degradation, which BasicSR's loop runs every step
        Invalid(
            "import random\nimport numpy as np\nimport torch\nfrom torch.nn import functional as F\n"
            "from basicsr.models.srgan_model import SRGANModel\n\nclass RealESRGANModel(SRGANModel):\n"
            "    @torch.no_grad()\n    def feed_data(self, data):\n        out = data['gt']\n"
            "        updown_type = random.choices(['up', 'down', 'keep'], self.opt['resize_prob'])[0]\n"
            "        if updown_type == 'up':\n            scale = np.random.uniform(1, 1.5)\n"
            "        elif updown_type == 'down':\n            scale = np.random.uniform(0.15, 1)\n        else:\n"
            "            scale = 1\n        out = F.interpolate(out, scale_factor=scale, mode='area')\n"
            "        out = F.interpolate(out, size=(int(ori_h / 4 * scale), int(ori_w / 4 * scale)))\n"
            "        self.lq = out\n",
            lines=[18, 19],
            message="`F.interpolate(...)` in `feed_data()` of a BasicSR model (run every step) takes its size from a random draw",
        ),
        # yolov7's multi-scale training: a random side, rounded up to the stride for each axis
        Invalid(
            "import math\nimport random\nimport torch.nn.functional as F\nfor imgs, targets in loader:\n"
            "    sz = random.randrange(320, 960 + 32) // 32 * 32\n    sf = sz / max(imgs.shape[2:])\n"
            "    ns = [math.ceil(x * sf / 32) * 32 for x in imgs.shape[2:]]\n"
            "    imgs = F.interpolate(imgs, size=ns, mode='bilinear')\n    model(imgs).sum().backward()\n",
            lines=[8],
            message="takes its size from a random draw (`random.randrange(320, 960 + 32)`)",
        ),
        # efficientvit's SAM trainer: a random number of point prompts
        Invalid(
            "import random\nimport torch as T\nfor image, masks in loader:\n    n_p = int(random.random() * 10 + 1)\n"
            "    labels = T.ones((image.shape[0], n_p), device=image.device)\n    model(image, labels).backward()\n",
            lines=[5],
        ),
        Invalid(
            "import random\nfrom torch import randperm\nfor x in loader:\n"
            "    keep = randperm(x.shape[0])[: random.randint(1, 8)]\n    picked = randperm(random.randint(1, 8))\n"
            "    model(x[keep]).backward()\n",
            lines=[5],
        ),
        Invalid(
            "from numpy.random import randint\nimport torch.nn.functional\nimport torch\n"
            "for x in loader:\n    side = randint(224, 320)\n"
            "    x = torch.nn.functional.interpolate(x, size=(side, side))\n    model(x).backward()\n",
            lines=[6],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._crops = b"RandomResizedCrop" in ctx.source  # the module makes one: its calls may run it

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        if not names and type(node.func) in (cst.Name, cst.Attribute):
            crop = self._random_crop(node.func, 0) if self._crops else None
            if crop is not None:
                where = self.step_context(self.ctx.ancestors)
                if where is not None:
                    call = patterns.dotted(node.func) or "call"
                    self.report_in_step(node, where, call=call, drawn=shown(crop), advice=advice(self.ctx.targets))
            return
        if names & _RESIZES:
            sizes = [arg.value for arg in node.args[1:] if arg.keyword is None and not arg.star]
            sizes += [arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value in _SIZE_KEYWORDS]
        elif names & _FACTORIES:
            size = patterns.keyword(node, "size")
            sizes = [size.value] if size is not None else [arg.value for arg in node.args if arg.keyword is None]
            if names & _FILLED:
                sizes = sizes[:1]  # `torch.full(size, fill_value)`
        else:
            return
        drawn = next(filter(None, (self._draw(size, 0) for size in sizes)), None)
        if drawn is None:
            return
        where = self.step_context(self.ctx.ancestors)
        if where is not None:
            call = patterns.dotted(node.func) or "call"
            self.report_in_step(node, where, call=call, drawn=shown(drawn), advice=advice(self.ctx.targets))

    def _draw(self, node: cst.BaseExpression, depth: int) -> cst.Call | None:
        """The random draw a size comes from: the draw itself, through names (any of their
        values: `scale = np.random.uniform(1, 2)` in one branch, `scale = 1` in another),
        arithmetic, casts and rounding, tuples, comprehensions and items of a draw
        (`random.choices(...)[0]`). Not a choice
        from a fixed list, which gives only a few sizes."""
        if depth > _DEPTH:
            return None
        if type(node) is cst.Call:
            names = self.ctx.qualified_names(node.func)
            if any(name.startswith(_DRAW_MODULES) for name in names):
                return None if _picks_from_list(node, names) else node
            builtin = all(name.startswith("builtins.") for name in names)
            if (type(node.func) is cst.Name and node.func.value in _NUMBER_CASTS and builtin) or names & _ROUNDING:
                return next(filter(None, (self._draw(arg.value, depth + 1) for arg in node.args)), None)
            return None
        if type(node) is cst.Name:
            for value in self.ctx.assigned_values(node):
                found = self._draw(value, depth + 1)
                if found is not None:
                    return found
            return None
        parts: list[cst.BaseExpression] = []
        if type(node) is cst.BinaryOperation:
            parts = [node.left, node.right]
        elif type(node) is cst.UnaryOperation:
            parts = [node.expression]
        elif type(node) in (cst.Tuple, cst.List):
            parts = [element.value for element in node.elements]  # type: ignore[attr-defined]
        elif type(node) is cst.Subscript:
            parts = [node.value]
        elif type(node) in (cst.ListComp, cst.GeneratorExp):  # yolov7's `[math.ceil(x * sf / gs) * gs for x in ...]`
            parts = [node.elt]  # type: ignore[attr-defined]
        return next(filter(None, (self._draw(part, depth + 1) for part in parts)), None)

    def _random_crop(self, value: cst.BaseExpression, depth: int) -> cst.Call | None:
        """The torchvision `RandomResizedCrop(...)` a value is, or holds: in an `nn.Sequential`,
        a `Compose` or a `RandomApply`, through a name or a `self.` attribute bound to one (BYOL's
        `DEFAULT_AUG`), or through a function of the module that returns one of its arguments
        (`default(augment_fn, DEFAULT_AUG)`)."""
        module_flow, resolver = self.ctx.flow, self.ctx.resolver
        if depth > _DEPTH or module_flow is None or resolver is None:
            return None
        parts: list[cst.BaseExpression] = []
        if type(value) is cst.Call:
            names = self.ctx.qualified_names(value.func)
            if names & _RANDOM_CROPS:
                return value
            if names & _AUGMENTATION_HOLDERS or self._returns_an_argument(value):
                parts = [arg.value for arg in value.args if not arg.keyword or arg.keyword.value == "transforms"]
        elif type(value) is cst.Name and not self.ctx.qualified_names(value):
            parts = list(resolver.explicit_values(value))
        elif flow.is_self_attribute(value):
            bound = module_flow.self_attribute_values(value.attr.value)  # type: ignore[attr-defined]
            found = (module_flow.in_scope(scope, partial(self._random_crop, each, depth + 1)) for each, scope in bound)
            return next(filter(None, found), None)
        elif type(value) in (cst.List, cst.Tuple):
            parts = [element.value for element in value.elements]  # type: ignore[attr-defined]
        elif type(value) is cst.IfExp:
            parts = [value.body, value.orelse]
        return next(filter(None, (self._random_crop(part, depth + 1) for part in parts)), None)

    def _returns_an_argument(self, call: cst.Call) -> bool:
        """A call of the module's function whose every return is one of its parameters, or a
        choice between them (lucidrains' `default(val, d)`: `return val if exists(val) else d`)."""
        module_flow = self.ctx.flow
        if type(call.func) is not cst.Name or module_flow is None:
            return False
        function = module_flow.module_functions().get(call.func.value)
        if function is None:
            return False
        params = {param.name.value for param in function.params.params}
        returns = [node.value for node in descendants(function.body, _SCOPES) if type(node) is cst.Return]
        return bool(returns) and all(_chooses_among(value, params) for value in returns)


def _chooses_among(value: cst.BaseExpression | None, params: set[str]) -> bool:
    if type(value) is cst.Name:
        return value.value in params
    if type(value) is cst.IfExp:
        return _chooses_among(value.body, params) and _chooses_among(value.orelse, params)
    return False


def _picks_from_list(call: cst.Call, names: frozenset[str]) -> bool:
    """`random.choice([0.5, 1.0])`, `np.random.choice((256, 320))`: one of a few written sizes."""
    if not any(name.rpartition(".")[2] in ("choice", "choices") for name in names) or not call.args:
        return False
    return type(call.args[0].value) in (cst.List, cst.Tuple)
