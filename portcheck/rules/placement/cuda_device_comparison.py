from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety
from portcheck.flow import LOSES_EXTRAS
from portcheck.rewrites import edits, placement
from portcheck.rewrites.edits import Edit, replace_nodes
from portcheck.rule import ERROR, INFO, OFF, WARNING, FileContext, Invalid, Rule, Valid, per_target
from portcheck.walk import descendants

_EQUALITY = (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)
_FALSE_ELSEWHERE = "which is false on every other device"
_ASSERTED = "and this assert stops the program on every other device"
_GUARDS_MESSAGE = "so every other device skips the message (or freeing of cached memory) it guards"
_GUARDS_LIBRARY = f"so every other device {LOSES_EXTRAS}"
_ELSE_PLACES = "so every other device takes the `else`, which places on `{subject}` itself: nothing to port"
_PICKS_KERNEL = (
    "which here picks a fused kernel, so every other device takes the optimizer's unfused path (its `fused=`)"
)
# What skips only extras there (a message, a library's fast path, a fused kernel): a port's to open or drop;
# on the CPU the CUDA path stays for GPUs.
SKIPS_EXTRAS = per_target(WARNING, rocm=OFF, cpu=INFO)
_KERNEL_OPTIONS = frozenset({"fused", "foreach"})
# Flags whose name says CUDA, a GPU or half precision.
_CUDA_MEANING = re.compile(r"^(use_|on_|is_)?(cuda|gpu|half|fp16)$", re.IGNORECASE)
_BY_ELIMINATION = (
    "setting a flag named for CUDA (or its float16) that holds on every device but the CPU, a TPU or Trainium "
    "included: what it turns on there is CUDA's"
)  # optimizer options whose False is the portable path


