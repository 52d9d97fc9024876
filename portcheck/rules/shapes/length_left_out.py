from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from portcheck import patterns, project, resolve
from portcheck.project import Project
from portcheck.resolve import Scope
from portcheck.rule import UNPLACED, FileContext, Invalid, Valid, at_most_info
from portcheck.rules.shapes import (
    SYNC_SEVERITY,
    TensorRule,
    advice,
    builtin_call,
    defined_names,
    reads_tensor_value,
    shown,
    used_as_size,
)

_OFF_STEP = " (info: no step loop or forward() that portcheck follows makes the call)"
_READ_BACK = frozenset({"item", "tolist"})


def _read_back(ctx: FileContext, value: cst.BaseExpression) -> bool:
    """Whether a value is a number copied to the host: `t.item()`, `int(t.max())`."""
    numbered = builtin_call(ctx, value, ("int", "float", "round")) is not None
    return numbered or (type(value) is cst.Call and patterns.method_name(value) in _READ_BACK)


@dataclass(frozen=True)
class _Filled:
    """A length parameter that a function fills from tensor values where a call leaves it out."""

    function: str  # the function's name as this module calls it
    parameter: str
    position: int  # among the positional parameters; -1 for a keyword-only one
    value: str  # what fills it, as written


class LengthLeftOut(TensorRule):
    """## What it does
    Reports calls that leave out a length (or give `None` for it) which the function they call
    then takes from tensor values: speech models' `make_pad_mask(lengths, max_len=0)` (CosyVoice, WeNet) fills
    `max_len` with `lengths.max().item()`, and glow-tts' and Matcha-TTS' `sequence_mask(length,
    max_length=None)` fills `max_length` with `length.max()`, so `make_pad_mask(token_len)` in
    forward() or in a step loop reads the longest length back every step. The function is
    one of the repository's, in this module or in another (the project pass tells), and fills
    the parameter in a statement of its own body: `if max_length is None: max_length =
    length.max()` (also `if not max_length:`), `max_len = max_len if max_len > 0 else
    lengths.max().item()`, `n = n or counts.sum()`. The function's own read is
    host-sync-in-step's (PC503) or tensor-bound-slice's (PC505); this rule names the calls,
    where the length is at hand.

    ## Why is this bad?
    The device computes the longest length, the host waits for it, and the mask (or the range,
    or the padding) gets that many columns: a sync and a new shape every step. XLA compiles a
    new graph for each new length; Trainium cannot compile the dynamic dimension at all. The
    caller nearly always holds the padded length already: the tensor the lengths describe
    has it as a size.

    ## Example
    ```python
    mask = ~make_pad_mask(token_len)
    ```

    ## Use instead
    ```python
    mask = ~make_pad_mask(token_len, max_len=token.size(1))
    ```

    ## Targets
    As tensor-bound-slice: an error on neuron; a warning on tpu, xla, npu and hpu; info on
    mps, xpu and rocm (a host sync); off on cpu. A call that no step loop or forward() makes
    (inference, export, a script run once) is info.

    ## Fix safety
    No automatic fix: which size the call has at hand is the model's.
    """

    code = "PC520"
    name = "length-left-out"
    message = (
        "`{call}` {how} `{parameter}`, so `{function}()` takes it from `{value}`, "
        "read on the host: a data-dependent shape{reach}"
    )
    hint = "pass the padded length the call has at hand (`{parameter}=x.size(1)`){advice}"
    severity = SYNC_SEVERITY
    # The rule reports only in files that import torch, so "torch" is in every one of them.
    triggers = (b"torch",)

    VALID = [
        Valid(  # the call gives the length
            "import torch\ndef sequence_mask(length, max_length=None):\n    if max_length is None:\n"
            "        max_length = length.max()\n    x = torch.arange(max_length, device=length.device)\n"
            "    return x.unsqueeze(0) < length.unsqueeze(1)\n"
            "class Encoder(torch.nn.Module):\n    def forward(self, x, x_lengths):\n"
            "        mask = sequence_mask(x_lengths, x.size(2))\n        return x * mask.unsqueeze(1)\n"
        ),
        Valid(  # filled from a size, not from tensor values
            "import torch\ndef pad_mask(lengths, max_len=0):\n    max_len = max_len if max_len > 0 else 512\n"
            "    return torch.arange(max_len, device=lengths.device) >= lengths.unsqueeze(1)\n"
            "class Encoder(torch.nn.Module):\n    def forward(self, x, lengths):\n"
            "        return x.masked_fill(pad_mask(lengths).unsqueeze(-1), 0.0)\n"
        ),
        Valid(  # the length's use keeps the call out of reach: `*args` may hold it
            "import torch\ndef pad_mask(lengths: torch.Tensor, max_len: int = 0):\n"
            "    max_len = max_len if max_len > 0 else lengths.max().item()\n"
            "    return torch.arange(max_len, device=lengths.device) >= lengths.unsqueeze(1)\n"
            "class Encoder(torch.nn.Module):\n    def forward(self, x, *sizes):\n"
            "        return pad_mask(*sizes)\n"
        ),
        Valid(  # the longest length stays a tensor, compared on the device: no wait, no new shape
            "import torch\ndef beyond(length, positions, max_length=None):\n"
            "    max_length = max_length or length.max()\n    return positions < max_length\n"
            "class Decoder(torch.nn.Module):\n    def forward(self, x, lengths):\n"
            "        return x * beyond(lengths, self.positions)\n"
        ),
        Valid(  # no torch in the module: NumPy lengths, whatever a parameter is named
            "import numpy as np\ndef pad_mask(lengths, max_len=0):\n    max_len = max_len or lengths.max()\n"
            "    return np.arange(max_len)[None] >= lengths[:, None]\n"
            "def train(torch, loader):\n    for lengths in loader:\n        torch.step(pad_mask(lengths))\n"
        ),
        # on the CPU the lengths are already in host memory
        Valid(
            "import torch\ndef pad_mask(lengths: torch.Tensor, max_len: int = 0):\n"
            "    max_len = max_len if max_len > 0 else lengths.max().item()\n"
            "    return torch.arange(max_len, device=lengths.device) >= lengths.unsqueeze(1)\n"
            "class Encoder(torch.nn.Module):\n    def forward(self, x, lengths):\n        return pad_mask(lengths)\n",
            options={"targets": ["cpu"]},
        ),
    ]
    INVALID = [
        Invalid(  # CosyVoice's flow matching: the mask of the speech tokens, every training step
            "import torch\ndef make_pad_mask(lengths: torch.Tensor, max_len: int = 0) -> torch.Tensor:\n"
            "    max_len = max_len if max_len > 0 else lengths.max().item()\n"
            "    seq_range = torch.arange(0, max_len, dtype=torch.int64, device=lengths.device)\n"
            "    return seq_range.unsqueeze(0) >= lengths.unsqueeze(-1)\n"
            "from torch import nn\nclass Flow(nn.Module):\n    def forward(self, batch, device):\n"
            "        token_len = batch['speech_token_len'].to(device)\n"
            "        mask = (~make_pad_mask(token_len)).float().unsqueeze(-1)\n"
            "        return mask\n",
            lines=[10],
            message="`make_pad_mask(token_len)` leaves out `max_len`, so `make_pad_mask()` takes it from "
            "`lengths.max().item()`",
        ),
        Invalid(  # Matcha-TTS: the mask of the random segment cut from the mel, in a training loop
            "import torch as T\ndef sequence_mask(length, max_length=None):\n    if max_length is None:\n"
            "        max_length = length.max()\n    x = T.arange(max_length, dtype=length.dtype, device=length.device)\n"
            "    return x.unsqueeze(0) < length.unsqueeze(1)\n"
            "def train(model, loader, optimizer):\n    for x, y_lengths in loader:\n"
            "        y_mask = sequence_mask(y_lengths.cuda()).unsqueeze(1)\n"
            "        loss = model(x.cuda(), y_mask)\n        loss.backward()\n        optimizer.step()\n",
            lines=[9],
            message="takes it from `length.max()`",
        ),
        Invalid(  # OpenVoice's posterior: `None` given for the length is filled the same way
            "import torch\ndef sequence_mask(length, max_length=None):\n    if max_length is None:\n"
            "        max_length = length.max()\n    x = torch.arange(max_length, device=length.device)\n"
            "    return x.unsqueeze(0) < length.unsqueeze(1)\n"
            "class Encoder(torch.nn.Module):\n    def forward(self, x, y_lengths):\n"
            "        y_mask = sequence_mask(y_lengths, None).unsqueeze(1)\n"
            "        also = sequence_mask(y_lengths, max_length=None)\n        return x * y_mask * also\n",
            lines=[9, 10],
            message="gives `None` for `max_length`, so `sequence_mask()` takes it from `length.max()`",
        ),
        Invalid(  # outside any step: info
            "import torch.nn\nfrom torch.nn import functional as F\ndef sequence_mask(length, max_length=None):\n"
            "    max_length = max_length or length.max()\n"
            "    return F.pad(length.new_ones(length.size(0), max_length), (0, 1))\n"
            "def export(model, lengths):\n    return model(sequence_mask(lengths.cuda()))\n",
            lines=[7],
            message="no step loop or forward()",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        # id(assignment): the function, the parameter it fills, its position, the value filled in
        self._pending: dict[int, tuple[cst.FunctionDef, str, int, cst.BaseExpression]] = {}
        self._filled: list[_Filled] = []  # the module's own functions that fill a length
        self._elsewhere = self._filled_elsewhere()
        # Calls through the module that defines the function (`commons.sequence_mask(...)`): the
        # flow lists calls by a plain name only.
        self.watched_names = tuple(self._elsewhere)
        self._through_modules: list[tuple[cst.Call, Scope, tuple[cst.CSTNode, ...], _Filled]] = []

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        """The names of the functions another module fills a length in."""
        return known.filled_length_triggers

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """Note the statements of a module-level function that fill a parameter with a default
        where the call leaves it out; whether the value reads tensor values is asked where
        the walk reaches it, in the function's scope."""
        if self.ctx.project.complete or type(self.ctx.parent) is not cst.Module:
            return
        params = node.params
        positional = [*params.posonly_params, *params.params]
        defaulted = [param for param in (*positional, *params.kwonly_params) if param.default is not None]
        statements = node.body.body if type(node.body) is cst.IndentedBlock else ()
        for param in defaulted:
            name = param.name.value
            filled = next(filter(None, (resolve.filled_when_left_out(each, name) for each in statements)), None)
            if filled is not None:
                position = positional.index(param) if param in positional else -1
                self._pending[id(filled[0])] = (node, name, position, filled[1])

    def visit_Assign(self, node: cst.Assign) -> None:
        pending = self._pending.pop(id(node), None) if self._pending else None
        if pending is None:
            return
        function, parameter, position, filled = pending
        if not reads_tensor_value(self.ctx, filled):  # asked here, in the function's scope
            return
        if not (_read_back(self.ctx, filled) or used_as_size(self.ctx, function, parameter)):
            return  # `max_length = max_length or length.max()` compared with a range: a tensor, no wait
        value = shown(filled)
        self._filled.append(_Filled(function.name.value, parameter, position, value))
        for name in defined_names(self.ctx, function):  # as its package may re-export it too
            self.record(project.FILLED_LENGTH, name, UNPLACED, parameter=parameter, position=str(position), value=value)

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        ancestors = tuple(self.ctx.ancestors)
        call = ancestors[-1] if ancestors else None
        filled = self._elsewhere.get(qualified_name)
        if type(node) is cst.Attribute and type(call) is cst.Call and call.func is node and filled is not None:
            self._through_modules.append((call, self.ctx.resolver.scope, ancestors[:-1], filled))

    def leave_Module(self, node: cst.Module) -> None:
        module_flow = self.ctx.flow
        wanted = {each.function: each for each in self._filled} if not self.ctx.project.complete else {}
        if module_flow is not None and (wanted or self._elsewhere):
            calls = [
                (call, scope, ancestors, wanted.get(title) or self._resolved(call, scope))
                for title, call, scope, ancestors in module_flow.calls_by_name()
            ]
            for call, scope, ancestors, filled in [*calls, *self._through_modules]:
                how = self._left_out(call, filled) if filled is not None else None
                if how is not None:
                    self._report_call(call, scope, ancestors, filled, how)
        super().leave_Module(node)

    def _filled_elsewhere(self) -> dict[str, _Filled]:
        """In the second pass, the other modules' functions that fill a length, by qualified name."""
        known = self.ctx.project
        own = self.ctx.module.name + "."
        return {
            name: _Filled(name.rpartition(".")[2], parameter, position, value)
            for name, parameter, position, value in known.filled_lengths
            if known.complete and not name.startswith(own)
        }

    def _resolved(self, call: cst.Call, scope: Scope) -> _Filled | None:
        module_flow, elsewhere = self.ctx.flow, self._elsewhere
        if not elsewhere or module_flow is None:
            return None
        names = module_flow.in_scope(scope, lambda: self.ctx.qualified_names(call.func))
        return next((elsewhere[name] for name in sorted(names) if name in elsewhere), None)

    @staticmethod
    def _left_out(call: cst.Call, filled: _Filled) -> str | None:
        """How the call leaves the length out, if it does: it gives none, or gives `None`
        (OpenVoice's `commons.sequence_mask(y_lengths, None)`), which every test that fills a
        parameter fills too (`is None`, `not n`, `n or`) or raises on (`n > 0`)."""
        if any(arg.star for arg in call.args):
            return None  # `*args` or `**kwargs` may hold it
        given = patterns.positional(call, filled.position) if filled.position >= 0 else None
        given = given if given is not None else patterns.keyword(call, filled.parameter)
        if given is None:
            return "leaves out"
        return "gives `None` for" if type(given.value) is cst.Name and given.value.value == "None" else None

    def _report_call(
        self, call: cst.Call, scope: Scope, ancestors: tuple[cst.CSTNode, ...], filled: _Filled, how: str
    ) -> None:
        module_flow = self.ctx.flow
        assert module_flow is not None
        where = module_flow.every_step_at(scope, ancestors)
        severity = None if where is not None else at_most_info(SYNC_SEVERITY)
        self.ctx.count_report(call)
        report = self.report_here(
            call,
            severity=severity,
            chain=ancestors,
            call=shown(call),
            how=how,
            parameter=filled.parameter,
            function=filled.function,
            value=filled.value,
            reach="" if where is not None else _OFF_STEP,
            advice=advice(self.ctx.targets),
        )
        self.reports.append(report)
