from __future__ import annotations

import libcst as cst

from portcheck import flow, patterns
from portcheck.rule import FileContext, Invalid, Valid
from portcheck.rules.shapes import SYNC_SEVERITY, StepRule
from portcheck.targets import library_step_hazards
from portcheck.targets.library_step_hazards import StepHazard
from portcheck.walk import descendants


class LibrarySyncInStep(StepRule):
    """## What it does
    Reports, in a step loop, forward() or a method a framework runs every step, a call of
    another package's function, of an instance of its class, or of a method a class inherits
    from it, that reads tensor values back on the host each time it runs (the table
    portcheck/targets/library_step_hazards.toml): BasicSR's `random_add_gaussian_noise_pt`
    and `random_add_poisson_noise_pt`, its `DiffJPEG` and its models' `reduce_loss_dict`,
    which Real-ESRGAN's degradation and training step call; icefall's `make_pad_mask`, which
    VALL-E's forward() calls; the `add_batch` of a Hugging Face `evaluate.load(...)` metric,
    which the accelerate examples call in their evaluation loops with tensors (not with the
    decoded strings nanoT5 gives it).

    ## Why is this bad?
    Nothing in the call says so, but the library compares a tensor in Python or calls
    `.item()` inside: on TorchTPU and torch_xla each such read runs the graph built so far and
    waits for it, every step, and on Trainium it splits the step's graph.

    ## Example
    ```python
    from basicsr.data.degradations import random_add_poisson_noise_pt

    class RealESRGANModel(SRGANModel):
        def feed_data(self, data):
            out = random_add_poisson_noise_pt(out, scale_range=(0.05, 3), gray_prob=0.4)
    ```

    ## Use instead
    Degrade on the host (in the DataLoader's workers), or write the step with tensor ops only
    (`torch.where` on the grey-noise draw instead of a Python `if`); log losses every N steps.

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; info where a sync only costs time
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: the library's code is what would change.
    """

    code = "PC515"
    name = "library-sync-in-step"
    message = "`{call}(...)` in {where} {what}: a host sync every step"
    hint = "run it on the host (in the DataLoader's workers), or with tensor ops that keep the values on the device"
    severity = SYNC_SEVERITY
    triggers = tuple(package.encode() for package in sorted(library_step_hazards.packages()))

    VALID = [
        Valid(  # nanoT5: the metric is given decoded strings, which it reads nothing of on the device
            "import torch\nimport evaluate\ndef evaluate_model(model, loader, tok):\n    metric = evaluate.load('rouge')\n"
            "    for batch in loader:\n        predictions = tok.batch_decode(model.generate(**batch))\n"
            "        metric.add_batch(predictions=predictions, references=batch['text'])\n"
        ),
        # once, outside any step
        Valid(
            "import torch\nfrom basicsr.data.degradations import random_add_gaussian_noise_pt\n"
            "img = random_add_gaussian_noise_pt(torch.rand(1, 3, 8, 8), sigma_range=(1, 30))\n"
        ),
        # the model's own method of that name
        Valid(
            "import torch\nfrom basicsr.models.sr_model import SRModel\nclass M(SRModel):\n"
            "    def reduce_loss_dict(self, d):\n        return d\n"
            "    def optimize_parameters(self, step):\n        self.log_dict = self.reduce_loss_dict({'l': self.l})\n"
        ),
        # `torch` is a parameter here; nothing of the table is called
        Valid(
            "import torch.nn\ndef step(torch, loader):\n    for x in loader:\n"
            "        torch.nn.functional.relu(x).sum().backward()\n"
        ),
    ]
    INVALID = [
        # VALL-E: icefall's mask of the padding, made in forward()
        Invalid(
            "import torch\nfrom icefall.utils import make_pad_mask\n\nclass VALLE(torch.nn.Module):\n"
            "    def forward(self, x, x_lens):\n        x_mask = make_pad_mask(x_lens).to(x.device)\n"
            "        return x.masked_fill(x_mask.unsqueeze(-1), 0.0)\n",
            lines=[6],
            message="`make_pad_mask(...)` in forward()",
        ),
        # Real-ESRGAN: BasicSR's loop runs feed_data() and optimize_parameters() every step
        Invalid(
            "import torch\nfrom basicsr.data.degradations import random_add_gaussian_noise_pt as gauss\n"
            "from basicsr.models.srgan_model import SRGANModel\nfrom basicsr.utils import DiffJPEG\n\n"
            "class RealESRGANModel(SRGANModel):\n    def __init__(self, opt):\n        super().__init__(opt)\n"
            "        self.jpeger = DiffJPEG(differentiable=False).cuda()\n\n    @torch.no_grad()\n"
            "    def feed_data(self, data):\n        out = gauss(data['gt'], sigma_range=(1, 30), gray_prob=0.4)\n"
            "        self.lq = self.jpeger(out, quality=torch.rand(4) * 65 + 30)\n\n"
            "    def optimize_parameters(self, current_iter):\n        loss_dict = {'l_g_pix': self.cri_pix(self.output, self.gt)}\n"
            "        self.log_dict = self.reduce_loss_dict(loss_dict)\n",
            lines=[13, 14, 18],
            message="of a BasicSR model (run every step)",
        ),
        Invalid(
            "import torch as T\nfrom torch import nn\nfrom torch.nn import functional as F\n"
            "from basicsr.utils.diffjpeg import DiffJPEG\njpeger = DiffJPEG(differentiable=False)\n"
            "for x in loader:\n    y = jpeger(F.relu(x), quality=T.rand(4) * 65 + 30)\n    model(y).sum().backward()\n",
            lines=[7],
        ),
        Invalid(  # the accelerate examples' evaluation
            "import torch\nimport evaluate\ndef evaluate_model(model, loader):\n    metric = evaluate.load('glue', 'mrpc')\n"
            "    for batch in loader:\n        predictions = model(**batch).logits.argmax(dim=-1)\n"
            "        predictions, references = accelerator.gather_for_metrics((predictions, batch['labels']))\n"
            "        metric.add_batch(predictions=predictions, references=references)\n"
            "    return metric.compute()\n",
            lines=[8],
        ),
        Invalid(
            "import torch\nimport basicsr.data.degradations as deg\nfor x in loader:\n"
            "    y = deg.random_add_poisson_noise_pt(x.cuda(), scale_range=(0.05, 3))\n    model(y).sum().backward()\n",
            lines=[4],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._imports_a_library = False  # one of the table's packages: only then are its calls asked about

    def visit_Import(self, node: cst.Import) -> None:
        super().visit_Import(node)
        self._imports_a_library |= any(self._of_table(patterns.dotted(alias.name)) for alias in node.names)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        super().visit_ImportFrom(node)
        self._imports_a_library |= node.module is not None and self._of_table(patterns.dotted(node.module))

    def visit_Call(self, node: cst.Call) -> None:
        if not self._imports_a_library:
            return
        hazard = self._hazard(node)
        if hazard is None or (hazard.given_tensors and not self._given_tensor(node)):
            return  # nanoT5's `metric.add_batch(predictions=decode(...))`: strings, read nowhere
        where = self.step_context(self.ctx.ancestors)
        if where is not None:
            self.report_in_step(node, where, call=patterns.dotted(node.func) or "call", what=hazard.what)

    def _given_tensor(self, call: cst.Call) -> bool:
        """Whether a call may give a tensor: an argument that may be one, or a name unpacked
        from a call given tensors (the accelerate examples' `predictions, references =
        accelerator.gather_for_metrics((predictions, batch["labels"]))`, which hands them back
        gathered)."""
        if self._passes_tensor(call):
            return True
        names = {arg.value.value for arg in call.args if type(arg.value) is cst.Name}
        function = flow.enclosing_function(self.ctx.ancestors)
        if not names or function is None:
            return False
        return any(
            self._unpacks_tensors(statement, names)
            for statement in descendants(function.body)
            if type(statement) is cst.Assign and type(statement.value) is cst.Call
        )

    def _unpacks_tensors(self, statement: cst.Assign, names: set[str]) -> bool:
        """`a, b = gather((a, b))`: one of `names` unpacked from a call given tensors (in a tuple too)."""
        unpacked = {
            element.value.value
            for target in statement.targets
            if type(target.target) in (cst.Tuple, cst.List)
            for element in target.target.elements  # type: ignore[attr-defined]
            if type(element.value) is cst.Name
        }
        if not unpacked & names:
            return False
        assert type(statement.value) is cst.Call
        given = [arg.value for arg in statement.value.args if not arg.star]
        items = [
            element.value
            for each in given
            if type(each) in (cst.Tuple, cst.List)
            for element in each.elements  # type: ignore[attr-defined]
        ]
        explicit = self.ctx.resolver.explicit_values if self.ctx.resolver is not None else None
        return any(
            self._may_be_tensor(item)
            or (type(item) is cst.Name and explicit is not None and any(map(self._may_be_tensor, explicit(item))))
            for item in (*given, *items)
        )  # `predictions` is also what `=` gave it before: `outputs.logits.argmax(dim=-1)`

    def _of_table(self, module: str) -> bool:
        """A module of one of the packages the table knows (`basicsr.utils`), installed: in the
        package's own repository the hazards are reported where they are written."""
        return module.split(".")[0] in library_step_hazards.packages() and not self.ctx.project.is_local(module)

    def _hazard(self, call: cst.Call) -> StepHazard | None:
        table = library_step_hazards.table()
        func = call.func
        for name in self.ctx.qualified_names(func):
            if name in table and not _names_class(name):
                return table[name]
        if type(func) is cst.Attribute and type(func.value) is cst.Name:  # `metric.add_batch(...)`
            by_maker = library_step_hazards.made_methods().get(func.attr.value, {})  # the method's name first
            for value in self.ctx.assigned_values(func.value) if by_maker else ():  # `metric = evaluate.load(...)`
                found = next((by_maker[name] for name in self._class_made(value) if name in by_maker), None)
                if found is not None:
                    return found
        if type(func) is cst.Name:
            made = self.ctx.assigned_values(func)
        elif flow.is_self_attribute(func) and self.ctx.flow is not None:
            assert type(func) is cst.Attribute
            made = [value for value, _ in self.ctx.flow.self_attribute_values(func.attr.value)]
            if not made:
                return self._inherited(func.attr.value)
        else:
            return None
        for value in made:  # an instance called: `self.jpeger(out, quality=q)`
            for name in self._class_made(value):
                if name in table:
                    return table[name]
        return None

    def _class_made(self, value: cst.BaseExpression) -> frozenset[str]:
        value = patterns.unchained(value)  # `DiffJPEG(...).cuda()` is still one
        return self.ctx.qualified_names(value.func) if type(value) is cst.Call else frozenset()

    def _inherited(self, method: str) -> StepHazard | None:
        """`self.reduce_loss_dict(...)` in a class that does not define it and derives from one
        of the table's classes."""
        owner = next((node for node in reversed(self.ctx.ancestors) if type(node) is cst.ClassDef), None)
        if owner is None or any(
            type(statement) is cst.FunctionDef and statement.name.value == method for statement in owner.body.body
        ):
            return None
        methods = library_step_hazards.methods()
        for base in owner.bases:
            for name in self.ctx.qualified_names(base.value):
                if f"{name}.{method}" in methods:
                    return methods[f"{name}.{method}"]
        return None


def _names_class(qualified: str) -> bool:
    """A class of the table: its instances are what runs, not its constructor."""
    return qualified.rpartition(".")[2][:1].isupper()
