from __future__ import annotations

import re

import libcst as cst

from portcheck import kwargs, patterns
from portcheck.kwargs import Options
from portcheck.rewrites.calls import is_none
from portcheck.rule import Invalid, Rule, Valid
from portcheck.rules.shapes import DATALOADERS, ONE_MORE_SHAPE_SEVERITY, advice, resolved_call

_RANDOM_SAMPLERS = frozenset(
    {"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler",
     "torch.utils.data.RandomSampler", "torch.utils.data.sampler.RandomSampler"}
)  # fmt: skip
_TRAIN_NAME = re.compile(r"(^|_)train", re.IGNORECASE)
_EVAL_NAME = re.compile(r"(^|_)(val|valid|validation|eval|evaluation|test|predict|inference)(_|$)", re.IGNORECASE)
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, drop_last)
_BATCH_SIZE, _SHUFFLE, _SAMPLER, _BATCH_SAMPLER, _DROP_LAST = 1, 2, 3, 4, 8


class DataloaderWithoutDropLast(Rule):
    """## What it does
    Reports a training `torch.utils.data.DataLoader(...)` without `drop_last=True`. A loader is
    taken for training when it shuffles (`shuffle=` anything but False), samples with a
    `DistributedSampler` or `RandomSampler`, is assigned to a name that says "train", or, when
    not assigned, is made in a function that does (`train_dataloader`). One whose name (or
    function's) says val, valid, validation, eval, test, predict or inference is taken for
    training only with `shuffle=True`. Options passed as
    `**kwargs` are read from the dicts the module builds (a literal, `dict(...)`, `{**a, **b}`,
    `.update(...)`, `kwargs["key"] = ...`). Loaders with `batch_size=None` or `batch_size=1`
    (no smaller last batch), a `batch_sampler=` or a non-literal `drop_last=`, and those given a `**kwargs` that cannot be read that way,
    are left alone.

    ## Why is this bad?
    When the dataset size is not a multiple of the batch size, the last batch of every epoch
    is smaller. Backends that compile per shape (XLA, TorchTPU, Trainium, Gaudi's lazy mode)
    compile a second graph for it, and Trainium needs every shape known ahead of time.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    ```

    ## Use instead
    ```python
    loader = DataLoader(dataset, batch_size=64, shuffle=True, drop_last=True)
    ```
    or pad the last batch to the full batch size (and mask the padding).

    ## Targets
    Info on neuron, tpu, xla, npu and hpu: one more shape per run is one more compilation
    (minutes on Trainium), cached after, not a recompilation every step as batches padded to
    their longest (PC507) are; off where shapes may change freely (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC506"
    name = "dataloader-without-drop-last"
    message = "training DataLoader without drop_last=True: the last, smaller batch compiles a new graph"
    hint = "pass drop_last=True, or pad the last batch to the full batch size{advice}"
    severity = ONE_MORE_SHAPE_SEVERITY
    triggers = (b"DataLoader",)

    VALID = [
        Valid("import torch\nloader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True, drop_last=True)\n"),
        Valid("from torch.utils.data import DataLoader\nval_loader = DataLoader(ds, batch_size=8)\n"),
        Valid(  # Latent Diffusion's data module: evaluation loaders whose shuffle is a parameter
            "from torch.utils.data import DataLoader, DistributedSampler\nclass Data:\n"
            "    def _val_dataloader(self, shuffle=False):\n        return DataLoader(self.val, batch_size=4, shuffle=shuffle)\n"
            "eval_loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))\n"
        ),
        Valid("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=None, shuffle=True)\n"),
        Valid("from torch.utils.data import DataLoader\ntrain_loader = DataLoader(ds, batch_size=1, shuffle=True)\n"),
        Valid("from torch.utils.data import DataLoader\ntrain_loader = DataLoader(ds, **loader_kwargs)\n"),
        Valid("from torch.utils.data import DataLoader\ntrain_dl = DataLoader(ds, batch_sampler=buckets)\n"),
        Valid("def f(torch, ds):\n    return torch.utils.data.DataLoader(ds, shuffle=True)\n"),
        Valid("import torch as T\nloader = T.utils.data.DataLoader(ds, 8, True, drop_last=is_training)\n"),
        Valid(
            "from torch.utils.data import DataLoader\ndef train(model, ds):\n"
            "    val_loader = DataLoader(ds, batch_size=8)\n    return val_loader\n"
        ),
        # the dict sets drop_last, later or through another dict
        Valid(
            "from torch.utils.data import DataLoader\nkw = {'batch_size': 8, 'shuffle': True}\nkw['drop_last'] = True\n"
            "loader = DataLoader(ds, **kw)\nbase = dict(drop_last=True)\nloader2 = DataLoader(ds, **{**base, 'shuffle': True})\n"
        ),
        Valid(
            "import torch\ndef loaders(ds, extra):\n    kw = {'shuffle': True}\n    kw.update(extra)\n"
            "    return torch.utils.data.DataLoader(ds, **kw)\n"
        ),
    ]
    INVALID = [
        Invalid("import torch\nloader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True)\n", lines=[2]),
        Invalid(
            "import torch.utils.data\nfrom torch.utils.data import DistributedSampler as DS\n"
            "loader = torch.utils.data.DataLoader(ds, 8, sampler=DS(ds), drop_last=False)\n",
            lines=[3],
        ),
        Invalid(
            "from torch.utils.data import DataLoader\nself.train_loader = DataLoader(ds, batch_size=8)\n", lines=[2]
        ),
        Invalid(
            "from torch import utils\nloader = utils.data.DataLoader(ds, 8, shuffle=(sampler is None))\n", lines=[2]
        ),
        Invalid(
            "from torch.utils.data import DataLoader, RandomSampler\nclass Data:\n    def train_dataloader(self):\n"
            "        return DataLoader(self.ds, sampler=RandomSampler(self.ds))\n",
            lines=[4],
        ),
        # pytorch/examples mnist: the options live in dicts
        Invalid(
            "import torch\n\ndef main(use_cuda, train_set, test_set):\n"
            "    train_kwargs = {'batch_size': 64}\n    test_kwargs = dict(batch_size=1000)\n"
            "    if use_cuda:\n        cuda_kwargs = {'num_workers': 1, 'pin_memory': True, 'shuffle': True}\n"
            "        train_kwargs.update(cuda_kwargs)\n"
            "    train_loader = torch.utils.data.DataLoader(train_set, **train_kwargs)\n"
            "    test_loader = torch.utils.data.DataLoader(test_set, **test_kwargs)\n",
            lines=[9],
        ),
        Invalid(
            "from torch.utils.data import DataLoader\nCOMMON = dict(batch_size=8, num_workers=2)\n\ndef loader(ds):\n"
            "    options = {**COMMON, 'shuffle': True} | {'drop_last': False}\n    return DataLoader(ds, **options)\n",
            lines=[6],
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not resolved_call(self.ctx, node, DATALOADERS) or any(arg.star == "*" for arg in node.args):
            return
        options = kwargs.call_options(self.ctx, node)
        if not options.complete:
            return  # a `**kwargs` that cannot be read may set anything
        sizes = _option(node, options, _BATCH_SIZE, "batch_size")
        if any(is_none(value) for value in sizes):
            return  # no automatic batching
        if sizes and all(isinstance(value, cst.Integer) and value.evaluated_value == 1 for value in sizes):
            return  # batches of one: the last is as full as the others
        if _option(node, options, _BATCH_SAMPLER, "batch_sampler"):
            return  # the batch sampler decides batch sizes
        if any(not _is_false(value) for value in _option(node, options, _DROP_LAST, "drop_last")):
            return
        if self._for_training(node, options):
            self.report(node, advice=advice(self.ctx.targets))

    def _for_training(self, node: cst.Call, options: Options) -> bool:
        shuffles = _option(node, options, _SHUFFLE, "shuffle")
        if any(_EVAL_NAME.search(name) for name in self._names_around(node)):
            return any(patterns.is_true(value) for value in shuffles)  # `def _val_dataloader(self, shuffle=False)`
        if any(not _is_false(value) for value in shuffles):
            return True
        if any(self._random_sampler(value) for value in _option(node, options, _SAMPLER, "sampler")):
            return True
        return any(_TRAIN_NAME.search(name) for name in self._names_around(node))

    def _random_sampler(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            node = self.ctx.assigned_value(node) or node
        return resolved_call(self.ctx, node, _RANDOM_SAMPLERS)

    def _names_around(self, node: cst.Call) -> list[str]:
        """The names the loader is assigned to or, when it is not assigned, the name of the
        function that makes it (`def train_dataloader(self): return DataLoader(...)`)."""
        parent = self.ctx.parent
        if isinstance(parent, cst.Assign) and parent.value is node:
            return [patterns.target_name(target.target) or "" for target in parent.targets]
        functions = [a.name.value for a in self.ctx.ancestors if isinstance(a, cst.FunctionDef)]
        return functions[-1:]


def _option(node: cst.Call, options: Options, index: int, name: str) -> list[cst.BaseExpression]:
    """The values an option may have: the positional argument, else every keyword setting."""
    positional = patterns.positional(node, index)
    return [positional.value] if positional is not None else options.values(name)


def _is_false(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.Name) and node.value in ("False", "None")) or (
        isinstance(node, cst.Integer) and node.value == "0"
    )
