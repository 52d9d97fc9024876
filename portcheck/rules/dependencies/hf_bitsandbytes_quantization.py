from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from portcheck import configs, filekinds, patterns, project
from portcheck.findings import Severity
from portcheck.rule import ERROR, OFF, WARNING, Invalid, Span, Valid
from portcheck.setting_rule import SettingValueRule
from portcheck.targets import TARGET_ORDER, packages

_LOAD_FLAGS = frozenset({"load_in_8bit", "load_in_4bit"})
_CONFIG_LIBRARIES = ("transformers.", "diffusers.")
_LIGHTNING = ("lightning.", "lightning_fabric.", "pytorch_lightning.")  # its precision plugin
_PREPARERS = ("prepare_model_for_kbit_training", "prepare_model_for_int8_training")
# The Trainer's `optim` values that import bitsandbytes.optim (transformers' OptimizerNames /
# _BITSANDBYTES_OPTIMIZERS).
_OPTIMIZERS = frozenset(
    {
        "adamw_bnb_8bit", "adamw_8bit", "paged_adamw_32bit", "paged_adamw_8bit", "ademamix", "ademamix_8bit",
        "paged_ademamix_32bit", "paged_ademamix_8bit", "lion_32bit", "lion_8bit", "paged_lion_32bit",
        "paged_lion_8bit", "rmsprop_bnb", "rmsprop_bnb_8bit", "rmsprop_bnb_32bit",
    }
)  # fmt: skip
_FALSY = frozenset({"False", "None"})
_FIELDS = frozenset({"dataclasses.field"})


def _bitsandbytes() -> packages.Package:
    return packages.by_key("bitsandbytes")


def _preparer_severity() -> dict[str, Severity]:
    """Where bitsandbytes cannot run, the k-bit preparation outlives the quantisation it served."""
    package = _bitsandbytes().severities()
    return {name: WARNING if package[name] is ERROR else OFF for name in TARGET_ORDER}


def _is_optimizer(node: cst.CSTNode) -> bool:
    return patterns.string_value(node) in _OPTIMIZERS


def _may_be_true(node: cst.BaseExpression) -> bool:
    """A quantisation flag that is not a plain `False`, `None` or `0`: `True`, `args.bits == 4`."""
    if isinstance(node, cst.Name):
        return node.value not in _FALSY
    if isinstance(node, cst.Integer):
        return node.evaluated_value != 0
    return True


