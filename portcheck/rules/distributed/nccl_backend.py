from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from portcheck import configs, filekinds, patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety
from portcheck.rewrites import edits, versions
from portcheck.rewrites.calls import in_current_statement, with_keyword
from portcheck.rewrites.edits import Edit, Spelling
from portcheck.rule import ERROR, OFF, FileContext, Invalid, Valid, per_target
from portcheck.setting_rule import SettingValueRule, option_destination
from portcheck.targets import Target

_BACKEND_FIRST = frozenset(
    {"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"}
)
_BACKEND_THIRD = frozenset({"torch.distributed.new_group", "torch.distributed.distributed_c10d.new_group"})
_BACKEND_NCCL = "torch.distributed.Backend.NCCL"
# gloo, the collective library of the CPU: a target that uses it has no device collectives.
HOST_BACKEND = "gloo"


def is_nccl(node: cst.CSTNode) -> bool:
    """`"nccl"` (in any case: torch lowercases a backend's name, so `"NCCL"` is NCCL too), or a
    per-device backend string naming it such as `"cpu:gloo,cuda:nccl"`."""
    value = patterns.string_value(node)
    return value is not None and _names_nccl(value.lower())


def _names_nccl(value: str) -> bool:
    return value == "nccl" or "nccl" in value.split(",") or ":nccl" in value


def target_backend(target: Target, value: str) -> str | None:
    """The target's spelling of a backend string naming NCCL: its backend for `"nccl"`; in a
    per-device string (`"cpu:gloo,cuda:nccl"`) each NCCL entry becomes the target's device and
    backend unless the string already gives that device one. None for `auto` (no one string
    fits every host) and for shapes torch does not accept."""
    backend = target.distributed_backend
    if not backend or target.keeps_cuda_api:
        return None
    value = value.lower()
    if value == "nccl":
        return backend
    if ":" not in value:
        return None
    pairs: list[tuple[str, str]] = []
    for entry in value.split(","):
        device, colon, name = entry.partition(":")
        if not colon or not device or not name:
            return None
        if name == "nccl":
            device, name = target.device_type, backend
        if all(device != seen for seen, _ in pairs):
            pairs.append((device, name))
    return ",".join(f"{device}:{name}" for device, name in pairs)


def distributed_module(ctx: FileContext) -> Spelling | None:
    """How to write `torch.distributed` here: the user's own binding (`dist` after
    `import torch.distributed as dist` or `from torch import distributed as dist`), else
    `torch.distributed` through the file's `torch` (`import torch` loads the package)."""
    bound = ctx.binding("torch.distributed")
    if bound is not None and not bound[1]:
        return Spelling(edits.dotted(bound[0]))
    torch = edits.torch_name(ctx)
    if torch is None:
        return None
    return Spelling(cst.Attribute(value=torch.node, attr=cst.Name("distributed")), torch.imports)


def auto_backend(ctx: FileContext) -> Spelling | None:
    """For `auto`: `dist.get_default_backend_for_device(DEVICE)`, the collective library torch
    registers for the device present (gloo on a host without an accelerator)."""
    module = distributed_module(ctx)
    device = edits.target_device_type(ctx)
    if module is None or device is None or not versions.has(ctx, versions.DEFAULT_BACKEND):
        return None
    node = device.node
    if isinstance(node, cst.Attribute) and node.attr.value == "type" and not node.lpar:
        node = node.value  # the function takes the device itself
    call = cst.Call(
        func=cst.Attribute(value=module.node, attr=cst.Name("get_default_backend_for_device")),
        args=[cst.Arg(node)],
    )
    imports = tuple(dict.fromkeys((*module.imports, *device.imports)))
    return Spelling(call, imports, device.prelude)


def backend_advice(selected: tuple[str, ...]) -> str:
    choices = []
    for name in selected:
        target = target_data.get(name)
        if target.keeps_cuda_api:
            continue
        text = f'{name}: "{target.distributed_backend}"'
        if target.distributed_init_method:
            text += f' with init_method="{target.distributed_init_method}"'
        choices.append(text)
    return (
        "use the target's backend ("
        + "; ".join(choices)
        + "), or torch.distributed.get_default_backend_for_device(device)"
    )


