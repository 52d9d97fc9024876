from __future__ import annotations

import libcst as cst

from portcheck import configs, filekinds, flow, patterns, project
from portcheck.rule import ERROR, Invalid, Rule, Span, Valid, at_most_info, per_target
from portcheck.rules.precision.hf_fp16_mixed_precision import takes_training_arguments
from portcheck.targets import packages
from portcheck.walk import descendants

# Settings that make the Hugging Face stack import a CUDA-only package (packages.toml), with the
# values that do: the Trainer's (and TRL's) Liger kernels and DeepSpeed, accelerate's launcher.
_LIGER = ("use_liger_kernel", "use_liger")
_DEEPSPEED_TYPE = "distributed_type"
_DEEPSPEED = "deepspeed"
_OFF = frozenset({"", "none", "null", "false", "no"})


_XFORMERS_SWITCH = "enable_xformers_memory_efficient_attention"  # diffusers' models and pipelines
_XFORMERS_SETTER = "set_use_memory_efficient_attention_xformers"  # diffusers' models: (valid, attention_op)


def _turned_off(call: cst.Call) -> bool:
    """`vae.set_use_memory_efficient_attention_xformers(False)`: the switch set off."""
    valid = patterns.argument(call, 0, "valid")
    return valid is None or (type(valid.value) is cst.Name and valid.value.value == "False")


def _package(setting: str) -> packages.Package:
    if setting == _XFORMERS_SWITCH:
        return packages.by_key("xformers")
    return packages.by_key("liger_kernel" if setting in _LIGER else "deepspeed")


def _asks_for_xformers(test: cst.BaseExpression) -> bool:
    return any(
        isinstance(node, cst.Call) and "xformers" in patterns.dotted(node.func).lower()
        for node in (test, *descendants(test))
    )


