from __future__ import annotations

import re

import libcst as cst

from portcheck import patterns
from portcheck.rule import Invalid, Rule, Valid
from portcheck.rules.shapes import RECOMPILE_SEVERITY, advice

# What builds YOLO's loaders: yolov5's `create_dataloader`, ultralytics' `build_yolo_dataset`
# (not the dataset class alone, which autoanchor reads only for its labels and shapes).
_BUILDS_DATA = re.compile(r"loader|build", re.IGNORECASE)
# What letterboxes YOLO's images: `letterbox` itself, and yolov5's loader of image files to detect
# on (not its streams and screenshots, whose frames keep one size: one shape each).
_LETTERBOXES = re.compile(r"^(letterbox|LoadImages)$")
_OFF = ("False", "None")


class RectangularBatches(Rule):
    """## What it does
    Reports YOLO's rectangular batches and images: a dataset or loader built with `rect=` on
    (`create_dataloader(val_path, ..., rect=True)`, `create_dataloader(..., rect=pt)`,
    ultralytics' `build_yolo_dataset(cfg, path, batch, data, mode, rect=mode == "val")`),
    which gives each batch the shape of its images' aspect ratio, and images letterboxed to the
    smallest rectangle their stride allows (`LoadImages(source, img_size=640, stride=32,
    auto=pt)`, `letterbox(im, 640, auto=True)`), which gives each image its own. Not where the
    value is `False` or `None`, an attribute (`rect=opt.rect`, a command-line option off
    unless asked for; `auto=self.auto`, a setting given elsewhere), or a parameter passed
    through (the call that gives it is reported).

    ## Why is this bad?
    The input shape follows the data: every batch (or image) of a new aspect ratio is a new
    shape, and the model's forward, the loss and non-maximum suppression compile a new graph
    for it on XLA, TorchTPU and Gaudi. Validation that runs after every epoch compiles again for
    each shape. Trainium needs all shapes known ahead of time.

    ## Example
    ```python
    val_loader = create_dataloader(val_path, imgsz, batch_size, gs, rect=True, pad=0.5)[0]
    ```

    ## Use instead
    ```python
    val_loader = create_dataloader(val_path, imgsz, batch_size, gs, rect=False)[0]  # square imgsz batches
    ```
    and `auto=False` to letterbox every image to the full `img_size`.

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: square inputs change the padding (and slightly the accuracy) the model was
    validated with.
    """

    code = "PC519"
    name = "rectangular-batches"
    message = "`{option}` in `{call}(...)` shapes each {unit} by its aspect ratio: a new input shape per {unit}"
    hint = "batch at one fixed square size (`rect=False`; `auto=False` letterboxes to the full img_size){advice}"
    severity = RECOMPILE_SEVERITY
    triggers = (b"rect=", b"auto=")

    VALID = [
        Valid(  # a camera's frames keep one size: one shape per stream
            "import torch\ndataset = LoadStreams(source, img_size=imgsz, stride=stride, auto=pt)\n"
        ),
        Valid(  # autoanchor reads the dataset's labels and shapes: no batch reaches a model
            "import torch\ndataset = LoadImagesAndLabels(data_dict['train'], augment=True, rect=True)\n"
        ),
        Valid(
            "import torch\nfrom utils.dataloaders import create_dataloader\n"
            "train_loader, dataset = create_dataloader(path, 640, 16, 32, rect=opt.rect)\n"
            "val_loader = create_dataloader(path, 640, 32, 32, rect=False)[0]\n"
        ),
        Valid(  # matplotlib's rectangle, and letterboxing to the full size
            "import torch as T\nimport matplotlib.pyplot as plt\nplt.tight_layout(rect=[0, 0, 1, 0.95])\n"
            "im = letterbox(im0, 640, stride=32, auto=False)[0]\n"
        ),
        Valid(  # a parameter passed through: the call that gives it says
            "from torch.utils.data import DataLoader as Loader\nimport torch.utils.data\n"
            "def create_dataloader(path, imgsz, rect=False):\n"
            "    dataset = LoadImagesAndLabels(path, imgsz, rect=rect)\n    return Loader(dataset)\n"
        ),
        Valid("from torch import nn\ndef build(torch, path):\n    return torch.load(path, rect=None)\n"),
    ]
    INVALID = [
        Invalid(  # yolov5's train.py: the validation loader after every epoch
            "import torch\nfrom utils.dataloaders import create_dataloader\n"
            "val_loader = create_dataloader(val_path, imgsz, batch_size * 2, gs, rect=True, pad=0.5)[0]\n",
            lines=[3],
            message="shapes each batch by its aspect ratio",
        ),
        Invalid(  # yolov5's val.py and detect.py
            "import torch as T\nfrom torch import nn\nrect = False if task == 'benchmark' else pt\n"
            "dataloader = create_dataloader(data[task], imgsz, batch_size, stride, rect=rect)[0]\n"
            "dataset = LoadImages(source, img_size=imgsz, stride=stride, auto=pt)\n",
            lines=[4, 5],
        ),
        Invalid(  # ultralytics: rectangular batches in validation
            "from torch.utils.data import DataLoader as DL\nimport torch.distributed\n"
            "def build_dataset(self, img_path, mode='val', batch=None):\n"
            "    return build_yolo_dataset(self.args, img_path, batch, self.data, mode=mode, rect=mode == 'val')\n",
            lines=[4],
        ),
        Invalid(
            "import torch\nim = letterbox(im0, new_shape=640, auto=True)[0]\n",
            lines=[2],
            message="shapes each image by its aspect ratio",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        called = patterns.dotted(node.func).rpartition(".")[2]
        if not called:
            return
        for keyword, builds, unit in (("rect", _BUILDS_DATA, "batch"), ("auto", _LETTERBOXES, "image")):
            given = patterns.keyword(node, keyword)
            if given is not None and builds.search(called) and self._turned_on(given.value):
                option = cst.Module([]).code_for_node(given).strip().rstrip(",")
                self.report(given, option=option, call=called, unit=unit, advice=advice(self.ctx.targets))

    def _turned_on(self, value: cst.BaseExpression) -> bool:
        """Whether the option may be on: not `False`/`None`, a list (matplotlib's `rect=`), an
        attribute (`opt.rect`, `self.auto`) or a parameter passed through."""
        if type(value) is cst.Name and value.value in _OFF:
            return False
        if type(value) in (cst.List, cst.Tuple, cst.Attribute):
            return False
        resolver = self.ctx.resolver
        return not (type(value) is cst.Name and resolver is not None and resolver.parameter_of(value) is not None)
