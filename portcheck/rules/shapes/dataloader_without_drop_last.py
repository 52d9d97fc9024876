from __future__ import annotations

import re

import libcst as cst

from portcheck import patterns
from portcheck.rule import Invalid, Rule, Valid
from portcheck.rules.shapes import DATALOADERS, RECOMPILE_SEVERITY, advice, resolved_call

_RANDOM_SAMPLERS = frozenset(
    {"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler",
     "torch.utils.data.RandomSampler", "torch.utils.data.sampler.RandomSampler"}
)  # fmt: skip
_TRAIN_NAME = re.compile(r"(^|_)train", re.IGNORECASE)
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, drop_last)
_BATCH_SIZE, _SHUFFLE, _SAMPLER, _BATCH_SAMPLER, _DROP_LAST = 1, 2, 3, 4, 8


class DataloaderWithoutDropLast(Rule):
    """## What it does
    Reports a training `torch.utils.data.DataLoader(...)` without `drop_last=True`. A loader is
    taken for training when it shuffles (`shuffle=` anything but False), samples with a
    `DistributedSampler` or `RandomSampler`, is assigned to a name that says "train", or, when
    not assigned, is made in a function that does (`train_dataloader`). Loaders with
    `batch_size=None`, a `batch_sampler=` or a non-literal `drop_last=`, and calls that pass
    `**kwargs`, are left alone.

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
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC506"
    name = "dataloader-without-drop-last"
    message = "training DataLoader without drop_last=True: the last, smaller batch compiles a new graph"
    hint = "pass drop_last=True, or pad the last batch to the full batch size{advice}"
    severity = RECOMPILE_SEVERITY
    triggers = (b"DataLoader",)

    VALID = [
        Valid("import torch\nloader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True, drop_last=True)\n"),
        Valid("from torch.utils.data import DataLoader\nval_loader = DataLoader(ds, batch_size=8)\n"),
        Valid("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=None, shuffle=True)\n"),
        Valid("from torch.utils.data import DataLoader\ntrain_loader = DataLoader(ds, **loader_kwargs)\n"),
        Valid("from torch.utils.data import DataLoader\ntrain_dl = DataLoader(ds, batch_sampler=buckets)\n"),
        Valid("def f(torch, ds):\n    return torch.utils.data.DataLoader(ds, shuffle=True)\n"),
        Valid("import torch as T\nloader = T.utils.data.DataLoader(ds, 8, True, drop_last=is_training)\n"),
        Valid(
            "from torch.utils.data import DataLoader\ndef train(model, ds):\n"
            "    val_loader = DataLoader(ds, batch_size=8)\n    return val_loader\n"
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
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not resolved_call(self.ctx, node, DATALOADERS) or any(arg.star for arg in node.args):
            return
        if _is_none(patterns.argument(node, _BATCH_SIZE, "batch_size")):
            return  # no automatic batching
        if patterns.argument(node, _BATCH_SAMPLER, "batch_sampler") is not None:
            return  # the batch sampler decides batch sizes
        drop_last = patterns.argument(node, _DROP_LAST, "drop_last")
        if drop_last is not None and not _is_false(drop_last.value):
            return
        if self._for_training(node):
            self.report(node, advice=advice(self.ctx.targets))

    def _for_training(self, node: cst.Call) -> bool:
        shuffle = patterns.argument(node, _SHUFFLE, "shuffle")
        if shuffle is not None and not _is_false(shuffle.value):
            return True
        sampler = patterns.argument(node, _SAMPLER, "sampler")
        if sampler is not None and self._random_sampler(sampler.value):
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


def _is_none(arg: cst.Arg | None) -> bool:
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "None"


def _is_false(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.Name) and node.value in ("False", "None")) or (
        isinstance(node, cst.Integer) and node.value == "0"
    )