class HfBitsandbytesQuantization(SettingValueRule):
    """## What it does
    Reports the Hugging Face and Lightning ways into bitsandbytes, which no import of it shows:
    `BitsAndBytesConfig(...)` (transformers, diffusers), Lightning's precision plugin
    `BitsandbytesPrecision(...)` (LitGPT's `--quantize bnb.nf4`), `load_in_8bit=` / `load_in_4bit=`
    (unless plainly `False`) in `from_pretrained(...)` or a kwargs dict, the Trainer's
    bitsandbytes optimizers (`optim="paged_adamw_8bit"`, `"adamw_bnb_8bit"`, `"lion_8bit"`...,
    also as a field or argparse default), and PEFT's `prepare_model_for_kbit_training(...)`
    (`prepare_model_for_int8_training` in older releases). YAML configs (TRL recipes) are read
    for the flags and the optimizer: `load_in_4bit: true`, `optim: paged_adamw_32bit`.

    ## Why is this bad?
    Each makes transformers or PEFT import bitsandbytes, whose 8-bit and 4-bit kernels are
    CUDA's (with CPU, ROCm and partial XPU and Gaudi backends): on TPU, Trainium, XLA, Apple
    and Ascend loading the model or building the optimizer fails. Left alone after the
    quantisation is dropped, `prepare_model_for_kbit_training` casts every float16 and
    bfloat16 weight of the unquantised model to float32, doubling its memory.

    ## Example
    ```python
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(name, quantization_config=bnb)
    model = prepare_model_for_kbit_training(model)
    args = TrainingArguments("out", optim="paged_adamw_8bit")
    ```

    ## Use instead
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16)
    args = TrainingArguments("out", optim="adamw_torch", bf16=True)
    ```
    LoRA on bfloat16 weights (PEFT's `get_peft_model` freezes the base model itself), or
    torchao quantisation where the target supports it.

    ## Targets
    As for the bitsandbytes package (packages.toml): an error on tpu, neuron, xla, mps and npu,
    a warning where bitsandbytes has a backend of its own (cpu, rocm, xpu, hpu).
    `prepare_model_for_kbit_training` is a warning where bitsandbytes is an error, and off
    where it runs. Under a CUDA check each is info: the check is the finding.

    ## Fix safety
    No automatic fix: dropping quantisation or an 8-bit optimizer changes memory and numerics.
    """

    code = "PC706"
    name = "hf-bitsandbytes-quantization"
    message = "{what} {problem}"
    hint = "{advice}"
    severity = _bitsandbytes().severities()
    triggers = (
        b"BitsAndBytes",
        b"BitsandbytesPrecision",
        b"4bit",
        b"8bit",
        b"32bit",
        b"kbit",
        b"int8_training",
        b"rmsprop_bnb",
        b"ademamix",
    )
    file_kinds = (filekinds.PYTHON, filekinds.CONFIG)
    cuda_only = True

    VALID = [
        Valid('from transformers import AutoModel\nm = AutoModel.from_pretrained("x", load_in_8bit=False)\n'),
        Valid(
            "import torch\nfrom transformers import TorchAoConfig, TrainingArguments\n"
            'q = TorchAoConfig("int4_weight_only")\nargs = TrainingArguments("out", optim="adamw_torch")\n'
        ),
        Valid(
            "class BitsAndBytesConfig:\n    pass\n\ndef prepare_model_for_kbit_training(m):\n    return m\n\n"
            "cfg = BitsAndBytesConfig()\nm = prepare_model_for_kbit_training(m)\n"
        ),
        Valid(
            "from transformers import AutoModelForCausalLM as LM\nfrom peft import prepare_model_for_kbit_training\n"
            "m = prepare_model_for_kbit_training(LM.from_pretrained('x'))\n",
            options={"targets": ["cpu", "rocm", "xpu", "hpu"]},
        ),
        Valid("def load(torch, cuda):\n    return torch.load(cuda, load_in_8bit=None)\n"),
        Valid("load_in_4bit: false\noptim: adamw_torch\nnote: adamw_8bit\n", path="recipes/dpo/config.yaml"),
    ]
    INVALID = [
        Invalid(
            "from torch import bfloat16\nfrom transformers import AutoModelForCausalLM, BitsAndBytesConfig as BNB\n"
            "bnb = BNB(load_in_4bit=True, bnb_4bit_compute_dtype=bfloat16)\n"
            'm = AutoModelForCausalLM.from_pretrained("x", quantization_config=bnb)\n',
            lines=[3],
            message="bitsandbytes",
        ),
        Invalid(  # LitGPT: Lightning Fabric's precision plugin quantises the model with bitsandbytes
            "import torch\nimport lightning as L\nfrom lightning.fabric.plugins import BitsandbytesPrecision\n"
            "def setup(quantize):\n    plugins = BitsandbytesPrecision(quantize[4:], torch.bfloat16)\n"
            "    return L.Fabric(plugins=plugins)\n",
            lines=[5],
            message="`BitsandbytesPrecision(...)` quantises the model with bitsandbytes",
        ),
        # qlora.py and alpaca-lora: the flags, the config and PEFT's preparation
        Invalid(
            "import torch as T\nimport transformers\nfrom peft import prepare_model_for_kbit_training as prep\n"
            'model = transformers.LlamaForCausalLM.from_pretrained(\n    "x",\n    load_in_4bit=args.bits == 4,\n'
            "    load_in_8bit=args.bits == 8,\n"
            "    quantization_config=transformers.BitsAndBytesConfig(load_in_4bit=args.bits == 4),\n)\n"
            "model = prep(model)\n",
            lines=[6, 7, 8, 10],
        ),
        Invalid(
            "from torch.utils.data import DataLoader as DL\nimport peft\nimport torch.cuda\n"
            "model = peft.prepare_model_for_int8_training(model)\n",
            lines=[4],
            options={"targets": ["tpu"]},
            message="float32",
        ),
        Invalid(
            "from dataclasses import dataclass, field\nfrom transformers import TrainingArguments\nimport torch\n\n"
            "@dataclass\nclass Args(TrainingArguments):\n"
            "    optim: str = field(default='paged_adamw_32bit')\n\n"
            'args = TrainingArguments("out", optim="adamw_8bit")\nkwargs = {"load_in_8bit": True}\n'
            'kwargs["load_in_4bit"] = True\nkwargs["load_in_8bit"] = False\n',
            lines=[7, 9, 10, 11],
        ),
        Invalid(  # alignment-handbook's QLoRA recipe
            "model_name_or_path: mistralai/Mistral-7B-v0.1\nload_in_4bit: true\nuse_peft: true\n"
            "optim: paged_adamw_32bit\n",
            lines=[2, 4],
            path="recipes/zephyr-7b-beta/dpo/config_qlora.yaml",
        ),
        Invalid(
            "import torch\nfrom transformers import BitsAndBytesConfig\n"
            "quantization = BitsAndBytesConfig(load_in_8bit=True) if torch.cuda.is_available() else None\n",
            lines=[3],
            message="reached only under a CUDA check",
        ),
    ]

    def names_setting(self, name: str) -> bool:
        return name == "optim"

    def literals(self, expression: cst.CSTNode) -> Iterable[cst.CSTNode]:
        """Bitsandbytes optimizer names, also as a dataclass field's default."""
        if isinstance(expression, cst.Call) and self.ctx.qualified_names(expression.func) & _FIELDS:
            default = patterns.keyword(expression, "default")
            return self.literals(default.value) if default is not None else ()
        return patterns.value_literals(expression, _is_optimizer)

    def report_literal(self, literal: cst.CSTNode) -> None:
        what = f"`optim={patterns.string_value(literal)!r}`"
        self._report(literal, what, "is a bitsandbytes optimizer", 'use optim="adamw_torch" (or "adamw_torch_fused")')

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        names = self.ctx.qualified_names(node.func)
        if any(name.startswith(_CONFIG_LIBRARIES) and name.endswith(".BitsAndBytesConfig") for name in names):
            self._report(node.func, "`BitsAndBytesConfig(...)`", "quantises the model with bitsandbytes")
            return
        if any(name.startswith(_LIGHTNING) and name.endswith(".BitsandbytesPrecision") for name in names):
            self._report(node.func, "`BitsandbytesPrecision(...)`", "quantises the model with bitsandbytes")
            return
        if any(name.startswith("peft.") and name.endswith(_PREPARERS) for name in names):
            self._report_preparer(node, min(names).rpartition(".")[2])
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in _LOAD_FLAGS:
                self._check_flag(arg, arg.keyword.value, arg.value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        super().visit_DictElement(node)
        key = patterns.string_value(node.key)
        if key in _LOAD_FLAGS:
            self._check_flag(node, key, node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        super().visit_Assign(node)
        for target in node.targets:
            key = patterns.setting_key(target.target) if isinstance(target.target, cst.Subscript) else None
            if key in _LOAD_FLAGS:
                self._check_flag(target, key, node.value)

    def _check_flag(self, node: cst.CSTNode, flag: str, value: cst.BaseExpression) -> None:
        if isinstance(value, cst.Name):
            value = self.ctx.assigned_value(value) or value
        if _may_be_true(value):
            self._report(node, f"`{flag}=`", "quantises the model with bitsandbytes")

    def check_text(self, text: str) -> None:
        for setting in configs.settings(text):
            what = f"`{setting.key}: {setting.value}`"
            if setting.key in _LOAD_FLAGS and setting.is_true:
                self._report(setting.span, what, "quantises the model with bitsandbytes")
            elif self.names_setting(setting.key) and setting.value in _OPTIMIZERS:
                self._report(
                    setting.span, what, "is a bitsandbytes optimizer", 'use "adamw_torch" (or "adamw_torch_fused")'
                )

    def _report(self, where: cst.CSTNode | Span, what: str, doing: str, advice: str | None = None) -> None:
        package = _bitsandbytes()
        problem = f"{doing}, {_support(self.ctx.targets, package.severities())}"
        fields = {"what": what, "problem": problem, "advice": advice or f"instead: {package.instead}"}
        self.record(project.DEPENDENCY, package.key, where, written="bitsandbytes")
        self.report_at(where, **fields)

    def _report_preparer(self, call: cst.Call, name: str) -> None:
        self.report(
            call.func,
            severity=_preparer_severity(),
            what=f"`{name}(...)`",
            problem="prepares a bitsandbytes-quantised model; on a model loaded without quantisation it "
            "casts every float16/bfloat16 weight to float32",
            advice="drop it with the quantisation: PEFT's get_peft_model freezes the base model itself",
        )


def _support(selected: tuple[str, ...], severity: dict[str, Severity]) -> str:
    """Where bitsandbytes has no backend and where its backend is partial, on the selected targets."""
    missing = [t for t in selected if severity[t] is ERROR]
    partial = [t for t in selected if severity[t] is WARNING]
    parts = []
    if missing:
        parts.append(f"which has no {'/'.join(missing)} backend")
    if partial:
        parts.append(f"whose {'/'.join(partial)} backends are partial")
    return " and ".join(parts) or "which is CUDA-first"