class NcclBackend(SettingValueRule):
    """## What it does
    Reports the `"nccl"` process-group backend (in any case, `"NCCL"`): `init_process_group("nccl")`,
    `backend="nccl"` in any call, `torch.distributed.Backend.NCCL` (compared, it is
    nccl-backend-check's), a `backend` variable, attribute, dict entry, dataclass field or
    `--backend` option defaulting to `"nccl"`, and a `"nccl"` string bound to a name later
    passed as the backend; in YAML configs, a backend setting (`backend: nccl`,
    `dist_backend: nccl`); and `"nccl"` among the `choices=` of a `--backend` option that does
    not list the target's backend (argparse refuses it on the command line).

    ## Why is this bad?
    NCCL is NVIDIA's collective library. Without it `init_process_group("nccl")` raises at
    start-up, so a distributed job never begins.

    ## Example
    ```python
    dist.init_process_group(backend="nccl")
    ```

    ## Use instead
    ```python
    dist.init_process_group(backend=dist.get_default_backend_for_device(device))
    ```
    or the target's backend: tpu `"tpu"`, neuron `"neuron"`, xla `"xla"` with
    `init_method="xla://"`, xpu `"xccl"`, npu and hpu `"hccl"`, mps and cpu `"gloo"`.

    ## Targets
    An error on every target but ROCm, where RCCL answers to `"nccl"`.

    ## Fix safety
    Safe: `"nccl"` (or `Backend.NCCL` where it is given as the backend) becomes the target's
    backend from the target data, and in a per-device string such as `"cpu:gloo,cuda:nccl"`
    the NCCL entry becomes the target's device and backend. The original raises on every
    target, so no working behaviour is lost. Where the target's backend needs an init method
    (xla: `init_method="xla://"`), the fix adds it to the `init_process_group` call that takes
    the literal, unless the call already chooses one (`init_method=`, `store=`); a literal
    reaching the call through a variable, an option or `**kwargs` is left to you there, since
    the init method cannot be added in the same place. An option's choices get the target's
    backend added; NCCL stays for CUDA hosts.

    With `--device auto` the backend becomes
    `dist.get_default_backend_for_device(DEVICE)`: gloo on a host without an accelerator,
    NCCL on CUDA, the plugin's own elsewhere. A per-device string is not fixed for auto, nor
    is a YAML config.
    """

    code = "PC401"
    name = "nccl-backend"
    message = '"nccl" is NVIDIA\'s collective library, absent on this target'
    hint = "{advice}"
    severity = per_target(ERROR, rocm=OFF)
    fix_safety = FixSafety.SAFE
    triggers = (b"nccl", b"NCCL")
    watched_names = (_BACKEND_NCCL,)
    file_kinds = (filekinds.PYTHON, filekinds.CONFIG)

    VALID = [
        Valid(  # the option accepts the target's backend already
            "import argparse\nparser = argparse.ArgumentParser()\n"
            "parser.add_argument('--dist_backend', default='gloo', choices=['nccl', 'gloo', 'tpu'])\n",
            options={"targets": ["tpu"]},
        ),
        Valid(  # a config that asks for the CPU's collectives, and a note that names NCCL
            "trainer:\n  distributed:\n    backend: gloo\n  note: 'backend nccl on GPUs'\n",
            path="configs/train.yaml",
        ),
        Valid("import torch.distributed as dist\nnccl = dist.get_backend() == dist.Backend.NCCL\n"),  # PC402's
        Valid('import torch.distributed as dist\ndist.init_process_group("gloo")\n'),
        Valid('print("falling back from nccl")\n'),
        Valid('def setup(torch):\n    torch.distributed.init_process_group("nccl")\n'),
        Valid('import torch\ntorch.distributed.init_process_group("nccl")\n', options={"targets": ["rocm"]}),
        Valid('import torch\nlibrary = "nccl"\nprint(library)\n'),
        Valid(
            "import torch.distributed as dist\ndist.init_process_group(dist.get_default_backend_for_device(device))\n"
        ),
    ]
    INVALID = [
        Invalid(  # CosyVoice: the option's choices refuse the target's backend given on the command line
            "import argparse\nparser = argparse.ArgumentParser()\n"
            "parser.add_argument('--ddp.dist_backend', dest='dist_backend', default='nccl', choices=['nccl', 'gloo'])\n",
            lines=[3, 3],
            fixed="import argparse\nparser = argparse.ArgumentParser()\n"
            "parser.add_argument('--ddp.dist_backend', dest='dist_backend', default='tpu', choices=['nccl', 'gloo', 'tpu'])\n",
        ),
        Invalid(  # sam2's training config (Hydra)
            "trainer:\n  distributed:\n    backend: nccl\n    find_unused_parameters: true\n",
            lines=[3],
            path="configs/train.yaml",
        ),
        Invalid(
            'import torch\ntorch.distributed.init_process_group("nccl")\n',
            lines=[2],
            fixed='import torch\ntorch.distributed.init_process_group("tpu")\n',
        ),
        # get_default_backend_for_device is torch 2.6's.
        Invalid(
            'import torch\ntorch.distributed.init_process_group("nccl")\n',
            lines=[2],
            device="auto",
            options={"torch-version": "2.5"},
        ),
        Invalid(  # vq-vae-2: torch lowercases the name
            'import torch.distributed as dist\ndist.init_process_group(backend="NCCL", init_method=url)\n',
            lines=[2],
            device="cpu",
            fixed='import torch.distributed as dist\ndist.init_process_group(backend="gloo", init_method=url)\n',
        ),
        Invalid(
            'import torch as T\nT.distributed.init_process_group(backend="nccl", init_method="env://")\n',
            lines=[2],
            device="cpu",
            fixed='import torch as T\nT.distributed.init_process_group(backend="gloo", init_method="env://")\n',
        ),
        Invalid(
            "import torch.distributed as dist\n\ndist.init_process_group(backend='nccl', rank=0, world_size=1)\n",
            lines=[3],
            device="auto",
            fixed="import torch.distributed as dist\nimport torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "dist.init_process_group(backend=dist.get_default_backend_for_device(DEVICE), rank=0, world_size=1)\n",
        ),
        Invalid(
            'from torch.distributed import init_process_group as ipg\n\nipg("nccl")\n',
            lines=[3],
            device="auto",
            fixed="from torch.distributed import init_process_group as ipg\nimport torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "ipg(torch.distributed.get_default_backend_for_device(DEVICE))\n",
        ),
        Invalid(
            'from torch.distributed import init_process_group as ipg\nipg("nccl")\n',
            lines=[2],
            device="npu",
            fixed='from torch.distributed import init_process_group as ipg\nipg("hccl")\n',
        ),
        Invalid(
            "import torch\nimport torch.distributed as dist\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            'def setup():\n    dist.init_process_group("nccl")\n',
            lines=[6],
            device="auto",
            fixed="import torch\nimport torch.distributed as dist\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            "def setup():\n    dist.init_process_group(dist.get_default_backend_for_device(device))\n",
        ),
        Invalid(
            'from torch import distributed as dist\ndist.init_process_group("nccl", rank=rank, world_size=world)\n',
            lines=[2],
            device="xla",
            fixed="from torch import distributed as dist\n"
            'dist.init_process_group("xla", rank=rank, world_size=world, init_method="xla://")\n',
        ),
        Invalid(
            'import torch.distributed as dist\n\ndist.init_process_group(\n    backend="nccl",\n    rank=rank,\n)\n',
            lines=[4],
            device="xla",
            fixed="import torch.distributed as dist\n\ndist.init_process_group(\n"
            '    backend="xla",\n    rank=rank,\n    init_method="xla://",\n)\n',
        ),
        Invalid(
            'import torch.distributed as dist\n\ndist.init_process_group(\n    "nccl",  # NVIDIA\n    rank=rank\n)\n',
            lines=[4],
            device="xla",
            fixed="import torch.distributed as dist\n\ndist.init_process_group(\n"
            '    "xla",  # NVIDIA\n    rank=rank,\n    init_method="xla://"\n)\n',
        ),
        Invalid(
            'import torch.distributed as dist\ndist.init_process_group("nccl", "env://")\n',
            lines=[2],
            device="xla",
            fixed='import torch.distributed as dist\ndist.init_process_group("xla", "env://")\n',
        ),
        Invalid(  # xla: init_method="xla://" cannot be added where the literal is bound
            'import torch.distributed as dist\nBACKEND = "nccl"\ndist.init_process_group(BACKEND)\n',
            lines=[2],
            device="xla",
        ),
        Invalid(
            'import torch.distributed as dist\nBACKEND = "nccl"\ndist.init_process_group(BACKEND)\n',
            lines=[2],
            device="neuron",
            fixed='import torch.distributed as dist\nBACKEND = "neuron"\ndist.init_process_group(BACKEND)\n',
        ),
        Invalid(
            'from torch import distributed as dist\ndist.init_process_group("cpu:gloo,cuda:nccl")\n',
            lines=[2],
            fixed='from torch import distributed as dist\ndist.init_process_group("cpu:gloo,tpu:tpu")\n',
        ),
        Invalid(
            'from torch import distributed as dist\ndist.init_process_group("cpu:gloo,cuda:nccl")\n',
            lines=[2],
            device="cpu",
            fixed='from torch import distributed as dist\ndist.init_process_group("cpu:gloo")\n',
        ),
        Invalid(  # auto: no one per-device string fits every host
            'from torch import distributed as dist\ndist.init_process_group("cpu:gloo,cuda:nccl")\n',
            lines=[2],
            device="auto",
        ),
        Invalid(
            'from torch.distributed import new_group as group\ng = group(ranks, None, "nccl")\n',
            lines=[2],
            device="xpu",
            fixed='from torch.distributed import new_group as group\ng = group(ranks, None, "xccl")\n',
        ),
        Invalid(
            'from torch.distributed import new_group as group\ng = group(ranks, None, "nccl")\n',
            lines=[2],
            device="xla",
            fixed='from torch.distributed import new_group as group\ng = group(ranks, None, "xla")\n',
        ),
        Invalid("import torch.distributed\nb = torch.distributed.Backend.NCCL\n", lines=[2]),
        Invalid(
            "import torch.distributed\ntorch.distributed.init_process_group(torch.distributed.Backend.NCCL)\n",
            lines=[2],
            device="mps",
            fixed='import torch.distributed\ntorch.distributed.init_process_group("gloo")\n',
        ),
        Invalid(
            "import torch.distributed\n\ntorch.distributed.init_process_group(torch.distributed.Backend.NCCL)\n",
            lines=[3],
            device="auto",
            fixed="import torch.distributed\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "torch.distributed.init_process_group(torch.distributed.get_default_backend_for_device(DEVICE))\n",
        ),
        Invalid(  # fairseq's config: a dataclass field
            "from dataclasses import dataclass, field\n@dataclass\nclass DistributedConfig:\n"
            "    distributed_backend: str = field(default='nccl', metadata={'help': 'distributed backend'})\n",
            lines=[4],
            device="hpu",
            fixed="from dataclasses import dataclass, field\n@dataclass\nclass DistributedConfig:\n"
            "    distributed_backend: str = field(default='hccl', metadata={'help': 'distributed backend'})\n",
        ),
        Invalid(
            'import argparse\np = argparse.ArgumentParser()\np.add_argument("--dist-backend", default="nccl")\n',
            lines=[3],
            device="hpu",
            fixed='import argparse\np = argparse.ArgumentParser()\np.add_argument("--dist-backend", default="hccl")\n',
        ),
        Invalid(
            'import argparse\n\np = argparse.ArgumentParser()\np.add_argument("--dist-backend", default="nccl")\n',
            lines=[4],
            device="auto",
            fixed="import argparse\nimport torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "p = argparse.ArgumentParser()\n"
            'p.add_argument("--dist-backend", default=torch.distributed.get_default_backend_for_device(DEVICE))\n',
        ),
        Invalid(
            'strategy = DDPStrategy(process_group_backend="nccl")\ncfg = {"backend": \'nccl\'}\n',
            lines=[1, 2],
            fixed='strategy = DDPStrategy(process_group_backend="tpu")\ncfg = {"backend": \'tpu\'}\n',
        ),
        Invalid(  # auto: the literal is bound elsewhere than where the call names it
            'import torch.distributed as dist\nLIBRARY = "nccl"\n\ndef setup():\n    dist.init_process_group(LIBRARY)\n',
            lines=[2],
            device="auto",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._call: tuple[cst.Call, frozenset[str]] | None = None

    def names_setting(self, name: str) -> bool:
        return patterns.is_backend_name(name)

    def literals(self, expression: cst.CSTNode) -> Iterable[cst.CSTNode]:
        return patterns.value_literals(expression, lambda node: is_nccl(node) or self._is_backend_nccl(node))

    def positional_setting(self, call: cst.Call, names: frozenset[str]) -> cst.Arg | None:
        index = 0 if names & _BACKEND_FIRST else 2 if names & _BACKEND_THIRD else None
        return None if index is None else patterns.positional(call, index)

    def visit_Call(self, node: cst.Call) -> None:
        self._call = (node, self.ctx.qualified_names(node.func))
        try:
            super().visit_Call(node)
        finally:
            self._call = None
        if patterns.method_name(node) == "add_argument":
            self._check_choices(node)

    def _check_choices(self, add_argument: cst.Call) -> None:
        """`choices=["nccl", "gloo"]` of a `--dist_backend` option (CosyVoice's): argparse refuses
        the target's backend given on the command line. The fix adds it to the choices."""
        destination = option_destination(add_argument)
        choices = patterns.keyword(add_argument, "choices")
        if not destination or not self.names_setting(destination) or choices is None:
            return
        listed = choices.value
        if not isinstance(listed, (cst.List, cst.Tuple)) or not listed.elements:
            return
        nccl = next((element.value for element in listed.elements if is_nccl(element.value)), None)
        values = {patterns.string_value(element.value) for element in listed.elements}
        severity = {  # off where the target's own backend is among the choices (gloo on the CPU)
            name: OFF if target_data.get(name).distributed_backend in values else level
            for name, level in self.severity.items()
        }
        if nccl is None or id(nccl) in self._reported or all(severity[name] == OFF for name in self.ctx.targets):
            return
        self._reported.add(id(nccl))
        edit = self._added_choice(listed)
        self.report(nccl, edit=edit, severity=severity, advice=backend_advice(self.ctx.targets))

    def _added_choice(self, listed: cst.List | cst.Tuple) -> Edit | None:
        """The target's backend added to the choices (NCCL stays for CUDA hosts)."""
        target = self.ctx.fix_target
        backend = target.distributed_backend if not target.keeps_cuda_api else None
        values = [patterns.string_value(element.value) for element in listed.elements]
        if not backend or backend in values:
            return None
        return Edit(
            listed, edits.with_string_added(listed, backend), FixSafety.SAFE, f"{backend!r} added to the choices"
        )

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        if isinstance(self.ctx.parent, (cst.Comparison, cst.ComparisonTarget)):
            return  # `get_backend() == Backend.NCCL` asks, and is nccl-backend-check's (PC402)
        if id(node) not in self._reported:  # not given as the backend: nothing to rewrite
            self._reported.add(id(node))
            self.report(node, advice=backend_advice(self.ctx.targets))

    def check_text(self, text: str) -> None:
        """`backend: nccl` in a YAML config (sam2's `distributed:` section, Hydra recipes): not fixed."""
        for setting in configs.settings(text):
            if patterns.is_backend_name(setting.key) and _names_nccl(setting.value.lower()):
                self.report_span(setting.span, advice=backend_advice(self.ctx.targets))

    def report_literal(self, literal: cst.CSTNode) -> None:
        self.report(literal, edit=self._edit(literal), advice=backend_advice(self.ctx.targets))

    def _is_backend_nccl(self, node: cst.CSTNode) -> bool:
        return isinstance(node, (cst.Name, cst.Attribute)) and _BACKEND_NCCL in self.ctx.qualified_names(node)

    def _edit(self, literal: cst.CSTNode) -> Edit | None:
        target = self.ctx.fix_target
        if target.keeps_cuda_api:
            return None
        value = patterns.string_value(literal) or "nccl"  # Backend.NCCL is the string "nccl"
        if not target.distributed_backend:
            spelling = auto_backend(self.ctx) if value == "nccl" and in_current_statement(self.ctx, literal) else None
            if spelling is None:
                return None
            return spelling.edit(literal, FixSafety.SAFE, f"{value!r} -> the default backend of the device present")
        backend = target_backend(target, value)
        if backend is None:
            return None
        replacement = edits.with_parentheses_of(literal, edits.string_like(literal, backend))  # type: ignore[arg-type]
        title = f"{value!r} -> {backend!r}"
        if not target.distributed_init_method:
            return Edit(literal, replacement, FixSafety.SAFE, title)
        return self._with_init_method(literal, replacement, title, target.distributed_init_method)

    def _with_init_method(
        self, literal: cst.CSTNode, replacement: cst.BaseExpression, title: str, init_method: str
    ) -> Edit | None:
        """The backend given straight to `init_process_group` also gets the target's init
        method, unless the call chooses its rendezvous itself; `new_group` takes none."""
        if self._call is None:
            return None
        call, names = self._call
        arg = self.positional_setting(call, names) or (
            patterns.keyword(call, "backend") if names & (_BACKEND_FIRST | _BACKEND_THIRD) else None
        )
        if arg is None or arg.value is not literal:
            return None
        if names & _BACKEND_THIRD:
            return Edit(literal, replacement, FixSafety.SAFE, title)
        if any(a.star for a in call.args):
            return None  # `*args` / `**kwargs` may or may not choose the rendezvous
        args = [a.with_changes(value=replacement) if a is arg else a for a in call.args]
        fixed = call.with_changes(args=args)
        if patterns.argument(call, 1, "init_method") is None and patterns.keyword(call, "store") is None:
            fixed = with_keyword(fixed, "init_method", cst.SimpleString(f'"{init_method}"'))
            title += f' with init_method="{init_method}"'
        return Edit(call, fixed, FixSafety.SAFE, title)