class CudaDeviceComparison(Rule):
    """## What it does
    Reports checks of a device against `"cuda"`: `x.device.type == "cuda"`,
    `device != "cuda"`, `"cuda" in str(device)`, `str(device).startswith("cuda")`, and a
    device option's `choices=["cuda", "cpu"]` (`parser.add_argument("--device-type", ...)`)
    or a check's list of the devices it accepts (`assert device_type in ["cuda", "cpu"]`)
    that leaves the target out; also CUDA by elimination, a flag named for CUDA, a GPU or
    half precision set to "not the CPU" (YOLO's `cuda = device.type != "cpu"`, `half =
    device.type != "cpu"  # half precision only supported on CUDA`), which turns CUDA's
    choices on for a TPU too.

    ## Why is this bad?
    On any other target the check is silently false, so code meant for the accelerator (mixed
    precision, pinned memory, non-blocking copies, synchronisation for timing) is skipped
    without a sound. `torch.autocast(enabled=device.type == "cuda")` trains a TPU model in
    float32 and nobody notices.

    ## Example
    ```python
    use_amp = x.device.type == "cuda"
    ```

    ## Use instead
    ```python
    use_amp = x.device.type != "cpu"
    ```

    ## Targets
    A warning on every target but ROCm: it runs, but may run differently from what was meant.
    Info where only CUDA reaches it (under another CUDA check, or in a test gated on GPUs):
    as written it never runs on the target. A warning with no fix where the check guards
    only a message or freeing cached memory (`if x.device.type == "cuda":
    print(torch.cuda.max_memory_allocated())`), or a CUDA-only library or CUDA's own facts
    and seed (`from flash_attn import ...`, `torch.cuda.get_device_name()`,
    `torch.cuda.manual_seed(0)`; also in the `else` of `device != "cuda"`): the portable code after it runs on the target, without what the check keeps
    from it, which a port gives the target's equivalent (`torch.accelerator.max_memory_allocated()`,
    scaled_dot_product_attention) or drops. So for a flag read only as an optimizer's `fused=`
    or `foreach=` and in messages (`use_fused = fused_ok and device_type == "cuda"`): elsewhere
    the optimizer takes its unfused implementation. Info for all of these on the CPU, where the
    CUDA path stays for GPUs. Info everywhere where the check guards only cuDNN's harmless
    switches (`torch.backends.cudnn.benchmark = True`), CUDA's own tuning or debugging
    switches that the CUDA API table drops elsewhere (`torch.cuda.set_sync_debug_mode(...)`,
    `torch.backends.cuda.preferred_linalg_library(...)`), or an assertion that CUDA is there
    (`assert torch.cuda.is_available()`): the target skips nothing it needs. Info, with no
    fix, where the `if` has an `else` that places on the very device it tests (pytorch/examples'
    ImageNet: `if device.type == "cuda": images = images.cuda(gpu)` / `else: images =
    images.to(device)`): every other device takes that portable path.

    ## Fix safety
    Unsafe: `"cuda"` becomes the target's device type (`x.device.type == "tpu"`,
    `"tpu" in str(device)`, `.startswith("tpu")`, `device in ("tpu", "mps")`), and `"cuda:N"`
    becomes `"xpu:N"` where the target keeps indices. It is unsafe for the reason
    is-cuda-attribute's fix is: the check now holds on the target, so the code it guards runs
    there for the first time, and that code is often CUDA-only (a custom kernel, a
    `cupy` call) with a portable path in the `else`. Read the guarded code first.

    Safe where the device checked is one the fix rewrites at its source (`device = "cuda"`
    ... `device_type = "cuda" if "cuda" in device else "cpu"`): the check follows its value,
    and without it the branch would silently turn off (autocast in float32 on a TPU). Either
    way the check is rewritten only together with what it guards (see `portcheck fix`).

    A chain of device checks that ends raising (`if device.startswith("cuda"): ... elif
    device == "mps": ... else: raise ValueError(...)`) is also reported once at its `raise`: an
    error on each target whose device type it does not name, which reaches the `raise`. Not
    fixed there: the target needs a branch of its own.

    Safe, too, for a device option's choices and a check that refuses every device it does not
    list (`assert device_type in ["cuda", "mps", "cpu"]`, `if device not in ("cuda", "cpu"):
    raise ...`): the target's device type is added to the list (`choices=["cuda", "cpu",
    "tpu"]`), which refuses nothing it accepted before.

    With `--device auto` `<device> == "cuda"`, `"cuda" in <device>` and `<device> in
    {"cuda"}` become `<device> != "cpu"` (and their negations `== "cpu"`): on the one
    accelerator present, False on a host without one, as the CUDA check was. Not fixed:
    `--device cpu` (the check is already False there; `"cpu"` would invert it), `"cuda:N"`
    where a process owns one device (its device may still carry an index), and under `auto`
    any other form. An `assert` on such a check stops the program on every other device: an
    error, not a warning.
    """

    code = "PC105"
    name = "cuda-device-comparison"
    message = 'compares a device with "{literal}", {consequence}'
    hint = 'ask what the check means: "any accelerator" is `device.type != "cpu"`; a target is `== "<type>"`'
    severity = per_target(WARNING, rocm=OFF)
    fix_safety = FixSafety.UNSAFE
    triggers = (b"cuda",)
    cuda_only = True

    VALID = [
        Valid('import torch\nif x.device.type != "cpu":\n    pass\n'),
        Valid('import torch\non_accelerator = x.device.type != "cpu"\nuse_cuda = torch.device("cpu") == x.device\n'),
        Valid('import torch\nif args.backend == "cuda":\n    pass\n'),
        Valid('if "cuda" in message:\n    print(message)\n'),
        Valid('def f(torch, device):\n    return device == "mps"\n'),
        Valid("import torch\np.add_argument('--backend', choices=['cuda', 'triton'])\n"),
        Valid("import torch\np.add_argument('--device', choices=('cuda', 'cpu', 'tpu', 'neuron'))\n"),
        Valid("import torch\nassert device_type in ['cuda', 'cpu', 'tpu', 'neuron']\n"),
    ]
    INVALID = [
        # guards only a message, or a CUDA-only library with a portable path after it: a warning, no fix
        Invalid(
            'import torch\ndef report(x, fabric):\n    if fabric.device.type == "cuda":\n'
            '        fabric.print(f"Memory used: {torch.cuda.max_memory_allocated() / 1e9:.02f} GB")\n'
            'def attend(q, k, v):\n    if q.device.type == "cuda" and q.dtype == torch.bfloat16:\n'
            "        from flash_attn import flash_attn_func\n        return flash_attn_func(q, k, v, causal=True)\n"
            "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
            lines=[3, 6],
            message="so every other device",
        ),
        # the else places on the device tested (pytorch/examples' ImageNet): info, nothing to port
        Invalid(
            "import torch\ndef step(images, device, gpu):\n    if device.type == 'cuda':\n"
            "        images = images.cuda(gpu, non_blocking=True)\n    else:\n        images = images.to(device)\n"
            "    return images\n",
            lines=[3],
            message="takes the `else`, which places on `device` itself",
        ),
        # guards only cuDNN's harmless switches (Wav2Lip's face detector): info, nothing to port
        Invalid(
            "import torch\ndef detect(net, img, device):\n    if 'cuda' in device:\n"
            "        torch.backends.cudnn.benchmark = True\n    return net(torch.from_numpy(img).to(device))\n",
            lines=[3],
            message="skips only cuDNN switches",
        ),
        # guards only a switch the CUDA API table drops elsewhere (audiocraft's sync debugging): info
        Invalid(
            "import torch\ndef run_step(self, batch):\n    if self.device == 'cuda' and self.check:\n"
            "        torch.cuda.set_sync_debug_mode('warn')\n    return self.model(batch)\n",
            lines=[3],
            message="skips only CUDA's own tuning or debugging switches",
        ),
        # guards only an assertion that CUDA is there (OpenVoice): info, nothing to port
        Invalid(
            "import torch\nclass Base:\n    def __init__(self, device='cpu'):\n        if 'cuda' in device:\n"
            "            assert torch.cuda.is_available()\n        self.device = device\n",
            lines=[4],
            message="skips only an assertion that CUDA is there",
        ),
        Invalid(
            'import torch\nuse_amp = x.device.type == "cuda"\n',
            lines=[2],
            unsafe=True,
            fixed='import torch\nuse_amp = x.device.type == "tpu"\n',
        ),
        Invalid('import torch\nuse_amp = x.device.type == "cuda"\n', lines=[2]),  # unsafe: not without opt-in
        Invalid(
            'import torch as T\ndev = T.device("cpu")\nif dev.type != "cuda":\n    pass\n',
            lines=[3],
            device="auto",
            unsafe=True,
            fixed='import torch as T\ndev = T.device("cpu")\nif dev.type == "cpu":\n    pass\n',
        ),
        Invalid(
            'import torch\ndef amp(x):\n    return torch.autocast("cpu", enabled=x.device.type == "cuda")\n',
            lines=[3],
            device="auto",
            unsafe=True,
            fixed='import torch\ndef amp(x):\n    return torch.autocast("cpu", enabled=x.device.type != "cpu")\n',
        ),
        Invalid(
            'from torch import cuda\nif "cuda" in str(device) and cuda.is_available():\n    pass\n',
            lines=[2],
            device="mps",
            unsafe=True,
            fixed='from torch import cuda\nif "mps" in str(device) and cuda.is_available():\n    pass\n',
        ),
        Invalid(
            'from torch.cuda import synchronize as sync\nif str(args.device).startswith("cuda"):\n    sync()\n',
            lines=[2],
            unsafe=True,
            fixed='from torch.cuda import synchronize as sync\nif str(args.device).startswith("tpu"):\n    sync()\n',
        ),
        Invalid(
            'import torch.cuda\npin = device == "cuda:0"\n',
            lines=[2],
            device="xpu",
            unsafe=True,
            fixed='import torch.cuda\npin = device == "xpu:0"\n',
        ),
        # A process owns one TPU, but its device may still carry an index: not fixed.
        Invalid('import torch.cuda\npin = device == "cuda:0"\n', lines=[2], unsafe=True),
        Invalid(
            'def step(batch, device):\n    if device in ("cuda", "mps", \'cuda:1\'):\n        batch = batch.pin_memory()\n',
            lines=[2],
            device="npu",
            unsafe=True,
            fixed='def step(batch, device):\n    if device in ("npu", "mps", \'npu:1\'):\n        batch = batch.pin_memory()\n',
        ),
        Invalid(
            'import torch\ndevice_type = (torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type\n'
            'if device_type == "cuda":\n    pass\n',
            lines=[3],
            device="auto",
            unsafe=True,
            fixed='import torch\ndevice_type = (torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type\n'
            'if device_type != "cpu":\n    pass\n',
        ),
        Invalid(
            'import torch\nif "cuda" in str(device):\n    pass\n',
            lines=[2],
            device="auto",
            unsafe=True,
            fixed='import torch\nif str(device) != "cpu":\n    pass\n',
        ),
        # A check of a device the fix rewrites at its source (each place it is set) is part of
        # the same port: safe.
        Invalid(
            "import torch\ndevice = 'cuda'\nif ddp:\n    device = f'cuda:{rank}'\nuse_amp = 'cuda' in device\n",
            lines=[5],
            device="xpu",
            fixed="import torch\ndevice = 'cuda'\nif ddp:\n    device = f'cuda:{rank}'\nuse_amp = 'xpu' in device\n",
        ),
        Invalid(
            "import torch\ndevice = 'cuda'\nif cpu:\n    device = args.device\nuse_amp = 'cuda' in device\n", lines=[5]
        ),
        Invalid(
            "import torch\ndevice = 'cuda'\ndevice_type = 'cuda' if 'cuda' in device else 'cpu'\n",
            lines=[3],
            device="neuron",
            fixed="import torch\ndevice = 'cuda'\ndevice_type = 'cuda' if 'neuron' in device else 'cpu'\n",
        ),
        Invalid(
            "import torch\ndevice = 'cuda'\ndevice_type = 'cuda' if 'cuda' in device else 'cpu'\n",
            lines=[3],
            device="auto",
            fixed="import torch\ndevice = 'cuda'\ndevice_type = 'cuda' if device != \"cpu\" else 'cpu'\n",
        ),
        Invalid(
            'import torch\ndevice_type = "cuda" if torch.cuda.is_available() else "cpu"\nassert device_type in {"cuda"}\n',
            lines=[3],
            message="this assert stops the program",
            fixed='import torch\ndevice_type = "cuda" if torch.cuda.is_available() else "cpu"\nassert device_type in {"tpu"}\n',
        ),
        Invalid(  # nanochat's chat_cli.py: `--device-type tpu` is refused before anything runs
            "import argparse\nimport torch\np = argparse.ArgumentParser()\n"
            "p.add_argument('--device-type', type=str, default='', choices=['cuda', 'cpu', 'mps'])\n",
            lines=[4],
            fixed="import argparse\nimport torch\np = argparse.ArgumentParser()\n"
            "p.add_argument('--device-type', type=str, default='', choices=['cuda', 'cpu', 'mps', 'tpu'])\n",
        ),
        Invalid(  # nanochat's compute_init: once the device becomes "tpu" the assert refuses it
            "import torch\ndef init(device_type='cuda'):\n"
            "    assert device_type in ['cuda', 'mps', 'cpu'], 'Invalid device type'\n"
            "    if device_type not in ('cuda', 'cpu'):\n        raise ValueError(device_type)\n",
            lines=[3, 4],
            message="as the devices this check accepts",
            fixed="import torch\ndef init(device_type='cuda'):\n"
            "    assert device_type in ['cuda', 'mps', 'cpu', 'tpu'], 'Invalid device type'\n"
            "    if device_type not in ('cuda', 'cpu', 'tpu'):\n        raise ValueError(device_type)\n",
        ),
        Invalid(  # nanochat: CUDA's own seed, and a CUDA-only library in the else branch
            "import torch\ndef init(device_type):\n    torch.manual_seed(42)\n"
            "    if device_type == 'cuda':\n        torch.cuda.manual_seed(42)\n"
            "    if device_type != 'cuda':\n        print('FP8 needs CUDA')\n    else:\n"
            "        from flash_attn import flash_attn_func\n",
            lines=[4, 6],
            message="loses the CUDA-only library",
        ),
        Invalid(  # llm.c: read only as the optimizer's `fused=` and in a message; CUDA's memory peak
            "import torch\ndef configure(params, device_type):\n    use_fused = device_type == 'cuda'\n"
            "    print(f'fused AdamW: {use_fused}')\n    return torch.optim.AdamW(params, fused=use_fused)\n"
            "def measure(device):\n    if device == 'cuda':\n        torch.cuda.reset_peak_memory_stats()\n",
            lines=[3, 7],
            message='compares a device with "cuda", ',
        ),
        Invalid(  # YOLO: CUDA by elimination
            "import torch\ndef run(device, opt):\n    cuda = device.type != 'cpu'\n"
            "    half = device.type != 'cpu' and opt.half\n    return cuda, half\n",
            lines=[3, 4],
            message="holds on every device but the CPU",
        ),
        Invalid(  # YOLOv5's val.py: the option narrowed to "not the CPU"
            "import torch\ndef run(model, half=True):\n    device = next(model.parameters()).device\n"
            "    half &= device.type != 'cpu'  # half precision only on cuda\n    model.half() if half else model.float()\n",
            lines=[4],
            message="holds on every device but the CPU",
        ),
        Invalid(  # LeRobot: a chain of device checks that ends raising, reported at the `raise`
            "import torch\ndef available(device: str) -> bool:\n    if device.startswith('cuda'):\n"
            "        return torch.cuda.is_available()\n    elif device == 'mps':\n"
            "        return torch.backends.mps.is_available()\n    elif device == 'cpu':\n        return True\n"
            "    else:\n        raise ValueError(f'Unknown device {device}')\n",
            lines=[3, 10],
            message='compares a device with "cuda", ',
        ),
        Invalid(  # a chain that names the target's device reaches its own branch there: only the check
            "def available(device):\n    if device == 'cuda':\n        return True\n"
            "    elif device == 'tpu':\n        return True\n    else:\n        raise ValueError(device)\n",
            lines=[2],
            message="which is false on every other device",
            options={"targets": ["tpu"]},
        ),
        # On the CPU the check is already False: left.
        Invalid('import torch\nuse_amp = x.device.type == "cuda"\n', lines=[2], device="cpu", unsafe=True),
    ]

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if patterns.compares_literal_with(node, _is_cuda, patterns.is_device_like):
            accepted = self._accepted_devices(node)
            if accepted is not None:
                self._report_accepted(accepted, "as the devices this check accepts: it refuses every other device")
                return
            self._report_closed_chain(node)
            safety = FixSafety.SAFE if self._derived(_subjects(node)) else FixSafety.UNSAFE
            self._report(node, self._comparison_edit(node, safety))
        elif self._cuda_by_elimination(node):
            self.report(node, literal="cpu", consequence=_BY_ELIMINATION)

    def _cuda_by_elimination(self, node: cst.Comparison) -> bool:
        """`cuda = device.type != "cpu"`, `half = device.type != "cpu" and opt.half` (YOLO): a
        flag named for CUDA, a GPU or half precision, set to "not the CPU"."""
        flow = self.ctx.flow
        if flow is None or not patterns.is_device_like(node.left):
            return False
        if not any(type(link.operator) is cst.NotEqual and flow.is_cpu(link.comparator) for link in node.comparisons):
            return False
        _, target = _flag_set(self.ctx.chain(node))
        return type(target) is cst.Name and _CUDA_MEANING.match(target.value) is not None

    def visit_Call(self, node: cst.Call) -> None:
        self._check_choices(node)
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("startswith", "endswith"):
            prefix = patterns.positional(node, 0)
            if prefix is not None and _is_cuda(prefix.value) and patterns.is_device_like(func.value):
                self._report_closed_chain(node)
                safety = FixSafety.SAFE if self._derived([func.value]) else FixSafety.UNSAFE
                self._report(node, self._literal_edit(node, [prefix.value], safety))

    def _report_closed_chain(self, test: cst.BaseExpression) -> None:
        """A chain of device checks that ends raising (LeRobot's `if device.startswith("cuda"):
        ... elif device == "mps": ... else: raise ValueError(...)`): every device it does not
        name reaches the `raise`, reported there, once per chain, besides the check itself
        (whose fix decides whether what it guards is rewritten: portcheck.coherence)."""
        statement = self.ctx.parent
        if type(statement) is not cst.If or statement.test is not test:
            return
        ending = (_elifs(statement) or [statement])[-1].orelse
        body = ending.body.body if type(ending) is cst.Else else ()
        raised = body[0].body[0] if body and type(body[0]) is cst.SimpleStatementLine else None
        if type(raised) is not cst.Raise:
            return
        if id(raised) not in self._closed_chains:
            self._closed_chains.add(id(raised))
            head = self._chain_head(statement)
            named = {
                patterns.string_value(node) for branch in (head, *_elifs(head)) for node in descendants(branch.test)
            }
            severity = {
                name: OFF if target.device_type in named or name == "rocm" else ERROR
                for name, target in target_data.all_targets().items()
            }
            consequence = "as one of the devices a chain of checks names: every other device reaches its `raise`"
            self.report(raised, severity=severity, literal="cuda", consequence=consequence)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._closed_chains: set[int] = set()  # the ids of the `raise`s reported

    def _chain_head(self, statement: cst.If) -> cst.If:
        """The `if` an `elif` belongs to (FastChat's `if device == "cpu": ... elif device ==
        "cuda": ...`): the whole chain names its devices."""
        head, ancestors = statement, self.ctx.ancestors
        for outer in reversed(ancestors[:-1] if ancestors and ancestors[-1] is statement else ()):
            if type(outer) is not cst.If or outer.orelse is not head:
                break
            head = outer
        return head

    def _check_choices(self, call: cst.Call) -> None:
        """`parser.add_argument("--device-type", choices=["cuda", "cpu", "mps"])`: argparse
        compares the device given with each choice and refuses the target's."""
        choices = patterns.keyword(call, "choices")
        if patterns.method_name(call) != "add_argument" or choices is None:
            return
        listed = choices.value
        if not isinstance(listed, (cst.List, cst.Tuple, cst.Set)) or not listed.elements:
            return
        values = [patterns.string_value(element.value) for element in listed.elements]
        flags = [patterns.string_value(arg.value) or "" for arg in call.args if arg.keyword is None]
        option = next((flag for flag in flags if "device" in flag.lower()), None)
        if option is None or "cuda" not in values:
            return
        self._report_accepted(listed, f"as `choices=` of `{option}`: argparse refuses every other device")

    def _accepted_devices(self, node: cst.Comparison) -> cst.List | cst.Tuple | cst.Set | None:
        """The list of a device check that refuses what it does not name: `assert device_type in
        ["cuda", "mps", "cpu"]` (nanochat), `if device not in ("cuda", "cpu"): raise ...`. Its
        CUDA is one device among those it accepts, not the check's meaning."""
        if len(node.comparisons) != 1 or not patterns.is_device_like(node.left):
            return None
        listed = node.comparisons[0].comparator
        operator = node.comparisons[0].operator
        if not isinstance(listed, (cst.List, cst.Tuple, cst.Set)) or len(listed.elements) < 2:
            return None
        statement = self.ctx.parent
        if type(operator) is cst.In and type(statement) is cst.Assert and statement.test is node:
            return listed
        if type(operator) is cst.NotIn and type(statement) is cst.If and statement.test is node:
            body = statement.body.body
            raises = body and isinstance(body[0], cst.SimpleStatementLine) and type(body[0].body[0]) is cst.Raise
            return listed if raises else None
        return None

    def _report_accepted(self, listed: cst.List | cst.Tuple | cst.Set, consequence: str) -> None:
        """A list of the devices accepted, CUDA among them: the fix adds the target's device
        type, which refuses nothing accepted before."""
        values = [patterns.string_value(element.value) for element in listed.elements]
        written = self.ctx.fix_target.device_type
        if written in values or any(value is None for value in values):
            return
        edit = None
        if written and not placement.inside_fstring(self.ctx.ancestors):
            title = f'"{written}" added to the devices accepted'
            edit = Edit(listed, edits.with_string_added(listed, written), FixSafety.SAFE, title)
        self.report(listed, edit=edit, literal="cuda", consequence=consequence)

    def _report(self, node: cst.CSTNode, edit: Edit | None) -> None:
        flow = self.ctx.flow
        check = flow.in_check(self.ctx.ancestors, node) if flow is not None else None
        if check is not None and check.asserts:
            self.report(node, edit=edit, severity=per_target(ERROR, rocm=OFF), literal="cuda", consequence=_ASSERTED)
        elif check is not None and check.skips_only:
            consequence = f"so every other device {check.skips_only}: nothing to port"
            self.report(node, edit=None, severity=per_target(INFO, rocm=OFF), literal="cuda", consequence=consequence)
        elif check is not None and (check.tells_only or check.guards_cuda_library):
            consequence = _GUARDS_MESSAGE if check.tells_only else _GUARDS_LIBRARY
            self.report(node, edit=None, severity=SKIPS_EXTRAS, literal="cuda", consequence=consequence)
        elif self._picks_kernel_only(node):
            self.report(node, edit=None, severity=SKIPS_EXTRAS, literal="cuda", consequence=_PICKS_KERNEL)
        elif isinstance(node, cst.Comparison) and (subject := self._placed_by_else(node)) is not None:
            consequence = _ELSE_PLACES.format(subject=subject)
            self.report(node, edit=None, severity=per_target(INFO, rocm=OFF), literal="cuda", consequence=consequence)
        else:
            self.report(node, edit=edit, literal="cuda", consequence=_FALSE_ELSEWHERE)

    def _placed_by_else(self, node: cst.Comparison) -> str | None:
        """The device an `if` tests whose `else` places on that device itself (pytorch/examples'
        ImageNet: `if device.type == 'cuda': images = images.cuda(args.gpu) ... else: images =
        images.to(device)`): every other device takes the portable path. None elsewhere."""
        ancestors = self.ctx.ancestors
        statement = next((each for each in reversed(ancestors) if type(each) is cst.If), None)
        if statement is None or statement.orelse is None:
            return None
        if statement.test is not node and not any(each is node for each in descendants(statement.test)):
            return None  # in the body, not the test
        roots = {_root(subject) for subject in _subjects(node)} - {None}
        for call in descendants(statement.orelse):
            if type(call) is cst.Call and patterns.method_name(call) == "to":
                given = patterns.argument(call, 0, "device")
                if given is not None and _root(given.value) in roots:
                    return _root(given.value)
        return None

    def _picks_kernel_only(self, node: cst.CSTNode) -> bool:
        """`use_fused = fused_available and device_type == "cuda"` (nanoGPT, llm.c), read only
        as an optimizer's `fused=` (or `foreach=`) and in messages: off the CUDA path the
        optimizer takes its portable implementation, as it should."""
        flow = self.ctx.flow
        chain = self.ctx.chain(node)
        index, target = _flag_set(chain)
        if flow is None or target is None:
            return False
        uses = flow.uses(target, chain[:index]) if isinstance(target, cst.Name) else None
        read = [path for _, path in uses or () if not (path and isinstance(path[-1], cst.AssignTarget))]
        return bool(read) and all(_as_kernel_option(path) or _in_message(path) for path in read)

    def _derived(self, subjects: list[cst.BaseExpression]) -> bool:
        """Whether the device checked is a value the fix rewrites at its source, wherever it is
        set (`device = "cuda"` and `device = f"cuda:{rank}"`, `device_type = "cuda" if ... else
        "cpu"`): the check is then part of the same port, and rewriting the two together keeps
        the program's logic whole."""
        for subject in subjects:
            while isinstance(subject, cst.Call) and subject.args:  # str(device)
                subject = subject.args[0].value
            if isinstance(subject, cst.Attribute) and subject.attr.value == "type":
                subject = subject.value
            bound = self.ctx.assigned_values(subject) if isinstance(subject, cst.Name) else []
            if bound and all(any(patterns.cuda_device_literals(value)) or _cuda_device_call(value) for value in bound):
                return True
        return False

    def _comparison_edit(self, node: cst.Comparison, safety: FixSafety) -> Edit | None:
        device_type = edits.target_device_type(self.ctx)
        if device_type is None or placement.inside_fstring(self.ctx.ancestors):
            return None
        if patterns.string_value(device_type.node) is not None:
            return self._literal_edit(node, _compared_literals(node), safety)
        # The type is known at run time only (auto): `== "cuda"` becomes "on the accelerator".
        subject, operator = _single_check(node)
        spelled = placement.on_device_type(subject, device_type) if subject is not None else None
        if spelled is None:
            return None
        check = spelled.node
        assert isinstance(check, cst.Comparison)
        replacement = check if isinstance(operator, (cst.Equal, cst.In)) else placement.negated(check)
        title = f'== "cuda" -> {cst.Module([]).code_for_node(replacement)}'
        fixed = edits.with_parentheses_of(node, replacement)
        return Edit(node, fixed, safety, title, spelled.imports, spelled.prelude)

    def _literal_edit(
        self, node: cst.BaseExpression, literals: list[cst.BaseExpression], safety: FixSafety
    ) -> Edit | None:
        """Each CUDA literal of the check becomes the target's device (type)."""
        target = self.ctx.fix_target
        device_type = edits.target_device_type(self.ctx)
        written = patterns.string_value(device_type.node) if device_type is not None else None
        if not literals or written is None or written == "cpu" or placement.inside_fstring(self.ctx.ancestors):
            return None
        replacements: dict[int, cst.BaseExpression] = {}
        for literal in literals:
            if patterns.string_value(literal) == "cuda":
                replacements[id(literal)] = edits.with_parentheses_of(literal, edits.string_like(literal, written))
                continue
            spelling = None if target.one_device_per_process else edits.device_type(self.ctx, literal)
            if spelling is None:
                return None
            replacements[id(literal)] = spelling.node
        title = f'"cuda" -> "{written}" in a device check'
        if len(literals) == 1:
            return Edit(literals[0], replacements[id(literals[0])], safety, title)
        return Edit(node, replace_nodes(node, replacements), safety, title)


