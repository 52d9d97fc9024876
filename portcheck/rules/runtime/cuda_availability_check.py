from __future__ import annotations

import re

import libcst as cst

from portcheck import patterns
from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
from portcheck.flow import LOSES_EXTRAS, Guard, is_self_attribute
from portcheck.rewrites.edits import Edit
from portcheck.rule import ERROR, INFO, OFF, WARNING, Invalid, SeverityMap, Valid, at_most_warning
from portcheck.rules.runtime.cuda_rng_api import reseeds_under_guard
from portcheck.targets import api
from portcheck.walk import descendants

# Names that hold how many processes to start (`world_size = torch.cuda.device_count()`).
# What an answer may pass through on its way into a message: an argument, an f-string, text joined.
_INSIDE_MESSAGES = (cst.Arg, cst.FormattedStringExpression, cst.FormattedString, cst.BinaryOperation)
_PROCESS_COUNT = re.compile(
    r"^(world_size|n_?procs|num_proc(esse)?s|n_?gpus(_per_node)?|num_gpus|nproc_per_node)$", re.I
)


class CudaAvailabilityCheck(CudaApiRule):
    """## What it does
    Reports `torch.cuda.is_available()`, `torch.cuda.device_count()`,
    `torch.cuda.is_initialized()` and `torch.cuda.init()`.

    ## Why is this bad?
    Without CUDA, `is_available()` is False and `device_count()` is 0, so the program quietly
    takes its CPU path on a TPU or Trainium host: it runs, slowly, and nothing says why. A
    test that skips itself without CUDA (`@pytest.mark.skipif(not torch.cuda.is_available(),
    ...)`, `pytest.skip(...)`, `self.skipTest(...)`) is a warning: it goes untested there,
    and what it runs is reported at info. A check that guards only messages or freeing
    cached memory (`if torch.cuda.is_available(): logger.warning(...)`, `log_str += f"memory:
    {mem}"`, `torch.cuda.empty_cache()`), with no `else`, is a warning: skipping it changes no
    result, but the target silently loses the memory report (`torch.accelerator` has one); so
    is an answer only printed or logged (`print("device_count:", torch.cuda.device_count())`),
    and a check that keeps a CUDA-only library or CUDA's own facts (its memory, name, seed)
    from other devices, unless it also picks the precision (`return torch.bfloat16` where the
    capability allows: elsewhere the run silently stays in float32, an error). What such a
    check guards is at most a warning too: a port opens the check to the target's equivalent
    or drops both. Each is info on the CPU, where the CUDA path stays for GPUs, and so is an
    attribute set to the answer that the module never reads (`self.sync_cuda =
    torch.cuda.is_available()`), and a check that only seeds CUDA again beside a
    `torch.manual_seed(...)`, which seeds every device (`if torch.cuda.is_available():
    torch.cuda.manual_seed_all(seed)` in a seed_everything helper): info everywhere.

    ## Example
    ```python
    device = "cuda" if torch.cuda.is_available() else "cpu"
    world = torch.cuda.device_count()
    ```

    ## Use instead
    ```python
    device = torch.accelerator.current_accelerator() or torch.device("cpu")
    world = torch.accelerator.device_count()
    ```

    ## Targets
    An error on every target but ROCm (where HIP answers through `torch.cuda`).
    `torch.accelerator.is_available()` is True for any accelerator; on XLA use
    `torch_xla.runtime` instead.

    ## Fix safety
    Safe: `is_available()` and `device_count()` become `torch.accelerator.is_available()` and
    `torch.accelerator.device_count()` (torch 2.6; not offered for an older `torch-version`),
    written with the file's own `torch` binding. They ask the same question of whatever
    accelerator is present, and neither raises on a host without one (False and 0, as the CUDA
    calls answer there), so every target gets them, cpu and auto included. The branch they
    guard now runs on the accelerator, so a check is rewritten only together with what it
    guards: while that still calls CUDA-only code with no replacement
    (`torch.cuda.get_device_properties`), both stay. For `--device cpu` a check that guards a
    branch stays as it is (the CPU path is already the one taken). A device count that says
    how many processes to start (`world_size`, `nprocs=`) becomes
    `max(torch.accelerator.device_count(), 1)` where the code may run without an
    accelerator. Not fixed: `is_initialized()` and `init()` (no equivalent), and XLA, which
    has no `torch.accelerator` backend (use `torch_xla.runtime`).
    """

    code = "PC201"
    name = "cuda-availability-check"
    fix_safety = FixSafety.SAFE
    table_fixes = True

    def severities(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> SeverityMap:
        """An assert on CUDA stops the program wherever CUDA is missing, the CPU included; a
        test skipped without CUDA runs nothing wrong, it only goes untested."""
        usual = super().severities(node, entry)
        if reseeds_under_guard(self.ctx, self.ctx.chain(node)):
            return {t: INFO if usual_level > OFF else OFF for t, usual_level in usual.items()}
        check = self._check(node)
        if check is not None and (check.asserts or check.skips):
            level = ERROR if check.asserts else WARNING
            return {t: level if usual_level > OFF else OFF for t, usual_level in usual.items()}
        if check is not None and check.skips_only:
            return {t: INFO if usual_level > OFF else OFF for t, usual_level in usual.items()}
        if (check is not None and (check.tells_only or check.guards_cuda_library)) or self._only_shown(node):
            # what the target skips there is a port's to open or drop; on the CPU it stays for GPUs
            return at_most_warning(usual)
        if self._unread_attribute(node) is not None:
            return {t: INFO if usual_level > OFF else OFF for t, usual_level in usual.items()}
        return usual

    def effect(self, node: cst.Name | cst.Attribute, name: str, entry: api.ApiEntry) -> str:
        if reseeds_under_guard(self.ctx, self.ctx.chain(node)):
            return "returns False, so every other device skips a CUDA seeding that the torch.manual_seed() beside it makes unneeded"
        check = self._check(node)
        if check is not None and check.asserts:
            return "returns False, so this assert stops the program on every other device"
        if check is not None and check.skips:
            return "returns False, so this test is skipped on every other device"
        if check is not None and check.tells_only:
            return "returns False, so every other device skips the message or freeing of cached memory it guards"
        if check is not None and check.skips_only:
            return f"returns False, so every other device {check.skips_only}"
        if check is not None and check.guards_cuda_library:
            return f"returns False, so every other device {LOSES_EXTRAS}"
        unread = self._unread_attribute(node)
        if unread is not None:
            return f"returns False, which here sets `{unread}`, read nowhere in this module"
        if self._only_shown(node):
            return "answers for CUDA alone, and what is printed or logged here says nothing of another device"
        return super().effect(node, name, entry)

    def _only_shown(self, node: cst.CSTNode) -> bool:
        """`print("device_count:", torch.cuda.device_count())` (LoRA), also in an f-string or a
        logger's call: the answer is only shown."""
        chain = self.ctx.chain(node)
        if len(chain) < 3 or not isinstance(chain[-1], cst.Call) or chain[-1].func is not node:
            return False
        for parent in reversed(chain[:-1]):
            if not isinstance(parent, _INSIDE_MESSAGES):
                return isinstance(parent, cst.Call) and patterns.is_logging_call(parent)
        return False

    def _unread_attribute(self, node: cst.CSTNode) -> str | None:
        """`self.sync_cuda = th.cuda.is_available()` (improved-diffusion) where the module reads
        no `.sync_cuda`: the attribute's name."""
        chain = self.ctx.chain(node)
        if len(chain) < 3 or not isinstance(chain[-1], cst.Call) or chain[-1].func is not node:
            return None
        statement = chain[-2]
        if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 or statement.value is not chain[-1]:
            return None
        target = statement.targets[0].target
        if not is_self_attribute(target):
            return None
        assert isinstance(target, cst.Attribute)
        name = target.attr.value
        mentions = sum(isinstance(each, cst.Attribute) and each.attr.value == name for each in descendants(chain[0]))
        return name if mentions == 1 else None

    def _check(self, node: cst.CSTNode) -> Guard | None:
        flow = self.ctx.flow
        return flow.in_check(self.ctx.ancestors, node) if flow is not None else None

    def fix(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> Edit | None:
        """The table's fix; a device count that says how many processes to start becomes at
        least one where the fixed code may run on a host without an accelerator (there the
        count is 0, and `mp.spawn(..., nprocs=0)` silently runs nothing)."""
        edit = super().fix(node, entry)
        if edit is None or entry.name != "torch.cuda.device_count" or not self.ctx.fix_target.runs_without_accelerator:
            return edit
        call = self.ctx.parent
        if not isinstance(call, cst.Call) or call.func is not node or not self._counts_processes(call):
            return edit
        counted = edit.replacement if edit.original is call else call.with_changes(func=edit.replacement)
        assert isinstance(counted, cst.BaseExpression)
        at_least_one = cst.Call(
            cst.Name("max"), [cst.Arg(counted.with_changes(lpar=(), rpar=())), cst.Arg(cst.Integer("1"))]
        )
        title = f"{edit.title}, at least one process"
        return Edit(call, at_least_one, edit.safety, title, edit.imports, edit.prelude)

    def _counts_processes(self, call: cst.Call) -> bool:
        ancestors = self.ctx.ancestors
        holder = ancestors[-2] if len(ancestors) > 1 else None
        if isinstance(holder, cst.Arg) and holder.keyword is not None:
            return _PROCESS_COUNT.match(holder.keyword.value) is not None
        if isinstance(holder, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in holder.targets] if isinstance(holder, cst.Assign) else [holder.target]
            return any(_PROCESS_COUNT.match(patterns.target_name(t) or "") for t in targets)
        return False

    VALID = [
        Valid("import torch\nok = torch.accelerator.is_available()\n"),
        Valid("def f(torch):\n    return torch.cuda.is_available()\n"),
        Valid("cuda = object()\nn = cuda.device_count()\n"),
        Valid("import torch\nok = torch.cuda.is_available()\n", options={"targets": ["rocm"]}),
    ]
    INVALID = [
        Invalid(  # nanochat: CUDA's capability read to pick bfloat16; elsewhere the run stays in float32
            "import torch\ndef compute_dtype():\n    if torch.cuda.is_available():\n"
            "        if torch.cuda.get_device_capability() >= (8, 0):\n            return torch.bfloat16\n"
            "    return torch.float32\n",
            lines=[3],
            message="silently takes its CPU path",
            fixed="import torch\ndef compute_dtype():\n    if torch.accelerator.is_available():\n"
            "        if torch.cuda.get_device_capability() >= (8, 0):\n            return torch.bfloat16\n"
            "    return torch.float32\n",
        ),
        Invalid(  # only cuDNN's harmless switches behind it: info
            "import torch as T\nif T.cuda.is_available():\n    T.backends.cudnn.benchmark = True\n",
            lines=[2],
            message="skips only cuDNN switches",
            fixed="import torch as T\nif T.accelerator.is_available():\n    T.backends.cudnn.benchmark = True\n",
        ),
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    pass\n",
            lines=[2],
            message="torch.cuda.is_available",
            fixed="import torch\nif torch.accelerator.is_available():\n    pass\n",
        ),
        Invalid(
            "import torch as T\nn = T.cuda.device_count()\n",
            lines=[2],
            device="cpu",
            fixed="import torch as T\nn = T.accelerator.device_count()\n",
        ),
        Invalid(
            "import torch as T\nn = T.cuda.device_count()\n",
            lines=[2],
            device="auto",
            fixed="import torch as T\nn = T.accelerator.device_count()\n",
        ),
        Invalid(
            "from torch import cuda\nuse_gpu = cuda.is_available()\n",
            lines=[2],
            device="auto",
            fixed="from torch import cuda\nimport torch\nuse_gpu = torch.accelerator.is_available()\n",
        ),
        Invalid(
            "from torch.cuda import is_available as has_gpu\nif has_gpu():\n    pass\n",
            lines=[2],
            device="mps",
            fixed="from torch.cuda import is_available as has_gpu\nimport torch\n"
            "if torch.accelerator.is_available():\n    pass\n",
        ),
        Invalid(
            "import torch\ncheck = torch.cuda.is_available\nprint(check())\n",
            lines=[2],
            device="cpu",
            fixed="import torch\ncheck = torch.accelerator.is_available\nprint(check())\n",
        ),
        Invalid(
            "import torch.multiprocessing as mp\nimport torch as T\nworld_size = T.cuda.device_count()\n"
            "mp.spawn(print, nprocs=world_size)\nmp.spawn(print, nprocs=T.cuda.device_count())\n",
            lines=[3, 5],
            device="cpu",
            fixed="import torch.multiprocessing as mp\nimport torch as T\nworld_size = max(T.accelerator.device_count(), 1)\n"
            "mp.spawn(print, nprocs=world_size)\nmp.spawn(print, nprocs=max(T.accelerator.device_count(), 1))\n",
        ),
        Invalid(
            "import torch\nassert torch.cuda.is_available(), 'needs a GPU'\n",
            lines=[2],
            message="this assert stops the program",
            fixed="import torch\nassert torch.accelerator.is_available(), 'needs a GPU'\n",
        ),
        Invalid(  # a test that runs only on CUDA: skipped elsewhere, a warning
            "import pytest\nimport torch\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='GPU')\n"
            "def test_forward():\n    assert model(x).shape == (2, 3)\n"
            "def test_step():\n    if not torch.cuda.is_available():\n        pytest.skip('GPU')\n    step()\n",
            lines=[3, 7],
            message="this test is skipped on every other device",
            fixed="import pytest\nimport torch\n@pytest.mark.skipif(not torch.accelerator.is_available(), reason='GPU')\n"
            "def test_forward():\n    assert model(x).shape == (2, 3)\n"
            "def test_step():\n    if not torch.accelerator.is_available():\n        pytest.skip('GPU')\n    step()\n",
        ),
        # Not fixed: no equivalent, too old a torch, no torch.accelerator backend (xla), and
        # `torch` meaning something else here.
        Invalid("import torch.cuda\nready = torch.cuda.is_initialized()\ntorch.cuda.init()\n", lines=[2, 3]),
        Invalid("import torch\nok = torch.cuda.is_available()\n", lines=[2], options={"torch-version": "2.5"}),
        Invalid("import torch\nok = torch.cuda.is_available()\n", lines=[2], device="xla"),
        Invalid("from torch.cuda import device_count\ndef f(torch):\n    return device_count()\n", lines=[3]),
        Invalid(  # a flag nothing reads (improved-diffusion): info; text added to a log line (mmcv): a warning
            "import torch\nclass Trainer:\n    def __init__(self):\n        self.sync_cuda = torch.cuda.is_available()\n"
            "    def log(self, stats):\n        text = f\"loss {stats['loss']}\"\n        if torch.cuda.is_available():\n"
            "            text += f\"memory: {stats['memory']}\"\n        print(text)\n",
            lines=[4, 7],
            message="is_available` is CUDA-only: without CUDA it returns False, ",
            fixed="import torch\nclass Trainer:\n    def __init__(self):\n"
            "        self.sync_cuda = torch.accelerator.is_available()\n"
            "    def log(self, stats):\n        text = f\"loss {stats['loss']}\"\n        if torch.accelerator.is_available():\n"
            "            text += f\"memory: {stats['memory']}\"\n        print(text)\n",
        ),
        Invalid(  # LoRA's gpu.py: a count only printed
            "import torch\nprint('rank:', rank, 'device_count:', torch.cuda.device_count())\n",
            lines=[2],
            message="what is printed or logged here says nothing of another device",
            fixed="import torch\nprint('rank:', rank, 'device_count:', torch.accelerator.device_count())\n",
        ),
        # a check that only guards a message or freeing cached memory (bark, whisper): a warning
        Invalid(
            "import torch, warnings\nif torch.cuda.is_available():\n    warnings.warn('CUDA is available')\n"
            "def clear():\n    if torch.cuda.is_available():\n        torch.cuda.empty_cache()\n"
            "        torch.cuda.synchronize()\nif torch.cuda.is_available(): print('on a GPU')\n",
            lines=[2, 5, 8],
            message="skips the message or freeing of cached memory it guards",
            fixed="import torch, warnings\nif torch.accelerator.is_available():\n    warnings.warn('CUDA is available')\n"
            "def clear():\n    if torch.accelerator.is_available():\n        torch.cuda.empty_cache()\n"
            "        torch.cuda.synchronize()\nif torch.accelerator.is_available(): print('on a GPU')\n",
        ),
    ]
