from __future__ import annotations

import libcst as cst

from portcheck import patterns, project
from portcheck.rule import Invalid, Rule, Valid
from portcheck.targets import packages

_FLASH = frozenset({"flash_attention_2", "flash_attention_3"})


def _flash_attn() -> packages.Package:
    return next(p for p in packages.packages() if p.key == "flash_attn")


class HfFlashAttention(Rule):
    """## What it does
    Reports Hugging Face models asked for FlashAttention kernels:
    `attn_implementation="flash_attention_2"` (or `_3`) in `from_pretrained(...)` or a config,
    and the older `use_flash_attention_2=True`.

    ## Why is this bad?
    Transformers then imports `flash_attn`, a CUDA-only package (PC701): on TPU, Trainium, Apple
    and most other targets loading the model fails with an ImportError or a "FlashAttention2
    is not available" error.

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="flash_attention_2")
    ```

    ## Use instead
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="sdpa")
    ```
    PyTorch's scaled_dot_product_attention runs everywhere; on TPU TorchTPU routes it to its
    splash attention kernel.

    ## Targets
    As for the flash_attn package: an error on every target but ROCm, where FlashAttention has
    ROCm builds (a warning).

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC705"
    name = "hf-flash-attention"
    message = "{what} makes transformers load flash_attn, which needs CUDA"
    hint = 'use attn_implementation="sdpa" (PyTorch\'s scaled_dot_product_attention)'
    severity = _flash_attn().severities()
    triggers = (b"flash_attention",)

    VALID = [
        Valid("model = AutoModel.from_pretrained(name, attn_implementation='sdpa')\n"),
        Valid(
            "import torch\nimport torch as T\nfrom torch import nn\nfrom torch.nn import Linear as L\nimport torch.cuda\n"
        ),
        Valid("def load(torch, name):\n    return torch.hub.load(name, use_flash_attention_2=False)\n"),
        Valid("print('flash_attention_2 is faster on CUDA')\n"),
    ]
    INVALID = [
        Invalid(
            "model = AutoModelForCausalLM.from_pretrained(name, attn_implementation='flash_attention_2')\n", lines=[1]
        ),
        Invalid("import torch\nconfig.attn_implementation = 'flash_attention_3'\n", lines=[2]),
        Invalid("m = AutoModel.from_pretrained(name, use_flash_attention_2=True)\n", lines=[1]),
        Invalid(
            "IMPL = 'flash_attention_2'\nm = AutoModel.from_pretrained(name, attn_implementation=IMPL)\n", lines=[1]
        ),
    ]

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is None:
            return
        if node.keyword.value == "attn_implementation":
            self._check(node.value)
        elif node.keyword.value == "use_flash_attention_2" and isinstance(node.value, cst.Name):
            if node.value.value == "True":
                self.record(project.DEPENDENCY, _flash_attn().key, node, written="flash_attn")
                self.report(node, what="`use_flash_attention_2=True`")

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(patterns.target_name(t.target) in ("attn_implementation", "_attn_implementation") for t in node.targets):
            self._check(node.value)

    def _check(self, value: cst.BaseExpression) -> None:
        if isinstance(value, cst.Name):
            value = self.ctx.assigned_value(value) or value
        for literal in patterns.value_literals(value, lambda n: patterns.string_value(n) in _FLASH):
            self.record(project.DEPENDENCY, _flash_attn().key, literal, written="flash_attn")
            self.report(literal, what=f"attn_implementation={patterns.string_value(literal)!r}")
