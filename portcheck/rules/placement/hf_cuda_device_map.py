from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety, Severity
from portcheck.rewrites import placement
from portcheck.rewrites.edits import Edit, Spelling, with_parentheses_of
from portcheck.rule import ERROR, OFF, WARNING, FileContext, Invalid, Valid
from portcheck.rules.placement.cuda_device_string import describe
from portcheck.setting_rule import SettingValueRule

_DEVICE_MAP = re.compile(r"(^|_)device_map$", re.IGNORECASE)
_PIPELINE_FUNCTIONS = frozenset({"transformers.pipeline", "transformers.pipelines.pipeline"})
# The device types transformers' Pipeline turns an int `device` into (pipelines/base.py: mlu,
# musa, cuda, npu, hpu, xpu, mps); anywhere else recent releases fall back to the CPU and
# older ones raise.
_PIPELINE_INDEX_TYPES = frozenset({"cuda", "npu", "hpu", "xpu", "mps"})

# A "cuda" string raises without CUDA. A bare index in a device_map reaches torch, which reads
# it as an index of the current accelerator (torch >= 2.8 docs; `deviceFromLong`): it raises
# where torch.accelerator has none, as on a CPU-only host or under torch_xla.
_CUDA_STRING = {name: OFF if t.keeps_cuda_api else ERROR for name, t in target_data.all_targets().items()}
_MAP_INDEX = {name: OFF if t.accelerator_api else ERROR for name, t in target_data.all_targets().items()}
_PIPELINE_INDEX = {
    name: OFF if t.device_type in _PIPELINE_INDEX_TYPES else WARNING if t.device_type == "cpu" else ERROR
    for name, t in target_data.all_targets().items()
}


def is_hf_pipeline(names: frozenset[str]) -> bool:
    """`transformers.pipeline(...)` or one of transformers' `...Pipeline` classes."""
    return any(
        name in _PIPELINE_FUNCTIONS or (name.startswith("transformers.") and name.endswith("Pipeline"))
        for name in names
    )


def _is_index(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Integer)


def _is_placement(node: cst.CSTNode) -> bool:
    return _is_index(node) or patterns.is_cuda_device_literal(node)


