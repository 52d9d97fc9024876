from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from portcheck import configs, filekinds, patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety, Severity
from portcheck.rewrites.edits import Edit, string_like
from portcheck.rule import ERROR, OFF, WARNING, FileContext, Invalid, Valid
from portcheck.rules.precision import chooses_float16, under_test
from portcheck.setting_rule import SettingValueRule

_SETTING = re.compile(r"(^|_)mixed_precision$", re.IGNORECASE)
_FLAGS = {"fp16": "bf16", "fp16_full_eval": "bf16_full_eval"}  # TrainingArguments' and their bfloat16 twins
_SEVERITY_BY_SUPPORT = {"raises": ERROR, "ignored": WARNING}


def _severity(target: target_data.Target) -> Severity:
    """An error where Accelerate refuses float16, a warning where it ignores it or where the
    chip computes natively in bfloat16 (Gaudi), off where float16 is the device's own AMP."""
    if target.fp16_mixed_precision in _SEVERITY_BY_SUPPORT:
        return _SEVERITY_BY_SUPPORT[target.fp16_mixed_precision]
    return WARNING if target.amp_dtype == "bfloat16" else OFF


def _is_fp16(node: cst.CSTNode) -> bool:
    return patterns.string_value(node) == "fp16"


def takes_training_arguments(names: frozenset[str], call: cst.Call) -> bool:
    """`TrainingArguments(...)`, `Seq2SeqTrainingArguments(...)` and other subclasses named so
    (sentence-transformers, optimum), and TRL's trainer configs (`SFTConfig`, `DPOConfig`...)."""
    spelled = names or frozenset(filter(None, [patterns.target_name(call.func)]))
    return any(
        name.endswith("TrainingArguments") or (name.startswith("trl.") and name.endswith("Config")) for name in spelled
    )


