from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.flow import in_forward, is_number, reads
from portcheck.rule import Invalid, Valid
from portcheck.rules.shapes import (
    RECOMPILE_SEVERITY,
    TensorRule,
    advice,
    argument_for,
    builtin_call,
    index_select,
    innermost_loop,
    shape_kept,
)
from portcheck.walk import child_fields, descendants

# Concatenations that take the sequence of tensors as their first argument (`tensors=`).
_GROWERS = frozenset(
    f"torch.{name}"
    for name in ("cat", "concat", "concatenate", "hstack", "vstack", "row_stack", "column_stack", "dstack")
)
_PAD = "torch.nn.functional.pad"
_TENSOR_MAKERS = frozenset(
    f"torch.{name}" for name in ("tensor", "as_tensor", "LongTensor", "IntTensor", "FloatTensor", "BoolTensor")
)
_DATA = (cst.Name, cst.Attribute, cst.List, cst.Tuple)  # what a tensor may be made of here
_METADATA = frozenset({"shape", "size", "dim", "ndim", "ndimension", "numel", "dtype", "device"})
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_NESTED = (*_SCOPES, cst.BaseComp)


class SequenceGrownInLoop(TensorRule):
    """## What it does
    Reports a tensor that a step loop (training, evaluation, decoding: see PC503) grows by
    concatenating onto itself and reads again: `idx = torch.cat((idx, idx_next), dim=1)` in a
    loop that also feeds `idx` to the model or slices it. `torch.concat`, `torch.concatenate`,
    `torch.hstack`, `torch.vstack`, `torch.row_stack`, `torch.column_stack` and
    `torch.dstack` grow it too, and so does padding it by numbers (`mask = F.pad(mask, (0,
    1))`, GPT-SoVITS's attention mask), and a Python list the loop appends to and makes a
    tensor of (`torch.as_tensor([output_ids])` with `output_ids.append(token)`). Attributes
    count (`self.tokens = torch.cat([self.tokens, t])`), as do a tensor reordered by an index
    first (beam search's `torch.cat((history[beam_idx], nxt), 1)`), shape-keeping methods on
    the result (`torch.cat(...).detach()`), rows picked from it (`y = torch.index_select(y,
    0, kept)`) and a first value bound under `if x is None:` or on the loop's first pass (`if
    idx == 0:`). The
    concatenation must be in the body of the step loop itself, outside `forward` and outside
    `if step % N == 0:`, or in a function of the module that the loop hands the tensor to and
    takes it back from (whisper's `tokens, completed = self.decoder.update(tokens, logits)`,
    whose greedy decoder returns `torch.cat([tokens, next_tokens[:, None]], dim=-1)`; for a
    method of an instance, where one of the classes it may be of grows it).

    A tensor that the loop only accumulates (`all_preds = torch.cat([all_preds, preds])`,
    read after the loop; identity tests like `if x is None:` and its size, `x.shape` or
    `len(x)`, do not count as reads), a tensor the loop also binds otherwise (made afresh
    every step, `x = add_noise(...)` before `x = torch.cat([x, x], 1)`, or trimmed,
    `x = x[:, -window:]`), sliding windows that drop as much as they add
    (`torch.cat([x[:, 1:], new], 1)`) and concatenations in an inner loop that starts over
    every step (DenseNet's `for layer in layers:`) are left alone.

    ## Why is this bad?
    The tensor has a new length at every step, and so does everything computed from it.
    `torch.compile` with `dynamic=False` (TorchTPU's and TorchNeuron's default; both reject
    `dynamic=True`) recompiles the step for each length until it reaches the recompile limit
    and falls back to eager; torch_xla traces and compiles a new graph per length, and
    Trainium's compiler needs every shape known ahead of time (NCC_EMOD025), so eager Neuron
    compiles each op again per length. This is the generation loop of nanoGPT, minGPT and
    llama2.c.

    ## Example
    ```python
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])
        idx_next = torch.multinomial(F.softmax(logits[:, -1, :], dim=-1), num_samples=1)
        idx = torch.cat((idx, idx_next), dim=1)
    ```

    ## Use instead
    ```python
    out = torch.full((batch, max_len), pad_id, device=device)  # the full length, once
    out[:, :prompt_len] = idx
    pos = torch.tensor([prompt_len], device=device)  # a tensor, not a Python int: one graph
    for _ in range(max_new_tokens):
        logits = model(out, attention_mask=torch.arange(max_len, device=device) < pos)
        probs = F.softmax(logits.index_select(1, pos - 1).squeeze(1), dim=-1)
        out.index_copy_(1, pos, torch.multinomial(probs, num_samples=1))
        pos += 1
    ```
    With a KV cache, use a static one (Hugging Face: `cache_implementation="static"`). To
    collect results, append to a list and concatenate once after the loop.

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: the full length and how the model reads a fixed-size window (a mask, a
    static KV cache) depend on the model.
    """

    code = "PC509"
    name = "sequence-grown-in-loop"
    message = (
        "`{name}` grows by {function} every step of {loop} and is read again: each step has a new shape,"
        " so a compiled step recompiles per length"
    )
    hint = (
        "preallocate the full length and write each step in place (out.index_copy_(1, pos, nxt) at a position"
        " tensor), feeding the model the fixed-size buffer with a mask or a static KV cache{advice}"
    )
    severity = RECOMPILE_SEVERITY
    triggers = (b"cat", b"stack", b"pad", b"append", b"extend")

    VALID = [
        # the recommended form: collect in a list, concatenate once after the loop
        Valid(
            "import torch\nouts = []\nfor _ in range(max_new_tokens):\n    logits = model(x)\n"
            "    nxt = torch.multinomial(logits.softmax(-1), 1)\n    outs.append(nxt)\nout = torch.cat(outs, dim=1)\n"
        ),
        # only accumulated, read after the loop: the model's inputs keep their shape. The
        # concatenation itself still compiles per length where each op compiles (eager
        # torch_xla and Neuron), but the rule keeps to tensors fed back, for precision.
        Valid(
            "import torch\nall_preds = None\nfor x, y in val_loader:\n    preds = model(x).argmax(-1)\n"
            "    if all_preds is None:\n        all_preds = preds\n    else:\n"
            "        all_preds = torch.cat([all_preds, preds])\n    pbar.set_postfix(n=len(all_preds), shape=all_preds.shape)\n"
            "acc = (all_preds == labels).float().mean()\n"
        ),
        # DenseNet: the loop runs inside forward and repeats the same shapes at every call
        Valid(
            "import torch as T\nclass Block(T.nn.Module):\n    def forward(self, x):\n"
            "        for layer in self.layers:\n            out = layer.module(x)\n            x = T.cat([x, out], 1)\n"
            "        return x\n"
        ),
        # an inner loop that starts over every step: the same shapes each time
        Valid(
            "import torch\nfor batch in loader:\n    feats = batch\n    for blk in blocks:\n"
            "        feats = torch.cat([feats, blk(feats)], 1)\n    loss = model(feats)\n"
        ),
        # made afresh every step before it is doubled (diffusers' DreamBooth), or trimmed to
        # a window: the length stays bounded
        Valid(
            "import torch\nfor step, batch in enumerate(train_dataloader):\n"
            "    noisy = scheduler.add_noise(latents, noise, t)\n    if cfg:\n"
            "        noisy = torch.cat([noisy, noisy], dim=1)\n    pred = unet(noisy, t)\n    loss.backward()\n"
        ),
        Valid(
            "import torch\nfor _ in range(n):\n    nxt = torch.multinomial(model(ctx), 1)\n"
            "    ctx = torch.cat([ctx, nxt], 1)\n    ctx, state = ctx[:, -window:], None\n"
        ),
        # a window padded afresh every step, and padding that trims: the length stays
        Valid(
            "import torch.nn.functional as F\nfor i in range(n):\n    frame = F.pad(audio[i], (0, 1))\n"
            "    frame = model(frame)\n    state = F.pad(state, (0, -1))\n    out = model(state)\n"
        ),
        # a list appended to, made a tensor once after the loop; a list started over every step
        Valid(
            "import torch\nids = []\nfor i in range(n):\n    ids.append(int(model(x).argmax()))\n"
            "out = torch.tensor(ids)\nfor step in range(n):\n    window = []\n"
            "    window.append(int(model(x).argmax()))\n    x = torch.tensor(window)\n"
        ),
        # every N steps: the periodic path is not the step
        Valid(
            "import torch\nfor step, batch in enumerate(train_loader):\n    loss = model(batch)\n"
            "    if step % 100 == 0:\n        history = torch.cat([history, loss[None]])\n        plot(history)\n"
        ),
        # NumPy arrays are not traced
        Valid(
            "import numpy as np\nimport torch\nfor _ in range(n):\n    nxt = torch.multinomial(p, 1)\n"
            "    ids = np.concatenate([ids, nxt.numpy()])\n    p = model(ids)\n"
        ),
        # a sliding window drops as much as it adds; `y` is not grown onto itself
        Valid(
            "from torch import cat\nfor t in range(steps):\n    action = policy_net(state).argmax(-1)\n"
            "    state = cat([state[:, 1:], env_step(action)], 1)\n    y = cat([a, b])\n    z = model(y)\n"
        ),
        # `torch` is a parameter here, and `cat` a local function
        Valid(
            "import torch.nn as nn\ndef generate(torch, model, idx):\n    for _ in range(8):\n"
            "        nxt = torch.multinomial(model(idx), 1)\n        idx = torch.cat((idx, nxt), 1)\n    return idx\n"
        ),
        Valid(
            "import torch\ndef cat(xs, dim):\n    return xs\nfor _ in range(8):\n"
            "    nxt = torch.multinomial(model(idx), 1)\n    idx = cat((idx, nxt), 1)\n"
        ),
        # a helper that returns a new tensor, not the one it is given grown
        Valid(
            "import torch\ndef step(tokens, logits):\n    nxt = logits.argmax(-1)\n"
            "    joined = torch.cat([tokens, nxt[:, None]], -1)\n    return tokens, joined\n"
            "for _ in range(8):\n    tokens, seq = step(tokens, model(tokens))\n"
        ),
        # not a step loop
        Valid("import torch\nfor i in range(3):\n    x = torch.cat([x, x.flip(0)])\n    y = x.sum()\n"),
        # shapes may change freely there
        Valid(
            "import torch\nfor _ in range(8):\n    nxt = torch.multinomial(model(idx), 1)\n    idx = torch.cat((idx, nxt), 1)\n",
            options={"targets": ["cpu", "mps", "rocm"]},
        ),
    ]
    INVALID = [
        # nanoGPT's generate
        Invalid(
            "import torch\nfrom torch.nn import functional as F\nclass GPT(torch.nn.Module):\n"
            "    def generate(self, idx, max_new_tokens):\n        for _ in range(max_new_tokens):\n"
            "            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]\n"
            "            logits, _ = self(idx_cond)\n"
            "            idx_next = torch.multinomial(F.softmax(logits[:, -1, :], dim=-1), num_samples=1)\n"
            "            idx = torch.cat((idx, idx_next), dim=1)\n        return idx\n",
            lines=[9],
            message="`idx` grows by `torch.cat` every step of a decoding loop",
        ),
        Invalid(
            "import torch as T\nwhile True:\n    logits = model(ids)\n    nxt = logits[:, -1].argmax(-1, keepdim=True)\n"
            "    ids = T.concat([ids, nxt], dim=-1)\n    if len(ids[0]) >= limit:\n        break\n",
            lines=[5],
            message="`torch.concat`",
        ),
        # a running metric over a tensor that grows every batch
        Invalid(
            "from torch import cat\nfor x, y in val_loader:\n    seen = cat([seen, y])\n"
            "    print(seen.float().mean())\n",
            lines=[3],
            message="a loop over a DataLoader",
        ),
        Invalid(
            "import torch.nn\nclass Chat:\n    def reply(self, n):\n        for _ in range(n):\n"
            "            logits = self.model(self.tokens)\n            nxt = logits[:, -1:].argmax(-1)\n"
            "            self.tokens = torch.cat([self.tokens, nxt], dim=1)\n",
            lines=[7],
            message="`self.tokens`",
        ),
        Invalid(
            "import torch.nn.functional as F\nimport torch\nfor t in range(steps):\n    action = policy_net(history)\n"
            "    history = torch.vstack((history, env_step(action)))\n",
            lines=[5],
            message="a step loop",
        ),
        # a memory that grows with every training step, Transformer-XL style but never trimmed
        Invalid(
            "import torch\nfor x in batches:\n    loss, h = model(x, memory)\n    loss.backward()\n"
            "    optimizer.step()\n    memory = torch.concatenate(tensors=(memory, h.detach()))\n",
            lines=[6],
            message="a training loop",
        ),
        # LoRA's beam search: the first step binds it, later ones grow it (`.detach()` keeps the
        # shape), also reordered by the beams kept
        Invalid(
            "import torch\nhistory = None\nfor i in range(eval_len):\n    logits = model(token_id, history)\n"
            "    token_id = logits.argmax(-1, keepdim=True)\n    if history is None:\n        history = token_id.detach()\n"
            "    else:\n        history = torch.cat((history[beam_idx], token_id.detach()), dim=1).detach()\n",
            lines=[9],
            message="`history` grows by `torch.cat`",
        ),
        # two branches grow it; the model reads it
        Invalid(
            "import torch\nfor _ in range(n):\n    nxt = torch.multinomial(model(idx), 1)\n    if cond:\n"
            "        idx = torch.cat([idx, nxt], 1)\n    else:\n        idx = torch.cat([idx, pad], 1)\n",
            lines=[5, 7],
        ),
        Invalid(  # GPT-SoVITS: the mask padded by one position per token after the first pass, and the
            # tokens grown, then cut to the rows still decoding (which keeps their length)
            "import torch\nimport torch.nn.functional as F\nfrom tqdm import tqdm\ndef infer(model, y, mask, pos):\n"
            "    for idx in tqdm(range(1500)):\n        logits = model(pos, mask)\n        if idx == 0:\n"
            "            mask = F.pad(mask[:, :, -1].unsqueeze(-2), (0, 1), value=False)\n        else:\n"
            "            mask = F.pad(mask, (0, 1), value=False)\n        y = torch.concat([y, logits.argmax(-1)], dim=1)\n"
            "        y = torch.index_select(y, dim=0, index=model.kept(y))\n        pos = model.embed(y)\n"
            "        if model.done(y):\n            y = y[:, :-1]\n",
            lines=[10, 11],
            message="every step of a decoding loop",
        ),
        Invalid(  # FastChat: the tokens so far, a list, made a tensor for the repetition penalty every step
            "import torch\ndef generate_stream(model, ids, penalty, n):\n    output_ids = list(ids)\n"
            "    for i in range(n):\n        logits = model(torch.as_tensor([[output_ids[-1]]]))\n"
            "        seen = torch.as_tensor([output_ids], device=logits.device)\n"
            "        token = int(penalty(seen, logits[:, -1, :]).argmax())\n        output_ids.append(token)\n",
            lines=[6],
            message="`output_ids` grows by `.append()`, a list made a tensor by `torch.as_tensor`, every step",
        ),
        Invalid(  # whisper: the decoder the task picks grows the tokens it is given and hands them back
            "import torch\nclass Greedy:\n    def update(self, tokens, logits):\n"
            "        nxt = logits.argmax(dim=-1)\n        tokens = torch.cat([tokens, nxt[:, None]], dim=-1)\n"
            "        return tokens, (tokens[:, -1] == 0).all()\nclass Beam:\n    def update(self, tokens, logits):\n"
            "        return tokens, True\nclass Task:\n    def __init__(self, beam):\n"
            "        self.decoder = Beam() if beam else Greedy()\n    def run(self, tokens):\n"
            "        for i in range(224):\n            logits = self.model(tokens)[:, -1]\n"
            "            tokens, done = self.decoder.update(tokens, logits)\n        return tokens\n",
            lines=[16],
            message="`tokens` grows by `torch.cat` in `update()` every step",
        ),
        Invalid(  # DALLE-pytorch: a model's own sampling, through its layers or its forward, a helper picking tokens
            "import torch\ndef gumbel_sample(t):\n    return (t + noise(t)).argmax(dim=-1)\n"
            "class DALLE(torch.nn.Module):\n    def __init__(self):\n        self.transformer = Transformer()\n"
            "    def generate_texts(self, tokens, n):\n        for _ in range(tokens.shape[1], n):\n"
            "            logits = self.transformer(tokens)[:, -1]\n"
            "            tokens = torch.cat((tokens, gumbel_sample(logits)[:, None]), dim=-1)\n"
            "        return tokens\n"
            "    def generate_images(self, out, n):\n        for cur_len in range(out.shape[1], n):\n"
            "            logits = self.forward_with_cond_scale(out)[:, -1]\n"
            "            out = torch.cat((out, gumbel_sample(logits)[:, None]), dim=-1)\n        return out\n",
            lines=[10, 15],
            message="every step of a decoding loop",
        ),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        ancestors = self.ctx.ancestors
        loop = innermost_loop(ancestors)
        if loop is None:
            return  # most assignments: no loop to grow in
        function, grown = self._growth(node)
        flow = self.ctx.flow
        if not grown or flow is None:
            return
        if in_forward(ancestors) or flow.off_the_step_path(ancestors):
            return
        step = flow.loop_step(loop)
        if step is None:
            return
        counter = self._first_step_counter(loop)
        for name in grown:
            if not self._rebound(loop.body, name, counter) and self._read_in(loop.body, name):
                self.report(node.value, name=name, function=function, loop=step, advice=advice(self.ctx.targets))

    def visit_Call(self, node: cst.Call) -> None:
        """A tensor made, in a step loop, of a Python list the loop appends to (FastChat's
        `torch.as_tensor([output_ids])` for the repetition penalty, with `output_ids.append(token)`
        every step): it has one more item at every step."""
        if not node.args or node.args[0].keyword is not None or type(node.args[0].value) not in _DATA:
            return
        loop = innermost_loop(self.ctx.ancestors)
        constructor = self.ctx.qualified_names(node.func) & _TENSOR_MAKERS if loop is not None else None
        flow = self.ctx.flow
        if not constructor or flow is None or loop is None:
            return
        data = node.args[0].value
        listed = [element.value for element in data.elements] if type(data) in (cst.List, cst.Tuple) else [data]
        grown = [name for each in listed if (name := patterns.dotted(each)) and _appended_in(loop.body, name)]
        if not grown or in_forward(self.ctx.ancestors) or flow.off_the_step_path(self.ctx.ancestors):
            return
        step = flow.loop_step(loop)
        if step is None or self._rebound(loop.body, grown[0], self._first_step_counter(loop)):
            return
        function = f"`.append()`, a list made a tensor by `{min(constructor)}`,"
        self.report(node, name=grown[0], function=function, loop=step, advice=advice(self.ctx.targets))

    def _growth(self, node: cst.Assign) -> tuple[str, list[str]]:
        """The torch concatenation an assignment makes and the targets it grows (the names and
        attribute paths it lists among the tensors it joins), also through a function of the
        module that grows what it is given and returns it (see `_grown_by_callee`); ("", [])
        for other assignments."""
        function, grown = self._concatenation(node)
        return (f"`{function}`", grown) if grown else self._grown_by_callee(node)

    def _grown_by_callee(self, node: cst.Assign) -> tuple[str, list[str]]:
        """For `tokens, done = self.decoder.update(tokens, logits)`: the targets bound to what
        a function of the module returns at their place, where it is the parameter the call
        passes them for, grown there by a concatenation (whisper's greedy decoder). A method of
        an instance counts where one of the classes the instance may be of grows it."""
        call, module_flow = node.value, self.ctx.flow
        if type(call) is not cst.Call or module_flow is None or len(node.targets) != 1:
            return "", []
        target = node.targets[0].target
        targets = [each.value for each in target.elements] if type(target) in (cst.Tuple, cst.List) else [target]
        given = {patterns.dotted(arg.value) for arg in call.args} - {""}
        if not any(patterns.dotted(each) in given for each in targets):
            return "", []  # nothing it binds is handed over: most calls
        for returned in (module_flow.returned_values(call), *module_flow.returned_per_class(call)):
            for value, scope in returned:
                items = [each.value for each in value.elements] if type(value) is cst.Tuple else [value]
                function = scope.owner
                if len(items) != len(targets) or type(function) is not cst.FunctionDef:
                    continue
                grown = [
                    path
                    for each, item in zip(targets, items)
                    if type(item) is cst.Name
                    and (path := patterns.dotted(each))
                    and (passed := argument_for(call, function, item.value)) is not None
                    and patterns.dotted(passed) == path
                    and self._grows_parameter(function, item.value)
                ]
                if grown:
                    return f"`torch.cat` in `{function.name.value}()`", grown
        return "", []

    def _grows_parameter(self, function: cst.FunctionDef, name: str) -> bool:
        """Whether `function` binds its parameter `name` to a concatenation onto it."""
        return any(
            type(node) is cst.Assign and name in self._concatenation(node)[1]
            for node in descendants(function.body, _SCOPES)
        )

    def _concatenation(self, node: cst.Assign) -> tuple[str, list[str]]:
        """The torch concatenation an assignment makes and the targets it lists among the
        tensors it joins, or a padding that lengthens the target itself (GPT-SoVITS's
        `attn_mask = F.pad(attn_mask, (0, 1), value=False)`); ("", []) for other assignments."""
        value = shape_kept(node.value)
        if type(value) is not cst.Call:
            return "", []
        names = self.ctx.qualified_names(value.func)
        functions = names & _GROWERS
        if functions:
            joined = _joined(value)
        elif _PAD in names and _lengthens(value):
            functions, joined = frozenset({_PAD}), {patterns.dotted(value.args[0].value)}
        else:
            return "", []
        return min(functions), [path for target in node.targets if (path := patterns.dotted(target.target)) in joined]

    def _rebound(self, node: cst.CSTNode, path: str, counter: str | None = None) -> bool:
        """Whether anything but a growth binds `path` under `node` (not in nested scopes): then
        each step starts it over (`x = noise(...)`, then `x = torch.cat([x, x], 1)`) or trims
        it (`x = x[:, -window:]`), and its length stays bounded. The first value, bound where
        `if x is None:` holds or on the loop's first pass (`if idx == 0:`, `counter`), starts
        nothing over, and neither does picking rows of it (`y = torch.index_select(y, 0, kept)`),
        which keeps its length, nor dropping a fixed count from its end (`y = y[:, :-1]`)."""
        for field_name in child_fields(type(node)):
            value = getattr(node, field_name)
            for child in value if isinstance(value, (tuple, list)) else (value,):
                if not isinstance(child, cst.CSTNode) or isinstance(child, _NESTED):
                    continue
                if isinstance(child, cst.Assign) and (
                    path in self._growth(child)[1] or self._rows_of(child, path) or _drops_tail(child, path)
                ):
                    continue
                if isinstance(child, cst.If) and (first := _first_binding(child, path, counter)) is not None:
                    if self._rebound(first, path, counter):
                        return True
                    continue
                if any(patterns.dotted(target) == path for target in _bound(child)) or self._rebound(
                    child, path, counter
                ):
                    return True
        return False

    def _first_step_counter(self, loop: cst.For | cst.While) -> str | None:
        """The name that is 0 on the loop's first pass only: `idx` of `for idx in range(n)` (or
        `range(0, n)`, also in a progress bar: `tqdm(range(n))`, `trange(n)`), or `i` of `for i,
        x in enumerate(xs)`."""
        if type(loop) is not cst.For or type(loop.iter) is not cst.Call:
            return None
        target, iterated = loop.target, loop.iter
        names = self.ctx.qualified_names(iterated.func)
        if any(name.startswith("tqdm.") and name.endswith(".tqdm") for name in names) and iterated.args:
            if type(iterated.args[0].value) is not cst.Call:
                return None
            iterated = iterated.args[0].value
            names = self.ctx.qualified_names(iterated.func)
        called = "range" if any(name.startswith("tqdm.") and name.endswith(".trange") for name in names) else ""
        if not called and not names and type(iterated.func) is cst.Name:
            called = iterated.func.value
        arguments = iterated.args
        if called == "enumerate" and type(target) is cst.Tuple and len(arguments) == 1:
            target = target.elements[0].value
        elif called != "range" or not (
            len(arguments) == 1 or (len(arguments) == 2 and patterns.int_value(arguments[0].value) == 0)
        ):
            return None
        return target.value if type(target) is cst.Name else None

    def _rows_of(self, node: cst.Assign, path: str) -> bool:
        """`y = torch.index_select(y, 0, kept)` or `y = y.index_select(0, kept)`: rows of itself,
        its length along the other dimensions kept."""
        value = node.value
        if type(value) is not cst.Call or not any(patterns.dotted(each.target) == path for each in node.targets):
            return False
        picked = index_select(self.ctx, value)
        return (
            picked is not None
            and picked.source is not None
            and patterns.dotted(picked.source) == path
            and picked.dim is not None
            and patterns.int_value(picked.dim.value) == 0
        )

    def _read_in(self, node: cst.CSTNode, path: str) -> bool:
        """Whether `path` is read under `node`, apart from the assignments that grow it, identity
        tests (`x is None`) and metadata (`x.shape`, `x.size(1)`, `len(x)`), which feed no tensor
        to a computation."""
        for field_name in child_fields(type(node)):
            value = getattr(node, field_name)
            for child in value if isinstance(value, (tuple, list)) else (value,):
                if not isinstance(child, cst.CSTNode) or _identity_test(child) or self._metadata(child, path):
                    continue
                if isinstance(child, cst.Assign) and path in self._growth(child)[1]:
                    continue
                if isinstance(child, (cst.Name, cst.Attribute)) and patterns.dotted(child) == path:
                    if reads(child, node):
                        return True
                if self._read_in(child, path):
                    return True
        return False

    def _metadata(self, node: cst.CSTNode, path: str) -> bool:
        """`x.shape`, `x.size`, `x.dim`... or `len(x)` for the tensor at `path`."""
        if isinstance(node, cst.Attribute):
            return node.attr.value in _METADATA and patterns.dotted(node.value) == path
        measured = builtin_call(self.ctx, node, ("len",))
        return measured is not None and patterns.dotted(measured) == path


def _joined(call: cst.Call) -> set[str]:
    """The names and attribute paths a concatenation lists, written out as a list or tuple,
    also reordered along the first dimension (beam search's `history[beam_idx]`), which keeps
    the length it grows."""
    arg = patterns.argument(call, 0, "tensors")
    if arg is None or not isinstance(arg.value, (cst.List, cst.Tuple)):
        return set()
    return {patterns.dotted(_reordered(item.value)) for item in arg.value.elements if isinstance(item, cst.Element)} - {
        ""
    }


def _appended_in(body: cst.CSTNode, path: str) -> bool:
    """Whether `path.append(...)` or `path.extend(...)` runs in `body` (not in nested scopes)."""
    return any(
        type(node) is cst.Call
        and type(node.func) is cst.Attribute
        and node.func.attr.value in ("append", "extend")
        and patterns.dotted(node.func.value) == path
        for node in descendants(body, _NESTED)
    )


def _drops_tail(node: cst.Assign, path: str) -> bool:
    """`y = y[:, :-1]`: itself less a fixed count at the end, which bounds nothing."""
    value = node.value
    if (
        type(value) is not cst.Subscript
        or patterns.dotted(value.value) != path
        or not any(patterns.dotted(each.target) == path for each in node.targets)
    ):
        return False
    slices = [element.slice for element in value.slice]
    tail = slices[-1]
    return (
        all(type(each) is cst.Slice and each.lower is None and each.step is None for each in slices)
        and all(each.upper is None for each in slices[:-1])  # type: ignore[union-attr]
        and type(tail) is cst.Slice
        and type(tail.upper) is cst.UnaryOperation
        and type(tail.upper.operator) is cst.Minus
        and type(tail.upper.expression) is cst.Integer
    )


def _lengthens(call: cst.Call) -> bool:
    """`F.pad(x, (0, 1))`: padding of the tensor by numbers, none negative, one not 0."""
    pad = patterns.argument(call, 1, "pad")
    if not call.args or call.args[0].keyword is not None or pad is None or type(pad.value) not in (cst.Tuple, cst.List):
        return False
    amounts = [patterns.int_value(element.value) for element in pad.value.elements]  # type: ignore[union-attr]
    return all(amount is not None and amount >= 0 for amount in amounts) and any(amounts)


def _reordered(value: cst.BaseExpression) -> cst.BaseExpression:
    """`history` for `history[beam_idx]` (an index that is not a number, alone); else `value`."""
    if (
        isinstance(value, cst.Subscript)
        and len(value.slice) == 1
        and isinstance(value.slice[0].slice, cst.Index)
        and not is_number(value.slice[0].slice.value)
    ):
        return value.value
    return value


def _first_binding(test: cst.If, path: str, counter: str | None = None) -> cst.CSTNode | None:
    """Given `if x is None: <first> else: <rest>` (or `is not None`, the other way around),
    or `if <counter> == 0: <first> else: <rest>`, the part that runs where `x` holds something
    yet: an empty `if` for the first binding."""
    condition = test.test
    if (
        counter is not None
        and type(condition) is cst.Comparison
        and len(condition.comparisons) == 1
        and type(condition.comparisons[0].operator) is cst.Equal
        and patterns.dotted(condition.left) == counter
        and patterns.int_value(condition.comparisons[0].comparator) == 0
    ):
        return test.orelse or cst.Pass()
    if not (
        isinstance(condition, cst.Comparison)
        and len(condition.comparisons) == 1
        and patterns.dotted(condition.left) == path
        and isinstance(condition.comparisons[0].comparator, cst.Name)
        and condition.comparisons[0].comparator.value == "None"
    ):
        return None
    operator = condition.comparisons[0].operator
    if isinstance(operator, cst.Is):
        return test.orelse or cst.Pass()
    return test.body if isinstance(operator, cst.IsNot) else None


def _bound(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """What a node binds: the targets of an assignment, `for`, walrus or `as`, unpacked."""
    if isinstance(node, cst.Assign):
        targets = [target.target for target in node.targets]
    elif isinstance(node, (cst.AnnAssign, cst.For, cst.NamedExpr)):
        targets = [node.target]
    elif isinstance(node, cst.AsName):
        targets = [node.name]
    else:
        return []
    unpacked: list[cst.BaseExpression] = []
    while targets:
        target = targets.pop()
        if isinstance(target, (cst.Tuple, cst.List)):
            targets.extend(element.value for element in target.elements)
        else:
            unpacked.append(target)
    return unpacked


def _identity_test(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Comparison) and all(
        isinstance(link.operator, (cst.Is, cst.IsNot)) for link in node.comparisons
    )