class CudaOnlyPackageSetting(Rule):
    """## What it does
    Reports settings that make Hugging Face's libraries use a CUDA-only package (the table of
    cuda-only-package-import, PC701) that no import in the code shows: `use_liger_kernel=True`
    (Liger's Triton kernels) and `deepspeed="ds_config.json"` given to `TrainingArguments` or a
    TRL config (`SFTConfig`...), diffusers' `unet.enable_xformers_memory_efficient_attention()`
    (or `vae.set_use_memory_efficient_attention_xformers(True)`)
    (info under `if is_xformers_available():` with no `else` that raises), and in YAML configs `use_liger_kernel: true`, `deepspeed:
    ds_config.json` in a recipe and `distributed_type: DEEPSPEED` in an accelerate config.

    ## Why is this bad?
    Transformers and accelerate import the package when the setting is on: Liger patches the
    model's layers with Triton kernels, which only GPUs run, and DeepSpeed's engine has no TPU
    or Trainium accelerator. Training stops at start-up on the target, with an ImportError or
    DeepSpeed's "accelerator not supported".

    ## Example
    ```python
    args = SFTConfig(output_dir="out", use_liger_kernel=True, deepspeed="zero3.json")
    ```

    ## Use instead
    ```python
    args = SFTConfig(output_dir="out", fsdp="full_shard")
    ```
    The native modules under torch.compile, and FSDP for sharding, which the target's backend
    runs.

    ## Targets
    The package's severity (packages.toml): an error on tpu and neuron for each; off where the
    package has a backend (DeepSpeed on rocm, xpu, npu, hpu and cpu; Liger on rocm).

    ## Fix safety
    No automatic fix: what replaces the package is a design decision.
    """

    code = "PC708"
    name = "cuda-only-package-setting"
    message = "{what} makes the Hugging Face stack use {package}: {description}"
    hint = "instead: {instead}"
    severity = per_target(ERROR)
    file_kinds = (filekinds.PYTHON, filekinds.CONFIG)
    triggers = (b"liger", b"deepspeed", b"DEEPSPEED", b"enable_xformers", b"attention_xformers")
    cuda_only = True

    VALID = [
        Valid(
            "import torch\nfrom transformers import TrainingArguments\n"
            "args = TrainingArguments('out', use_liger_kernel=False, deepspeed=None)\n"
        ),
        Valid("def configure(torch, TrainingArguments):\n    return Args(use_liger_kernel=True)\n"),
        Valid(
            "import torch as T\nfrom torch import nn\nfrom torch.nn import Linear as L\nimport torch.cuda\n"
            "report(deepspeed='zero3.json')\n"
        ),
        Valid(
            "distributed_type: MULTI_GPU\nuse_liger_kernel: false\ndeepspeed: null\nnote: deepspeed\n",
            path="recipes/sft/config.yaml",
        ),
        Valid(
            "from transformers import TrainingArguments\nargs = TrainingArguments('out', use_liger_kernel=True)\n",
            options={"targets": ["rocm"]},
        ),
    ]
    INVALID = [
        Invalid(  # kohya's sd-scripts: the VAE switched to xformers with no flag
            "import torch\nvae.set_use_memory_efficient_attention_xformers(True)\n"
            "vae.set_use_memory_efficient_attention_xformers(False)\n",
            lines=[2],
        ),
        Invalid(  # AnimateDiff's training script: asked for, and an error without xFormers
            "import torch\nfrom diffusers.utils.import_utils import is_xformers_available\n"
            "if enable_xformers:\n    if is_xformers_available():\n        unet.enable_xformers_memory_efficient_attention()\n"
            "    else:\n        raise ValueError('xformers is not available')\n"
            "if is_xformers_available() and not args.without_xformers:\n    pipe.enable_xformers_memory_efficient_attention()\n",
            lines=[5, 9],
            message="makes the Hugging Face stack use xformers",
        ),
        Invalid(
            "from trl import SFTConfig\nargs = SFTConfig(output_dir='out', use_liger_kernel=True, deepspeed='z3.json')\n",
            lines=[2, 2],
        ),
        Invalid(  # alignment-handbook: a recipe and an accelerate config
            "model_name_or_path: x\nuse_liger_kernel: true\ndeepspeed: configs/zero3.json\n---\n"
            "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n",
            lines=[2, 3, 6],
            path="recipes/smollm3/sft/sft.yaml",
            message="makes the Hugging Face stack use",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        method = patterns.method_name(node)
        if method == _XFORMERS_SWITCH or (method == _XFORMERS_SETTER and not _turned_off(node)):
            shown = f"`{patterns.dotted(node.func) or method}()`"
            self._report(node, _XFORMERS_SWITCH, shown, optional=self._optional_xformers())
            return
        if not takes_training_arguments(self.ctx.qualified_names(node.func), node):
            return
        for arg in node.args:
            keyword = arg.keyword.value if arg.keyword is not None else ""
            if keyword in _LIGER and isinstance(arg.value, cst.Name) and arg.value.value == "True":
                self._report(arg, keyword, f"`{keyword}=True`")
            elif keyword == _DEEPSPEED and not _off(arg.value):
                self._report(arg, keyword, f"`{keyword}=...`")

    def check_text(self, text: str) -> None:
        for setting in configs.settings(text):
            liger = setting.key in _LIGER and setting.is_true
            deepspeed = setting.key == _DEEPSPEED and setting.value.lower() not in _OFF
            if liger or deepspeed or (setting.key == _DEEPSPEED_TYPE and setting.value == "DEEPSPEED"):
                self._report(setting.span, setting.key, f"`{setting.key}: {setting.value}`")

    def _optional_xformers(self) -> bool:
        """Under `if is_xformers_available():` (a test calling something named for xFormers)
        whose `else` does not raise: skipped where xFormers is missing, as on the target."""
        chain = self.ctx.ancestors
        for parent, child in zip(chain, chain[1:]):
            if isinstance(parent, cst.If) and child is parent.body and _asks_for_xformers(parent.test):
                other = parent.orelse
                return other is None or not (isinstance(other, cst.Else) and flow.raises(other.body, None))
        return False

    def _report(self, where: cst.CSTNode | Span, setting: str, what: str, optional: bool = False) -> None:
        package = _package(setting)
        written = package.pip[0] if package.pip else package.key
        description = package.what + (" (optional: only where it is installed)" if optional else "")
        fields = {"what": what, "package": written, "description": description, "instead": package.instead}
        self.record(project.DEPENDENCY, package.key, where, written=written)
        severity = at_most_info(package.severities()) if optional else package.severities()
        self.report_at(where, severity=severity, **fields)


def _off(node: cst.BaseExpression) -> bool:
    """`None`, `False` or an empty string: no DeepSpeed config."""
    if isinstance(node, cst.Name):
        return node.value in ("None", "False")
    return patterns.string_value(node) == ""
