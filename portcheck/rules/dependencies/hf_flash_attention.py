from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from portcheck import configs, filekinds, patterns, project
from portcheck.findings import FixSafety
from portcheck.rewrites.edits import Edit, string_like
from portcheck.rule import FileContext, Invalid, Span, Valid
from portcheck.setting_rule import SettingValueRule
from portcheck.targets import packages

_SETTING = re.compile(r"^_?attn_impl(ementation)?$")
# Transformers' FlashAttention backends (`flash_attention_2` to `_4`, also behind `paged|`), and
# FlashAttention kernels from the Hub (`kernels-community/flash-attn3`), which TRL counts as the
# same variants (trl/trainer/sft_trainer.py FLASH_ATTENTION_VARIANTS).
_NATIVE = re.compile(r"^(paged\|)?flash_attention_\d$")
_HUB = re.compile(r"^[\w.-]+/[\w.-]*flash[-_]?attn[\w.-]*(:\w+)?$")
_FIELDS = frozenset({"dataclasses.field"})


def _flash_attn() -> packages.Package:
    return packages.by_key("flash_attn")


def _is_flash(node: cst.CSTNode) -> bool:
    value = patterns.string_value(node)
    return value is not None and (_NATIVE.match(value) is not None or _HUB.match(value) is not None)