def _compared_literals(node: cst.Comparison) -> list[cst.BaseExpression]:
    """The CUDA literals that an equality or membership link compares with a device."""

    def held(side: cst.BaseExpression) -> list[cst.BaseExpression]:
        if isinstance(side, (cst.Tuple, cst.List, cst.Set)):
            return [element.value for element in side.elements if _is_cuda(element.value)]
        return [side] if _is_cuda(side) else []

    found: dict[int, cst.BaseExpression] = {}
    left = node.left
    for link in node.comparisons:
        right = link.comparator
        if isinstance(link.operator, _EQUALITY):
            if patterns.is_device_like(right):
                found.update((id(literal), literal) for literal in held(left))
            if patterns.is_device_like(left):
                found.update((id(literal), literal) for literal in held(right))
        left = right
    return list(found.values())


def _single_check(node: cst.Comparison) -> tuple[cst.BaseExpression | None, cst.BaseOp | None]:
    """The device of `<device> == "cuda"`, `"cuda" != <device>`, `"cuda" in <device>` or
    `<device> in {"cuda"}` (one link, bare "cuda"), and the operator."""
    if len(node.comparisons) != 1:
        return None, None
    left, right = node.left, node.comparisons[0].comparator
    operator = node.comparisons[0].operator
    if isinstance(operator, (cst.Equal, cst.NotEqual)):
        if patterns.string_value(right) == "cuda" and patterns.is_device_like(left):
            return left, operator
        if patterns.string_value(left) == "cuda" and patterns.is_device_like(right):
            return right, operator
    if isinstance(operator, (cst.In, cst.NotIn)):
        if patterns.string_value(left) == "cuda" and patterns.is_device_like(right):
            return right, operator
        if _all_cuda(right) and patterns.is_device_like(left):
            return left, operator
    return None, None


