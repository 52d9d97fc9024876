from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
from portcheck.rewrites import cuda_api
from portcheck.rewrites.edits import Edit
from portcheck.rule import FileContext, Invalid, SeverityMap, Valid, at_most_info
from portcheck.targets import api

_SEED_EVERYTHING = "torch.manual_seed"
# Calls that may stand between two seedings without touching torch's generators.
_OTHER_SEEDERS = frozenset({"random.seed", "numpy.random.seed"})
_CUDA_SEEDINGS = (".manual_seed", ".manual_seed_all")


class CudaRngApi(CudaApiRule):
    """## What it does
    Reports CUDA random-number state calls: `torch.cuda.manual_seed(s)`, `manual_seed_all(s)`,
    `seed()`, `initial_seed()`, `get_rng_state()`, `set_rng_state()`, `default_generators`.

    ## Why is this bad?
    Without CUDA, `manual_seed` queues a seed that is never applied, so the target device's
    generator is not seeded and runs are not reproducible; `get_rng_state()` and
    `initial_seed()` raise. Next to a `torch.manual_seed` (as under Fix safety) a CUDA
    seeding only goes: the target is seeded, and a CUDA call left in a port is still one to
    remove (`fix` does).

    ## Example
    ```python
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    ```

    ## Use instead
    ```python
    torch.manual_seed(0)  # seeds the CPU and every registered device
    ```

    ## Targets
    A warning where seeding silently does nothing, an error where the call raises; off on ROCm.
    `torch.accelerator.random` is not in torch 2.13, and TorchTPU raises on
    `torch.tpu.get_rng_state()` from user code: keep a `torch.Generator(device=...)` if you need
    per-device state.

    ## Fix safety
    Safe: a `torch.cuda.manual_seed(s)` or `manual_seed_all(s)` next to a
    `torch.manual_seed(s)` in the same block (the same seed before it, any seed after it, with
    only other seeding calls between), or alone under a check next to one (a seed_everything
    helper's `if torch.cuda.is_available():`, then info), is removed, with that check where it
    guards nothing else: `torch.manual_seed` already seeds every device. Where there is never an accelerator (`--device cpu`) a bare `manual_seed`,
    `manual_seed_all`, `seed()` or `set_rng_state()` is removed: it did nothing there.
    Unsafe: any other `manual_seed(s)` becomes `torch.manual_seed(s)`, which seeds the device
    but reseeds the CPU generator too, so CPU random streams change; `seed()` becomes
    `torch.seed()` and `initial_seed()` `torch.initial_seed()`, which answer for the CPU
    generator. Not fixed: `get_rng_state()`, `set_rng_state()` elsewhere and
    `default_generators`, whose device-generic forms (`torch.accelerator.random`) are not in
    torch 2.13.
    """

    code = "PC205"
    name = "cuda-rng-api"
    fix_safety = FixSafety.SAFE
    table_fixes = True

    VALID = [
        Valid("import torch\ntorch.manual_seed(0)\n"),
        Valid("import numpy as np\nnp.random.seed(0)\n"),
        Valid("def seed_all(torch, s):\n    torch.cuda.manual_seed_all(s)\n"),
    ]
    INVALID = [
        Invalid(  # a seed_everything helper: the CUDA seeding under its check goes too (info, see PC201)
            "import random\nimport torch\ndef seed_everything(seed):\n    random.seed(seed)\n    torch.manual_seed(seed)\n"
            "    if torch.cuda.is_available():\n        torch.cuda.manual_seed_all(seed)\n",
            lines=[7],
            message="is not needed: the torch.manual_seed() next to it seeds every device",
            fixed="import random\nimport torch\ndef seed_everything(seed):\n    random.seed(seed)\n    torch.manual_seed(seed)\n",
        ),
        Invalid(
            "import torch\nimport random\ndef seed_all(s):\n    random.seed(s)\n    torch.manual_seed(s)\n"
            "    torch.cuda.manual_seed(s)\n    torch.cuda.manual_seed_all(s)\n",
            lines=[6, 7],
            message="is not needed: the torch.manual_seed() next to it seeds every device",
            fixed="import torch\nimport random\ndef seed_all(s):\n    random.seed(s)\n    torch.manual_seed(s)\n",
        ),
        Invalid(
            "import torch as T\nT.cuda.manual_seed_all(42)\nT.manual_seed(0)\n",
            lines=[2],
            device="auto",
            fixed="import torch as T\nT.manual_seed(0)\n",
        ),
        Invalid(
            "import torch\ntorch.cuda.manual_seed_all(0)\n",
            lines=[2],
            unsafe=True,
            fixed="import torch\ntorch.manual_seed(0)\n",
        ),
        Invalid(
            "import torch as T\nT.cuda.manual_seed(42)\n",
            lines=[2],
            device="auto",
            unsafe=True,
            fixed="import torch as T\nT.manual_seed(42)\n",
        ),
        Invalid("import torch as T\nT.cuda.manual_seed(42)\n", lines=[2], device="cpu", fixed="import torch as T\n"),
        Invalid(
            "from torch.cuda import manual_seed as cuda_seed\ncuda_seed(1)\n",
            lines=[2],
            unsafe=True,
            fixed="from torch.cuda import manual_seed as cuda_seed\nimport torch\ntorch.manual_seed(1)\n",
        ),
        Invalid(
            "import torch.cuda.random\ns = torch.cuda.random.initial_seed()\n",
            lines=[2],
            device="cpu",
            unsafe=True,
            fixed="import torch.cuda.random\ns = torch.initial_seed()\n",
        ),
        # Not fixed: renames without --unsafe-fixes, a different seed before, no device-generic
        # form in torch 2.13.
        Invalid("import torch\ntorch.cuda.manual_seed_all(0)\n", lines=[2]),
        Invalid("import torch\ntorch.manual_seed(0)\ntorch.cuda.manual_seed(1)\n", lines=[3], device="auto"),
        Invalid("from torch import cuda\nstate = cuda.get_rng_state()\n", lines=[2]),
        Invalid("import torch\ntorch.cuda.manual_seed_all(*seeds)\n", lines=[2], unsafe=True),
        Invalid("import torch\ng = torch.cuda.default_generators[0]\n", lines=[2], message="default_generators"),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._redundancy: dict[int, bool] = {}  # node id -> whether a torch.manual_seed makes it redundant

    def severities(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> SeverityMap:
        """Info under a check that only seeds CUDA again beside a `torch.manual_seed`: the
        port loses nothing there (`fix` still drops it)."""
        usual = super().severities(node, entry)
        return at_most_info(usual) if self._redundant(node, entry) and self._guarded(node) else usual

    def _guarded(self, node: cst.Name | cst.Attribute) -> bool:
        return reseeds_under_guard(self.ctx, self.ctx.chain(node))

    def effect(self, node: cst.Name | cst.Attribute, name: str, entry: api.ApiEntry) -> str:
        if self._redundant(node, entry):
            return f"does nothing, and is not needed: the {_SEED_EVERYTHING}() next to it seeds every device"
        return super().effect(node, name, entry)

    def fix(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> Edit | None:
        if self._redundant(node, entry) and not self.ctx.fix_target.keeps_cuda_api:
            use = cuda_api.Use.of(self.ctx, node)
            return cuda_api.drop(use, f"drop {entry.name}(): {_SEED_EVERYTHING}() next to it seeds every device")
        return super().fix(node, entry)

    def _redundant(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> bool:
        """A seeding of every CUDA device next to a `torch.manual_seed` (asked once per use)."""
        if entry.rename != _SEED_EVERYTHING:
            return False
        if id(node) not in self._redundancy:
            use = cuda_api.Use.of(self.ctx, node)
            alongside = use.line is not None and self._seeded_alongside(use)
            self._redundancy[id(node)] = alongside or (use.bare and self._guarded(node))
        return self._redundancy[id(node)]

    def _seeded_alongside(self, use: cuda_api.Use) -> bool:
        """Whether a `torch.manual_seed` next to this statement makes it redundant: the same
        pure seed before it, or any seed after it, with only other seedings between."""
        assert use.call is not None and use.line is not None and use.block is not None
        seed = self._seed(use.call)
        if seed is None or not cuda_api.pure(seed):
            return False
        body = list(use.block.body)
        here = next(index for index, statement in enumerate(body) if statement is use.line)
        for statements, same_seed in ((reversed(body[:here]), True), (body[here + 1 :], False)):
            for statement in statements:
                call = _call_statement(statement)
                names = self.ctx.qualified_names(call.func) if call is not None else frozenset()
                if call is None or not names:
                    break
                other_seed = self._seed(call)
                if _SEED_EVERYTHING in names:
                    if not same_seed or (other_seed is not None and _same(other_seed, seed)):
                        return True
                    break
                if names & _OTHER_SEEDERS:
                    continue
                entries = [api.lookup(name) for name in names]
                if any(m is not None and m[1].rename == _SEED_EVERYTHING for m in entries) and (
                    other_seed is not None and _same(other_seed, seed)
                ):
                    continue  # another CUDA seeding with the same seed
                break
        return False

    @staticmethod
    def _seed(call: cst.Call) -> cst.BaseExpression | None:
        if len(call.args) != 1 or call.args[0].star:
            return None
        return call.args[0].value


def reseeds_under_guard(ctx: FileContext, chain: Sequence[cst.CSTNode]) -> bool:
    """Whether the node at the end of `chain` is in the test or body of an `if` (without else)
    that only seeds CUDA (`if torch.cuda.is_available(): torch.cuda.manual_seed_all(seed)`)
    next to a `torch.manual_seed(...)` in its block, with only other seedings between (a
    seed_everything helper): the CUDA seeding, and the check, change nothing anywhere."""
    index = next((i for i in range(len(chain) - 2, 0, -1) if isinstance(chain[i], cst.If)), None)
    if index is None:
        return False
    guard, block = chain[index], chain[index - 1]
    assert isinstance(guard, cst.If)
    if guard.orelse is not None or not isinstance(block, (cst.Module, cst.IndentedBlock)):
        return False
    for statement in guard.body.body:
        call = _call_statement(statement)
        names = ctx.qualified_names(call.func) if call is not None else frozenset()
        if not any(name.startswith("torch.cuda.") and name.endswith(_CUDA_SEEDINGS) for name in names):
            return False
    body = list(block.body)
    here = body.index(guard)
    for statements in (reversed(body[:here]), body[here + 1 :]):
        for statement in statements:
            call = _call_statement(statement)
            names = ctx.qualified_names(call.func) if call is not None else frozenset()
            if _SEED_EVERYTHING in names:
                return True
            if not names & _OTHER_SEEDERS:
                break
    return False


def _call_statement(statement: cst.CSTNode) -> cst.Call | None:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        expression = statement.body[0]
        if isinstance(expression, cst.Expr) and isinstance(expression.value, cst.Call):
            return expression.value
    return None


def _same(a: cst.CSTNode, b: cst.CSTNode) -> bool:
    return cuda_api.code(a) == cuda_api.code(b)