class HfCudaDeviceMap(SettingValueRule):
    """## What it does
    Reports CUDA placements in Hugging Face loading calls: `"cuda"`, `"cuda:N"` and bare
    indices as values of a `device_map` dict (`{"": 0}`, `{"": "cuda:1"}`), a bare index as the
    whole `device_map=0`, and an int `device=` of `transformers.pipeline(...)` or a transformers
    `...Pipeline` class. A `device_map` is found as a keyword, a parameter default, a
    variable, attribute or dict key named `device_map`, and through a name bound once.

    ## Why is this bad?
    A `"cuda"` value raises without CUDA. An int is not a device but an index whose device
    type someone else guesses: transformers' pipeline maps it to CUDA, NPU, HPU, XPU or MPS
    and otherwise silently runs on the CPU (older releases raise), so on TPU, Trainium and
    XLA the model never reaches the chip. In a device_map the index reaches torch, which
    takes it as an index of the current accelerator and raises where there is none (a CPU
    host; torch_xla is not a torch.accelerator).

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, device_map={"": 0})
    classifier = pipeline("text-classification", device=0)
    ```

    ## Use instead
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, device_map={"": device})
    classifier = pipeline("text-classification", device=device)
    ```
    with one device chosen once, e.g. `torch.accelerator.current_accelerator()`.

    ## Targets
    A "cuda" value is an error everywhere but ROCm. An index in a device_map is an error on
    xla and cpu, whose device torch.accelerator does not know. A pipeline index is an error on
    tpu, neuron and xla, a warning on cpu, and off where transformers maps it (rocm, xpu, npu,
    hpu, mps). `device_map="auto"` is left alone, and a top-level `device_map="cuda"` is
    cuda-device-string's (PC101).

    ## Fix safety
    Safe: a `"cuda"` / `"cuda:N"` value becomes the target's device as cuda-device-string
    writes it (`{"": "tpu"}`, `{"": "xpu:1"}`). An index, where it is reported, becomes the
    device it means there: `{"": 0}` -> `{"": "cpu"}` on cpu, `pipeline(device=0)` ->
    `device="tpu"` (transformers' pipeline and device maps take a device string). With
    `--device auto` it is the type of the module's device binding (`DEVICE.type`, a string,
    since Hugging Face compares device-map values with `"cpu"` and `"disk"`); an index is
    kept only where there is an accelerator (`f"{DEVICE.type}:0" if DEVICE.type != "cpu" else
    "cpu"`), because on a host with none it would read `"cpu:0"`, which those comparisons miss.

    Not fixed: an int reached through a name bound elsewhere (`GPU = 1` ...
    `pipeline(device=GPU)`), which other code may use as a number.
    """

    code = "PC106"
    name = "hf-cuda-device-map"
    message = "{subject} {problem}"
    hint = "{advice}"
    severity = {
        name: max(_CUDA_STRING[name], _MAP_INDEX[name], _PIPELINE_INDEX[name]) for name in target_data.TARGET_ORDER
    }
    fix_safety = FixSafety.SAFE
    triggers = (b"device_map", b"pipeline", b"Pipeline")

    VALID = [
        Valid('from transformers import AutoModel\nmodel = AutoModel.from_pretrained("bert", device_map="auto")\n'),
        Valid('from transformers import pipeline\nclf = pipeline("text-classification", device=-1)\n'),
        Valid('import torch\nfrom transformers import pipeline\nclf = pipeline("ner", device=torch.device("cpu"))\n'),
        Valid(
            "from diffusers import DiffusionPipeline\n"
            'pipe = DiffusionPipeline.from_pretrained("sd", device_map="balanced")\n'
        ),
        Valid('import torch\nm = AutoModel.from_pretrained("x", device_map={"": "cpu", "lm_head": "disk"})\n'),
        Valid("def load(torch, pipeline):\n    return pipeline('ner', device=0)\n"),
        Valid("import torch\nx = torch.zeros(3).to(0)\nmax_memory = {0: '10GiB', 'cpu': '30GiB'}\n"),
        Valid(
            'from transformers import AutoModel\nm = AutoModel.from_pretrained("x", device_map={"": 0})\n',
            options={"targets": ["tpu", "neuron", "rocm"]},
        ),
        Valid(
            'from transformers import pipeline\nclf = pipeline("ner", device=0)\n',
            options={"targets": ["xpu", "npu", "mps"]},
        ),
    ]
    INVALID = [
        Invalid(
            'import torch\nm = AutoModel.from_pretrained("x", device_map={"": 0})\n',
            lines=[2],
            message="device_map",
            device="cpu",
            fixed='import torch\nm = AutoModel.from_pretrained("x", device_map={"": "cpu"})\n',
        ),
        Invalid(
            'import torch as T\nm = load("x", torch_dtype=T.bfloat16, device_map={"": "cuda:1"})\n',
            lines=[2],
            fixed='import torch as T\nm = load("x", torch_dtype=T.bfloat16, device_map={"": "tpu"})\n',
        ),
        Invalid(
            'import torch as T\nm = load("x", torch_dtype=T.bfloat16, device_map={"": "cuda:1"})\n',
            lines=[2],
            device="xpu",
            fixed='import torch as T\nm = load("x", torch_dtype=T.bfloat16, device_map={"": "xpu:1"})\n',
        ),
        Invalid(
            "from transformers import pipeline\nfrom torch import cuda\n"
            'clf = pipeline("ner", device=0 if cuda.is_available() else -1)\n',
            lines=[3],
            message="pipeline(device=0)",
            fixed="from transformers import pipeline\nfrom torch import cuda\n"
            'clf = pipeline("ner", device="tpu" if cuda.is_available() else -1)\n',
        ),
        # The int is bound to a name other code may use as a number: reported, not rewritten.
        Invalid(
            "import transformers\nimport torch.cuda\nGPU = 1\n"
            "clf = transformers.TextClassificationPipeline(model=m, device=GPU)\n",
            lines=[3],
        ),
        Invalid(
            'from torch.cuda import is_available as has_cuda\ndevice_map = {"": "cuda"} if has_cuda() else "cpu"\n'
            "model = Model.from_pretrained('x', device_map=device_map)\n",
            lines=[2],
            device="auto",
            fixed="from torch.cuda import is_available as has_cuda\nimport torch\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            'device_map = {"": DEVICE.type} if has_cuda() else "cpu"\n'
            "model = Model.from_pretrained('x', device_map=device_map)\n",
        ),
        Invalid(
            'class Loader:\n    def __init__(self):\n        self.device_map = {"encoder": 0, "decoder": 1}\n',
            lines=[3, 3],
            device="xla",
            fixed='class Loader:\n    def __init__(self):\n        self.device_map = {"encoder": "xla", "decoder": "xla"}\n',
        ),
        Invalid(
            "def load(name, device_map=0):\n    return Model.from_pretrained(name, device_map=device_map)\n",
            lines=[1],
            device="cpu",
            fixed='def load(name, device_map="cpu"):\n    return Model.from_pretrained(name, device_map=device_map)\n',
        ),
        Invalid(
            'from transformers import pipeline as make\nclf = make("ner", device=0)\n',
            options={"targets": ["cpu"]},
            device="cpu",
            fixed='from transformers import pipeline as make\nclf = make("ner", device="cpu")\n',
        ),
        Invalid(
            'from transformers import pipeline\nclf = pipeline("ner", device=1)\n',
            lines=[2],
            device="neuron",
            fixed='from transformers import pipeline\nclf = pipeline("ner", device="neuron:1")\n',
        ),
        # auto: the index where there is an accelerator ("cpu:0" is not "cpu" to Hugging Face).
        Invalid(
            'import torch\nm = AutoModel.from_pretrained("x", device_map={"": 0})\n',
            lines=[2],
            device="auto",
            fixed="import torch\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            'm = AutoModel.from_pretrained("x", device_map={"": f"{DEVICE.type}:0" if DEVICE.type != "cpu" else "cpu"})\n',
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._indexes: set[int] = set()
        self._direct: set[int] = set()  # literals written in the setting itself, not behind a name

    def names_setting(self, name: str) -> bool:
        return _DEVICE_MAP.search(name) is not None

    def literals(self, expression: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Placements inside a device_map: dict values and a top-level index. A top-level
        "cuda" string is left to cuda-device-string (PC101), which matches `device_map`."""
        if isinstance(expression, cst.Dict):
            for element in expression.elements:
                if isinstance(element, cst.DictElement) and not _keyed_as_device(element):
                    yield from patterns.value_literals(element.value, _is_placement)
        elif isinstance(expression, cst.IfExp):
            yield from self.literals(expression.body)
            yield from self.literals(expression.orelse)
        elif isinstance(expression, cst.BooleanOperation):
            yield from self.literals(expression.left)
            yield from self.literals(expression.right)
        elif _is_index(expression):
            yield expression

    def check(self, expression: cst.BaseExpression) -> None:
        self._direct.update(id(literal) for literal in self.literals(expression))
        super().check(expression)

    def report_literal(self, literal: cst.CSTNode) -> None:
        direct = id(literal) in self._direct
        if isinstance(literal, cst.Integer):
            self._report(
                literal,
                _MAP_INDEX,
                f"device index {literal.value} in a device_map",
                "is read by torch as an index of the current accelerator, which {targets} lack: it raises",
                'name the device instead: device_map={{"": {devices}}}',
                self._index_edit(literal, direct),
            )
        else:
            self._report(
                literal,
                _CUDA_STRING,
                f"{describe(literal)} in a device_map",
                "places the weights on a CUDA device",
                'map to the target\'s device: device_map={{"": {devices}}}, or one device chosen once',
                self._edit(literal, placement.device_spelling(self.ctx, literal, index_on_cpu=False)),
            )

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        device = patterns.keyword(node, "device")
        if device is None or not is_hf_pipeline(self.ctx.qualified_names(node.func)):
            return
        expression = device.value
        direct = True
        if isinstance(expression, cst.Name):
            expression, direct = self.ctx.assigned_value(expression) or expression, False
        for index in patterns.value_literals(expression, _is_index):
            if isinstance(index, cst.Integer) and id(index) not in self._indexes:
                self._indexes.add(id(index))
                self._report(
                    index,
                    _PIPELINE_INDEX,
                    f"pipeline(device={index.value})",
                    "is a GPU index: transformers maps it to CUDA, NPU, HPU, XPU or MPS only, "
                    "so on {targets} it runs on the CPU",
                    "pass the device itself: device={devices} (or a torch.device); device=-1 is the CPU",
                    self._index_edit(index, direct),
                )

    def _report(
        self,
        node: cst.CSTNode,
        severity: dict[str, Severity],
        subject: str,
        problem: str,
        advice: str,
        edit: Edit | None = None,
    ) -> None:
        affected = [t for t in self.ctx.targets if severity[t] > OFF]
        devices = " / ".join(dict.fromkeys(f'"{target_data.get(t).device_type}"' for t in affected)) or '"cpu"'
        where = "/".join(affected) or "the selected targets"
        problem, advice = problem.format(targets=where), advice.format(devices=devices)
        self.report(node, severity=severity, subject=subject, problem=problem, advice=advice, edit=edit)

    def _index_edit(self, index: cst.Integer, direct: bool) -> Edit | None:
        """The device an index means on the target, where it is written in the setting itself
        (behind a name, the int may serve elsewhere as a number)."""
        if not direct:
            return None
        literal = placement.cuda_literal(int(index.evaluated_value))
        spelled = placement.device_spelling(self.ctx, literal, index_on_cpu=False)
        if spelled is not None:
            spelling, safety = spelled
            spelled = Spelling(with_parentheses_of(index, spelling.node), spelling.imports, spelling.prelude), safety
        return self._edit(index, spelled)

    def _edit(self, original: cst.CSTNode, spelled: tuple[Spelling, FixSafety] | None) -> Edit | None:
        """Device strings throughout (`DEVICE.type` under auto, not `DEVICE`): Hugging Face
        compares device-map values with "cpu" and "disk", which a torch.device never equals."""
        if spelled is None:
            return None
        spelling, safety = spelled
        where = cst.Module([]).code_for_node(spelling.node)
        return spelling.edit(original, safety, f"device placement -> {where}")


def _keyed_as_device(element: cst.DictElement) -> bool:
    """A key named like a device (`{"device": "cuda"}`) is cuda-device-string's (PC101)."""
    key = patterns.string_value(element.key)
    return key is not None and patterns.is_device_name(key)
