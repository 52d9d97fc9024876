from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.rewrites import edits
from portcheck.rewrites.edits import Edit
from portcheck.rule import OFF, WARNING, Invalid, Rule, Valid, per_target
from portcheck.rules.distributed.nccl_backend import HOST_BACKEND, distributed_module, is_nccl, target_backend

_BACKEND_NCCL = "torch.distributed.Backend.NCCL"
_GET_BACKEND = frozenset({"torch.distributed.get_backend", "torch.distributed.distributed_c10d.get_backend"})
_EQUALITY = (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)
_CONTAINERS = (cst.Tuple, cst.List, cst.Set)


class NcclBackendCheck(Rule):
    """## What it does
    Reports code that asks whether NCCL is in use: `backend == "nccl"` (or
    `== torch.distributed.Backend.NCCL`),
    `dist.get_backend() != "nccl"`, `backend in ("nccl", ...)`,
    `torch.distributed.is_nccl_available()`.

    ## Why is this bad?
    On another target the answer is silently no, so the branch written for the accelerator's
    collectives (bucket sizes, `device_ids`, moving tensors to the device before `all_reduce`)
    is skipped. Ascend's `transfer_to_npu` documents exactly this as the code it cannot migrate.

    ## Example
    ```python
    if dist.get_backend() == "nccl":
        tensor = tensor.cuda()
    dist.all_reduce(tensor)
    ```

    ## Use instead
    ```python
    if device.type != "cpu":
        tensor = tensor.to(device)
    dist.all_reduce(tensor)
    ```

    ## Targets
    A warning on every target but ROCm; info where only a CUDA check reaches it (`if
    device.type == "cuda":`, the later conditions of `torch.version.cuda and ...`).

    ## Fix safety
    Unsafe: the check asks "are the accelerator's collectives in use?", so `"nccl"` becomes the
    target's backend (`"tpu"`, `"xccl"`...) and `is_nccl_available()` becomes
    `is_backend_available("<backend>")`. A branch that never ran on the target now runs there:
    read what it does (it often calls `.cuda()`). Safe where a tuple or list already holds the
    target's backend: the `"nccl"` entry goes, which changes nothing on the target.

    No fix where the target's backend is gloo (cpu, mps): there the answer "no accelerator
    collectives" is already right, and comparing with "gloo" would send CPU tensors down the
    accelerator branch. No fix for `--device auto`: which backend a host uses is only known
    when it runs, and no comparison keeps the check's meaning on every host.
    """

    code = "PC402"
    name = "nccl-backend-check"
    cuda_only = True
    message = 'checks for the "nccl" backend, which is never in use on this target'
    hint = 'decide on the device (device.type != "cpu") or on the backend your target uses'
    severity = per_target(WARNING, rocm=OFF)
    fix_safety = FixSafety.UNSAFE
    triggers = (b"nccl", b"NCCL")
    watched_names = ("torch.distributed.is_nccl_available",)

    VALID = [
        Valid('import torch.distributed as dist\nif dist.get_backend() == "gloo":\n    pass\n'),
        Valid('if "nccl" in message:\n    pass\n'),
        Valid("def f(torch):\n    return torch.distributed.is_nccl_available()\n"),
    ]
    INVALID = [
        Invalid(  # pytorch/examples' imagenet: asked only on CUDA, where NCCL is the backend (info)
            "import torch\nimport warnings\nif device.type == 'cuda':\n"
            "    if torch.accelerator.device_count() == 1 and args.dist_backend == 'nccl':\n"
            "        warnings.warn('nccl needs more than one GPU')\n",
            lines=[4],
            message="reached only under a CUDA check",
        ),
        Invalid(
            'import torch\nif torch.distributed.get_backend() == "nccl":\n    pass\n',
            lines=[2],
            unsafe=True,
            fixed='import torch\nif torch.distributed.get_backend() == "tpu":\n    pass\n',
        ),
        Invalid(  # without --unsafe-fixes nothing changes
            'import torch\nif torch.distributed.get_backend() == "nccl":\n    pass\n', lines=[2]
        ),
        Invalid(
            "import torch as T\nok = T.distributed.is_nccl_available()\n",
            lines=[2],
            device="neuron",
            unsafe=True,
            fixed='import torch as T\nok = T.distributed.is_backend_available("neuron")\n',
        ),
        Invalid(
            "from torch.distributed import is_nccl_available as has_nccl\nok = has_nccl()\n",
            lines=[2],
            device="xla",
            unsafe=True,
            fixed="from torch.distributed import is_nccl_available as has_nccl\nimport torch\n"
            'ok = torch.distributed.is_backend_available("xla")\n',
        ),
        Invalid(
            'from torch import distributed as dist\nuse = args.backend != "nccl"\n',
            lines=[2],
            device="npu",
            unsafe=True,
            fixed='from torch import distributed as dist\nuse = args.backend != "hccl"\n',
        ),
        Invalid(
            'from torch.distributed import get_backend as backend_of\nif backend_of(g) in ("nccl", "xccl"):\n    pass\n',
            lines=[2],
            unsafe=True,
            fixed='from torch.distributed import get_backend as backend_of\nif backend_of(g) in ("tpu", "xccl"):\n'
            "    pass\n",
        ),
        Invalid(
            'from torch.distributed import get_backend as backend_of\nif backend_of(g) in ("nccl", "xccl"):\n    pass\n',
            lines=[2],
            device="xpu",
            fixed='from torch.distributed import get_backend as backend_of\nif backend_of(g) in ("xccl",):\n    pass\n',
        ),
        Invalid(  # gloo answers "no accelerator collectives" already: nothing to change
            'import torch.distributed\nif dist_backend == "nccl":\n    pass\n', lines=[2], device="cpu", unsafe=True
        ),
        Invalid(  # auto: the backend is only known on the host
            'import torch.distributed as dist\nif dist.get_backend() == "nccl":\n    pass\n',
            lines=[2],
            device="auto",
            unsafe=True,
        ),
        Invalid('import torch.distributed\nif dist_backend == "nccl":\n    pass\n', lines=[2]),
        Invalid(  # SAM 2's training utilities: the enum is the string
            "import torch\nif torch.distributed.get_backend() == torch.distributed.Backend.NCCL:\n    t = t.cuda()\n",
            lines=[2],
        ),
    ]

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        self.report(node, edit=self._availability_edit(node))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if patterns.compares_literal_with(node, self._names_nccl, self._is_backend):
            self.report(node, edit=self._comparison_edit(node))

    def _names_nccl(self, node: cst.CSTNode) -> bool:
        """`"nccl"` or `torch.distributed.Backend.NCCL` (which is that string)."""
        return is_nccl(node) or (isinstance(node, cst.Attribute) and _BACKEND_NCCL in self.ctx.qualified_names(node))

    def _is_backend(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Call):
            return (
                bool(self.ctx.qualified_names(node.func) & _GET_BACKEND) or patterns.method_name(node) == "get_backend"
            )
        name = patterns.target_name(node)
        return name is not None and patterns.is_backend_name(name)

    def _backend(self) -> str | None:
        """The backend a check for NCCL means on the target: its device collective library;
        None where it uses the host's (gloo) or is only known at run time (auto)."""
        target = self.ctx.fix_target
        backend = target.distributed_backend
        return None if target.keeps_cuda_api or not backend or backend == HOST_BACKEND else backend

    def _availability_edit(self, node: cst.Name | cst.Attribute) -> Edit | None:
        call = self.ctx.parent
        backend = self._backend()
        if backend is None or not isinstance(call, cst.Call) or call.func is not node or call.args:
            return None
        module = distributed_module(self.ctx)
        if module is None:
            return None
        replacement = cst.Call(
            func=cst.Attribute(value=module.node, attr=cst.Name("is_backend_available")),
            args=[cst.Arg(cst.SimpleString(f'"{backend}"'))],
        )
        title = f'is_nccl_available() -> is_backend_available("{backend}")'
        return Edit(call, replacement, FixSafety.UNSAFE, title, module.imports)

    def _comparison_edit(self, node: cst.Comparison) -> Edit | None:
        """The first link that compares a backend with "nccl": the literal becomes the target's
        backend; in a container that already holds it, the "nccl" entry goes."""
        if self._backend() is None:
            return None
        left = node.left
        for link in node.comparisons:
            right = link.comparator
            if isinstance(link.operator, _EQUALITY):
                for side, other in ((left, right), (right, left)):
                    if self._is_backend(other):
                        edit = self._side_edit(side)
                        if edit is not None:
                            return edit
            left = right
        return None

    def _side_edit(self, side: cst.BaseExpression) -> Edit | None:
        target = self.ctx.fix_target
        if is_nccl(side):
            value = patterns.string_value(side)
            backend = target_backend(target, value) if value is not None else None
            if backend is None:
                return None
            replacement = edits.with_parentheses_of(side, edits.string_like(side, backend))
            return Edit(side, replacement, FixSafety.UNSAFE, f"{value!r} -> {backend!r} in a backend check")
        if not isinstance(side, _CONTAINERS):
            return None
        elements = list(side.elements)
        nccl = {id(element) for element in elements if is_nccl(element.value)}
        if not nccl:
            return None
        backend = self._backend()
        present = {patterns.string_value(element.value) for element in elements}
        if backend in present:
            kept = [element for element in elements if id(element) not in nccl]
            if not kept:
                return None
            if kept[-1] is not elements[-1]:
                kept[-1] = kept[-1].with_changes(comma=elements[-1].comma)
            if isinstance(side, cst.Tuple) and len(kept) == 1 and not isinstance(kept[0].comma, cst.Comma):
                kept[0] = kept[0].with_changes(comma=cst.Comma())
            title = f'"nccl" dropped from a backend check that already names {backend!r}'
            return Edit(side, side.with_changes(elements=kept), FixSafety.SAFE, title)
        replaced = []
        for element in elements:
            value = patterns.string_value(element.value) if id(element) in nccl else None
            new = target_backend(target, value) if value is not None else None
            if id(element) in nccl and new is None:
                return None
            replaced.append(element.with_changes(value=edits.string_like(element.value, new)) if new else element)
        return Edit(
            side, side.with_changes(elements=replaced), FixSafety.UNSAFE, f'"nccl" -> {backend!r} in a backend check'
        )