class HfFlashAttention(SettingValueRule):
    """## What it does
    Reports Hugging Face models asked for FlashAttention kernels: `"flash_attention_2"` (`_3`,
    `_4`, `"paged|flash_attention_2"`) or a Hub kernel such as `"kernels-community/flash-attn3"`
    as the attention implementation, and the older `use_flash_attention_2=True`. The setting is
    found wherever it is written: `from_pretrained(...)`, `AutoConfig.from_pretrained(...)`,
    `model_kwargs=dict(...)`, `model_kwargs["attn_implementation"] = ...`,
    `config.attn_implementation = ...`, `model.set_attn_implementation(...)`, a dataclass field
    or parameter default, an argparse default, and through a name bound once; also in YAML
    configs (`attn_implementation: flash_attention_2` in a TRL recipe), which are not fixed.

    ## Why is this bad?
    Transformers then imports `flash_attn` (PC701) or downloads a kernel built for CUDA: on
    TPU, Trainium, Apple and most other targets loading the model fails with an ImportError or
    a "FlashAttention2 is not available" error.

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
    ROCm builds (a warning). Chosen only under a CUDA check (`"flash_attention_2" if
    torch.cuda.is_available() else "sdpa"`) it is info: the check is the finding.

    ## Fix safety
    Unsafe (needs `--unsafe-fixes`): a Transformers backend written in the setting itself
    becomes `"sdpa"` (`"paged|sdpa"`), and `use_flash_attention_2=True` becomes
    `attn_implementation="sdpa"`. SDPA computes the same attention, with other rounding, but
    training that packs several samples into one sequence without padding (TRL's
    `padding_free=True`, packing) relies on FlashAttention's variable-length kernels to keep
    them apart: under SDPA they can attend to each other. Not fixed: a Hub kernel (it may
    bring other functions), and a value bound to a name other code may compare.
    """

    code = "PC705"
    name = "hf-flash-attention"
    message = "{what} makes transformers load {kernel}, which needs CUDA"
    hint = 'use attn_implementation="sdpa" (PyTorch\'s scaled_dot_product_attention)'
    severity = _flash_attn().severities()
    fix_safety = FixSafety.UNSAFE
    triggers = (b"flash_attention", b"flash-attn", b"flash_attn")
    file_kinds = (filekinds.PYTHON, filekinds.CONFIG)
    cuda_only = True

    VALID = [
        Valid("model = AutoModel.from_pretrained(name, attn_implementation='sdpa')\n"),
        Valid(
            "import torch\nimport torch as T\nfrom torch import nn\nfrom torch.nn import Linear as L\nimport torch.cuda\n"
        ),
        Valid("def load(torch, name):\n    return torch.hub.load(name, use_flash_attention_2=False)\n"),
        Valid("print('flash_attention_2 is faster on CUDA')\nif impl == 'flash_attention_2':\n    pass\n"),
        Valid(
            "import argparse\np = argparse.ArgumentParser()\n"
            'p.add_argument("--attn_implementation", choices=["sdpa", "flash_attention_2"], default="sdpa")\n'
        ),
        Valid(  # a recipe that asks for SDPA, and a note that names the kernel
            "model_name_or_path: x\nattn_implementation: sdpa\nnote: 'flash_attention_2 needs CUDA'\n"
            "use_flash_attention_2: false\n",
            path="recipes/sft/config.yaml",
        ),
        Valid(  # a template is not YAML: no settings, no finding
            "attn_implementation: {% if cuda %}flash_attention_2{% endif %}\n", path="templates/recipe.yaml"
        ),
    ]
    INVALID = [
        Invalid(
            "model = AutoModelForCausalLM.from_pretrained(name, attn_implementation='flash_attention_2')\n",
            lines=[1],
            unsafe=True,
            fixed="model = AutoModelForCausalLM.from_pretrained(name, attn_implementation='sdpa')\n",
        ),
        # may change what packed sequences attend to: nothing without --unsafe-fixes
        Invalid("model = AutoModelForCausalLM.from_pretrained(name, attn_implementation='flash_attention_2')\n"),
        Invalid(
            "import torch\nconfig.attn_implementation = 'flash_attention_3'\n",
            lines=[2],
            unsafe=True,
            fixed="import torch\nconfig.attn_implementation = 'sdpa'\n",
        ),
        Invalid(
            "m = AutoModel.from_pretrained(name, use_flash_attention_2=True)\n",
            lines=[1],
            unsafe=True,
            fixed='m = AutoModel.from_pretrained(name, attn_implementation="sdpa")\n',
        ),
        # behind a name other code may compare: reported, not rewritten
        Invalid(
            "IMPL = 'flash_attention_2'\nm = AutoModel.from_pretrained(name, attn_implementation=IMPL)\n",
            lines=[1],
            unsafe=True,
        ),
        Invalid(
            "from transformers import AutoConfig as Cfg, pipeline\n"
            'cfg = Cfg.from_pretrained("x", attn_implementation="flash_attention_2")\n'
            'p = pipeline("text-generation", model="x", model_kwargs=dict(attn_implementation="flash_attention_2"))\n',
            lines=[2, 3],
            message="flash_attn",
        ),
        # PEFT's sft example, TRL's Hub kernels, a dataclass default, the v5 setter
        Invalid(
            "from dataclasses import dataclass, field\nimport transformers\n\n@dataclass\nclass ModelArguments:\n"
            '    attn_implementation: str = field(default="paged|flash_attention_2")\n\n'
            'model_kwargs = {"dtype": "auto"}\nif args.use_flash_attn:\n'
            '    model_kwargs["attn_implementation"] = "flash_attention_2"\n'
            'model = transformers.AutoModel.from_pretrained("x", attn_implementation="kernels-community/flash-attn3")\n'
            'model.set_attn_implementation("flash_attention_4")\n',
            lines=[6, 10, 11, 12],
            unsafe=True,
            fixed="from dataclasses import dataclass, field\nimport transformers\n\n@dataclass\nclass ModelArguments:\n"
            '    attn_implementation: str = field(default="paged|sdpa")\n\n'
            'model_kwargs = {"dtype": "auto"}\nif args.use_flash_attn:\n'
            '    model_kwargs["attn_implementation"] = "sdpa"\n'
            'model = transformers.AutoModel.from_pretrained("x", attn_implementation="kernels-community/flash-attn3")\n'
            'model.set_attn_implementation("sdpa")\n',
        ),
        Invalid(
            "import argparse\nfrom torch.nn import functional as F\n\ndef load(name, attn_impl: str = 'flash_attention_2'):\n"
            "    return name\n\np = argparse.ArgumentParser()\n"
            'p.add_argument("--attn-implementation", default="flash_attention_2")\n',
            lines=[4, 8],
            message="attn_implementation='flash_attention_2'",
        ),
        Invalid(  # alignment-handbook's TRL recipes
            "model_name_or_path: HuggingFaceTB/SmolLM2-1.7B\ntorch_dtype: bfloat16\n"
            "attn_implementation: flash_attention_2\nmodel:\n  use_flash_attention_2: true\n",
            lines=[3, 5],
            path="recipes/smollm2/sft/config.yaml",
            message="makes transformers load flash_attn",
        ),
        Invalid(
            "from torch.cuda import is_available as has_cuda\n"
            'impl = "flash_attention_2" if has_cuda() else "sdpa"\nm = AutoModel.from_pretrained("x", attn_implementation=impl)\n',
            lines=[2],
            message="reached only under a CUDA check",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._direct: set[int] = set()  # literals written in the setting itself, not behind a name

    def names_setting(self, name: str) -> bool:
        return _SETTING.match(name) is not None

    def literals(self, expression: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """FlashAttention names an expression can be, also as a dataclass field's default."""
        if isinstance(expression, cst.Call) and self.ctx.qualified_names(expression.func) & _FIELDS:
            default = patterns.keyword(expression, "default")
            if default is not None:
                yield from self.literals(default.value)
            return
        yield from patterns.value_literals(expression, _is_flash)

    def positional_setting(self, call: cst.Call, names: frozenset[str]) -> cst.Arg | None:
        """`model.set_attn_implementation("flash_attention_2")` (transformers v5)."""
        return patterns.positional(call, 0) if patterns.method_name(call) == "set_attn_implementation" else None

    def check(self, expression: cst.BaseExpression) -> None:
        self._direct.update(id(literal) for literal in self.literals(expression))
        super().check(expression)

    def report_literal(self, literal: cst.CSTNode) -> None:
        value = patterns.string_value(literal) or ""
        native = _NATIVE.match(value) is not None
        edit = self._edit(literal, value) if native and id(literal) in self._direct else None
        self._report(literal, f"attn_implementation={value!r}", "flash_attn" if native else "a Hub kernel", edit)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is None or node.keyword.value != "use_flash_attention_2":
            return
        if isinstance(node.value, cst.Name) and node.value.value == "True":
            fixed = node.with_changes(keyword=cst.Name("attn_implementation"), value=cst.SimpleString('"sdpa"'))
            edit = Edit(node, fixed, FixSafety.UNSAFE, 'use_flash_attention_2=True -> attn_implementation="sdpa"')
            self._report(node, "`use_flash_attention_2=True`", "flash_attn", edit)

    def check_text(self, text: str) -> None:
        for setting in configs.settings(text):
            native = _NATIVE.match(setting.value) is not None
            if self.names_setting(setting.key) and (native or _HUB.match(setting.value)):
                kernel = "flash_attn" if native else "a Hub kernel"
                self._report(setting.span, f"`{setting.key}: {setting.value}`", kernel, None)
            elif setting.key == "use_flash_attention_2" and setting.is_true:
                self._report(setting.span, f"`{setting.key}: {setting.value}`", "flash_attn", None)

    def _report(self, where: cst.CSTNode | Span, what: str, kernel: str, edit: Edit | None) -> None:
        self.record(project.DEPENDENCY, _flash_attn().key, where, written="flash_attn")
        if isinstance(where, cst.CSTNode):
            self.report(where, what=what, kernel=kernel, edit=edit)
        else:
            self.report_span(where, what=what, kernel=kernel)  # configs are not fixed

    def _edit(self, literal: cst.CSTNode, value: str) -> Edit:
        sdpa = value.replace(value.rpartition("|")[2], "sdpa")
        return Edit(literal, string_like(literal, sdpa), FixSafety.UNSAFE, f"{value!r} -> {sdpa!r}")