def _all_cuda(node: cst.BaseExpression) -> bool:
    """`{"cuda"}`, `("cuda",)`: a collection of nothing but bare "cuda"."""
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)) and node.elements:
        return all(patterns.string_value(element.value) == "cuda" for element in node.elements)
    return False


def _subjects(node: cst.Comparison) -> list[cst.BaseExpression]:
    """The device-like operands of a comparison chain."""
    operands = [node.left, *(link.comparator for link in node.comparisons)]
    return [operand for operand in operands if patterns.is_device_like(operand)]


def _root(node: cst.BaseExpression) -> str | None:
    """The name a device value is read from: `device` in `device.type`, `str(device)`, `device`."""
    while True:
        if type(node) is cst.Attribute:
            node = node.value
        elif type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "str" and node.args:
            node = node.args[0].value
        else:
            return node.value if type(node) is cst.Name else None


def _cuda_device_call(node: cst.BaseExpression) -> bool:
    """`torch.device("cuda")` and the like: a call given a CUDA device literal."""
    return isinstance(node, cst.Call) and any(any(patterns.cuda_device_literals(arg.value)) for arg in node.args)


def _flag_set(chain: Sequence[cst.CSTNode]) -> tuple[int, cst.BaseAssignTargetExpression | None]:
    """For a check at the end of `chain`, alone or inside `and`/`or`: the index of the `=`
    statement that binds it to one target (`use_fused = ok and device_type == "cuda"`, or
    narrows it: `half &= ...`), and
    that target; None where it is no such statement's value."""
    index = len(chain) - 1
    while index >= 0 and type(chain[index]) is cst.BooleanOperation:
        index -= 1
    statement = chain[index] if index >= 0 else None
    if type(statement) is cst.AugAssign and type(statement.operator) is cst.BitAndAssign:
        return index, statement.target  # YOLOv5's val.py: `half &= device.type != "cpu"`
    if type(statement) is not cst.Assign or len(statement.targets) != 1:
        return index, None
    return index, statement.targets[0].target


def _is_cuda(node: cst.CSTNode) -> bool:
    return patterns.string_value(node) is not None and patterns.is_cuda_device_literal(node)


def _as_kernel_option(path: Sequence[cst.CSTNode]) -> bool:
    """A use passed as `fused=` or `foreach=` (the path ends at the argument's parent)."""
    arg = path[-1] if path else None
    return isinstance(arg, cst.Arg) and arg.keyword is not None and arg.keyword.value in _KERNEL_OPTIONS


def _in_message(path: Sequence[cst.CSTNode]) -> bool:
    """A use inside an f-string or an argument of a logging call."""
    return any(isinstance(node, cst.FormattedStringExpression) for node in path) or any(
        isinstance(node, cst.Call) and patterns.is_logging_call(node) for node in path
    )


def _elifs(statement: cst.If) -> list[cst.If]:
    """The `elif` branches of an `if`."""
    found = []
    branch = statement.orelse
    while type(branch) is cst.If:
        found.append(branch)
        branch = branch.orelse
    return found