class HfFp16MixedPrecision(SettingValueRule):
    """## What it does
    Reports float16 mixed precision asked of Hugging Face's trainers: `fp16=True` (and
    `fp16_full_eval=True`) in `TrainingArguments`, `Seq2SeqTrainingArguments` or a TRL config
    (`SFTConfig`...), an argparse `--fp16` that defaults to True where the module hands an
    option to `fp16=` (`fp16=args.fp16`), and `mixed_precision="fp16"` given to
    `Accelerator(...)` (also as a parameter's default, `Accelerator(mixed_precision=precision if
    amp else "no")`), an argparse option, a config field or `ACCELERATE_MIXED_PRECISION`,
    when a selected target computes in bfloat16. YAML configs count too: `fp16: true` in a TRL
    recipe, `mixed_precision: fp16` in an accelerate config (reported, not fixed).

    ## Why is this bad?
    float16 mixed precision is CUDA's: autocast to float16 plus a GradScaler for gradients
    that would underflow. Accelerate, on which the Trainer runs, allows it only for the device
    types cuda (ROCm too), xpu, npu, hpu, mps, mlu, musa, sdaa and xla on GPUs, and raises
    `ValueError: fp16 mixed precision requires a device in (...)` for the others: TorchTPU's
    `"tpu"`, Trainium's `"neuron"`, TPUs under torch_xla. On the CPU it is ignored and the
    model trains in float32. Those chips train in bfloat16, which has float32's range and needs
    no loss scaling.

    ## Example
    ```python
    args = TrainingArguments(output_dir="out", fp16=True)
    accelerator = Accelerator(mixed_precision="fp16")
    ```

    ## Use instead
    ```python
    args = TrainingArguments(output_dir="out", bf16=True)
    accelerator = Accelerator(mixed_precision="bf16")
    ```

    ## Targets
    From the target data (`fp16-mixed-precision`): an error where Accelerate raises (tpu,
    neuron, xla), a warning where it ignores float16 (cpu) or where it runs but the chip
    computes in bfloat16 (hpu); off where float16 is the device's own mixed precision (mps,
    xpu, npu, rocm). Under a CUDA check (`fp16=True if torch.cuda.is_available() else False`)
    it is info: the check is the finding. A setting under a test that the user asked for
    float16 (`if args.dtype == "float16":`, `if args.fp16:`) is left alone, as in PC308.

    ## Fix safety
    On targets whose AMP dtype is bfloat16, `fp16=True` becomes `bf16=True`
    (`fp16_full_eval=True` becomes `bf16_full_eval=True`) and a `"fp16"` mixed-precision
    setting written in place becomes `"bf16"`. Safe where Accelerate refuses float16 (tpu,
    neuron, xla): the program stopped at start-up there, and the fix asks for the half
    precision those chips compute in; results differ from the CUDA run's by bfloat16's rounding
    (8 significant bits to float16's 11), as any port to them does. Unsafe (needs
    `--unsafe-fixes`) where float16 was ignored (cpu: the model trained in float32 and now
    trains in bfloat16) or ran (hpu), since results change there. Not fixed: a call that
    already names `bf16=` or takes `**kwargs`, a flag that is not a plain `True`, an option's
    default (the script has no `--bf16` to turn on), a setting behind a name other code may
    compare, and `--device auto`, which may run on a float16 GPU.
    """

    code = "PC309"
    name = "hf-fp16-mixed-precision"
    message = "{what} asks for float16 mixed precision (autocast with a GradScaler), {problem}"
    hint = 'use bfloat16 instead: bf16=True, mixed_precision="bf16"'
    severity = {name: _severity(t) for name, t in target_data.all_targets().items()}
    fix_safety = FixSafety.SAFE
    triggers = (b"fp16",)
    file_kinds = (filekinds.PYTHON, filekinds.CONFIG)
    cuda_only = True

    VALID = [
        Valid(
            "from torch import bfloat16\nfrom transformers import TrainingArguments\n"
            'args = TrainingArguments("out", bf16=True, fp16=False)\n'
        ),
        Valid(
            'import torch\nfrom accelerate import Accelerator\nacc = Accelerator(mixed_precision="bf16")\n'
            'dtype = torch.float16 if acc.mixed_precision == "fp16" else torch.float32\n'
        ),
        Valid(
            'from transformers import TrainingArguments\nargs = TrainingArguments("out", fp16=True)\n',
            options={"targets": ["mps", "xpu", "npu", "rocm"]},
        ),
        Valid("def configure(TrainingArguments, torch):\n    return MyArgs(fp16=True)\n"),
        Valid(  # float16 where the user asks for it (Parler-TTS's training script)
            "import torch\nfrom accelerate import Accelerator\nif training_args.dtype == 'float16':\n"
            "    mixed_precision = 'fp16'\nelif training_args.dtype == 'bfloat16':\n    mixed_precision = 'bf16'\n"
            "accelerator = Accelerator(mixed_precision=mixed_precision)\n"
        ),
        Valid(
            "import argparse\nimport torch.cuda\np = argparse.ArgumentParser()\n"
            'p.add_argument("--mixed_precision", choices=["no", "fp16", "bf16"], default=None)\n'
            "args = TrainingArguments('out', fp16=torch.cuda.is_available(), bf16=args.bf16)\n"
        ),
        Valid("compute_environment: LOCAL_MACHINE\nmixed_precision: bf16\nfp16: false\nbf16: true\n", path="ddp.yaml"),
    ]
    INVALID = [
        Invalid(
            'from transformers import TrainingArguments\nargs = TrainingArguments("out", fp16=True)\n',
            lines=[2],
            message="fp16=True",
            fixed='from transformers import TrainingArguments\nargs = TrainingArguments("out", bf16=True)\n',
        ),
        Invalid(
            "import transformers as hf\nimport torch as T\nargs = hf.Seq2SeqTrainingArguments(\n"
            '    "out",\n    fp16=True,  # CUDA\n    fp16_full_eval=True,\n    per_device_train_batch_size=8,\n)\n',
            lines=[5, 6],
            device="neuron",
            fixed="import transformers as hf\nimport torch as T\nargs = hf.Seq2SeqTrainingArguments(\n"
            '    "out",\n    bf16=True,  # CUDA\n    bf16_full_eval=True,\n    per_device_train_batch_size=8,\n)\n',
        ),
        Invalid(
            "from trl import SFTConfig as Config\nfrom torch.amp import autocast as ac\nUSE_FP16 = True\n"
            'cfg = Config(output_dir="out", fp16=USE_FP16, bf16=False)\n',
            lines=[3],
        ),
        Invalid(  # denoising-diffusion-pytorch's Trainer: a parameter's default, chosen when amp is on
            "import torch\nfrom accelerate import Accelerator\nclass Trainer:\n"
            "    def __init__(self, amp=False, precision='fp16'):\n"
            "        self.accelerator = Accelerator(mixed_precision=precision if amp else 'no')\n",
            lines=[4],
            message='mixed_precision="fp16"',
        ),
        # CUDA's own branch: it never runs on the target (info), the check is the finding
        Invalid(
            "import torch\nfrom transformers import TrainingArguments\n"
            'args = TrainingArguments("out", fp16=True if torch.cuda.is_available() else False)\n',
            lines=[3],
            message="reached only under a CUDA check",
        ),
        # it ran before: on the CPU float16 was ignored (float32), so bfloat16 changes results
        Invalid(
            'from transformers import TrainingArguments\nargs = TrainingArguments("out", fp16=True)\n',
            lines=[2],
            device="cpu",
            unsafe=True,
            fixed='from transformers import TrainingArguments\nargs = TrainingArguments("out", bf16=True)\n',
        ),
        Invalid(
            'from transformers import TrainingArguments\nargs = TrainingArguments("out", fp16=True)\n', device="cpu"
        ),
        Invalid(
            "import os\nfrom accelerate import Accelerator\n"
            'os.environ["ACCELERATE_MIXED_PRECISION"] = "fp16"\naccelerator = Accelerator(mixed_precision="fp16")\n',
            lines=[3, 4],
            device="xla",
            fixed="import os\nfrom accelerate import Accelerator\n"
            'os.environ["ACCELERATE_MIXED_PRECISION"] = "bf16"\naccelerator = Accelerator(mixed_precision="bf16")\n',
        ),
        Invalid(
            "import argparse\nimport accelerate\nparser = argparse.ArgumentParser()\n"
            'parser.add_argument("--mixed_precision", type=str, default="fp16", choices=["no", "fp16", "bf16"])\n'
            "acc = accelerate.Accelerator(mixed_precision=parser.parse_args().mixed_precision)\n",
            lines=[4],
            fixed="import argparse\nimport accelerate\nparser = argparse.ArgumentParser()\n"
            'parser.add_argument("--mixed_precision", type=str, default="bf16", choices=["no", "fp16", "bf16"])\n'
            "acc = accelerate.Accelerator(mixed_precision=parser.parse_args().mixed_precision)\n",
        ),
        # SageMaker's training scripts: an option that defaults to True, handed to the Trainer
        Invalid(
            "import argparse\nfrom transformers import Trainer, TrainingArguments\n"
            "parser = argparse.ArgumentParser()\n"
            'parser.add_argument("--fp16", type=bool, default=True)\nargs = parser.parse_args()\n'
            'trainer = Trainer(args=TrainingArguments("out", fp16=args.fp16))\n',
            lines=[4],
            message="`--fp16` defaulting to True",
        ),
        Invalid(  # an accelerate config and a recipe
            "distributed_type: MULTI_GPU\nmixed_precision: fp16\n---\nlearning_rate: 2.0e-05\nfp16: true\n",
            lines=[2, 5],
            path="recipes/accelerate_configs/ddp.yaml",
        ),
        # auto may run on a float16 GPU; **kwargs may hold bf16
        Invalid(
            'from transformers import TrainingArguments\nargs = TrainingArguments("out", fp16=True)\n',
            lines=[2],
            device="auto",
            options={"targets": ["tpu"]},
        ),
        Invalid(
            'from transformers import TrainingArguments\nargs = TrainingArguments("out", fp16=True, **extra)\n',
            lines=[2],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._direct: set[int] = set()  # literals written in the setting itself, not behind a name
        self._option_defaults: list[tuple[cst.Arg, str, tuple[cst.CSTNode, ...]]] = []
        self._takes_option = False  # some `fp16=` of the Trainer's comes from elsewhere (`args.fp16`)

    def names_setting(self, name: str) -> bool:
        return _SETTING.search(name) is not None

    def literals(self, expression: cst.CSTNode) -> Iterator[cst.CSTNode]:
        return patterns.value_literals(expression, _is_fp16)

    def check(self, expression: cst.BaseExpression) -> None:
        self._direct.update(id(literal) for literal in self.literals(expression))
        super().check(expression)

    def report_literal(self, literal: cst.CSTNode) -> None:
        if under_test(self.ctx.chain(literal), chooses_float16):
            return  # `if args.dtype == "float16": mixed_precision = "fp16"`: float16 where the user asks for it
        edit = None
        if id(literal) in self._direct:
            edit = self._edit(literal, string_like(literal, "bf16"), "'fp16' -> 'bf16'")
        self._report(literal, 'mixed_precision="fp16"', edit)

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        if patterns.method_name(node) == "add_argument":
            self._note_option_default(node)
        if not takes_training_arguments(self.ctx.qualified_names(node.func), node):
            return
        for arg in node.args:
            if arg.keyword is None or arg.keyword.value not in _FLAGS:
                continue
            value = arg.value
            if isinstance(value, cst.Name) and not patterns.is_true(value):
                value = self.ctx.assigned_value(value) or value
            literals = list(patterns.value_literals(value, patterns.is_true))
            for literal in literals:
                edit = self._flag_edit(node, arg) if literal is arg.value else None
                self._report(literal, f"`{arg.keyword.value}=True`", edit)
            if not literals and not isinstance(value, (cst.Name, cst.Integer)):  # `fp16=args.fp16`: the option decides
                self._takes_option = True

    def _note_option_default(self, call: cst.Call) -> None:
        """`parser.add_argument("--fp16", type=bool, default=True)`, reported once the module is
        seen to hand an option to the Trainer's `fp16=`."""
        option, default = patterns.positional(call, 0), patterns.keyword(call, "default")
        flag = patterns.string_value(option.value) if option is not None else None
        if (
            flag
            and flag.lstrip("-").replace("-", "_") in _FLAGS
            and default is not None
            and patterns.is_true(default.value)
        ):
            self._option_defaults.append((default, flag, self.ctx.chain(default)))

    def leave_Module(self, node: cst.Module) -> None:
        if not self._takes_option:
            return
        for default, flag, chain in self._option_defaults:
            what = f"`{flag}` defaulting to True"
            self.reports.append(self.report_here(default, chain=chain, what=what, problem=_problem(self.ctx.targets)))

    def _flag_edit(self, call: cst.Call, arg: cst.Arg) -> Edit | None:
        """`fp16=True` -> `bf16=True`, where the call names no `bf16=` already and hides none
        in `**kwargs` (a second one would be a TypeError)."""
        assert arg.keyword is not None
        twin = _FLAGS[arg.keyword.value]
        if (
            not patterns.is_true(arg.value)
            or patterns.keyword(call, twin) is not None
            or any(a.star for a in call.args)
        ):
            return None
        return self._edit(arg, arg.with_changes(keyword=cst.Name(twin)), f"{arg.keyword.value}=True -> {twin}=True")

    def _edit(self, original: cst.CSTNode, replacement: cst.CSTNode, title: str) -> Edit | None:
        """Only for a target that computes in bfloat16: safe where float16 raised, unsafe where
        it ran or was ignored (results change)."""
        target = self.ctx.fix_target
        if target.amp_dtype != "bfloat16":
            return None
        safety = FixSafety.SAFE if target.fp16_mixed_precision == "raises" else FixSafety.UNSAFE
        return Edit(original, replacement, safety, title)

    def _report(self, node: cst.CSTNode, what: str, edit: Edit | None) -> None:
        self.report(node, what=what, problem=_problem(self.ctx.targets), edit=edit)

    def check_text(self, text: str) -> None:
        for setting in configs.settings(text):
            flag = setting.key in _FLAGS and setting.is_true
            if flag or (self.names_setting(setting.key) and setting.value == "fp16"):
                self.report_span(
                    setting.span, what=f"`{setting.key}: {setting.value}`", problem=_problem(self.ctx.targets)
                )


def _problem(selected: tuple[str, ...]) -> str:
    """What float16 mixed precision does on the selected targets, from the target data."""
    by_support: dict[str, list[str]] = {}
    for name in selected:
        target = target_data.get(name)
        if _severity(target) > OFF:
            by_support.setdefault(target.fp16_mixed_precision, []).append(name)
    parts = []
    if "raises" in by_support:
        parts.append(f"refuses on {'/'.join(by_support['raises'])} (ValueError)")
    if "ignored" in by_support:
        parts.append(f"ignores on {'/'.join(by_support['ignored'])} (it trains in float32)")
    if "runs" in by_support:
        where = "/".join(by_support["runs"])
        parts.append(f"runs on {where}, though {where} compute natively in bfloat16")
    return f"which Accelerate {'; '.join(parts)}" if parts else "which the selected targets do not need"
