from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial

import libcst as cst

from portcheck import patterns
from portcheck.flow import TRACED, enclosing_function, periodic
from portcheck.rule import FileContext, Invalid, Valid
from portcheck.rules.shapes import (
    SYNC_SEVERITY,
    StepRule,
    builtin_call,
    in_host_memory,
    reads_tensor_scalar,
    tensor_valued,
    tests_tensor_value,
    values_reaching,
)
from portcheck.rules.shapes.data_dependent_shape_op import shaped_by_data

_KINDS = {
    cst.If: "`if`",
    cst.While: "`while`",
    cst.IfExp: "conditional expression",
    cst.Assert: "`assert`",
    cst.CompIf: "comprehension's `if`",
    cst.For: "`for` loop's count",
}
# What a test that reads no tensor is made of, by its form (`_asks_the_host`).
_TEXT = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
_PREDICATES = frozenset({"isinstance", "issubclass", "hasattr", "callable"})


class TensorDependentControlFlow(StepRule):
    """## What it does
    Reports `if`, `while`, conditional-expression, comprehension `if` (`[i for i, w in
    enumerate(words) if w != end]`, one read per element) and `assert` tests that depend on tensor
    values, in a module's `forward` or in a step loop (training, evaluation, decoding: see
    PC503): `mask.any()`, `x.all()`, `t.item()`, comparisons of reductions (`x.sum() > 0`,
    `x.max() < t`), `torch.any` / `torch.all` / `torch.equal` / `torch.is_nonzero`,
    `bool(t.max())`, a tensor itself or an element of one (`if nxt[0, 0] == eos:`, where
    `nxt = torch.multinomial(...)`), `all(done)` over a tensor, `any(...)` of such tests
    (`any(not p.grad.isfinite().all() for p in params)`), or a name bound to one of those (a
    parameter where every call of its function in the module passes a tensor, also through a
    table of functions: `sample_fn = {"heun": sample_heun}[name]`; an item a loop takes from a
    tensor: `for t_cur, t_next in zip(t_steps[:-1], t_steps[1:]):`; what the module's own
    function returns, or the argument it returns as given; the first output of a model,
    `logits, past = model(ids)`; or a value sent to a device with `.to(device)`);
    also in the module's functions called every step from those places (see PC503), and the
    test of a `while` loop that is itself a step loop (DPM-Solver's adaptive `while
    torch.abs(s - t_0).mean() > t_err:`). In a step loop, tests on the error path and under
    `if step % N == 0:` are left alone, and so are tests of tensors in host memory
    (`correct = (pred == y).cpu()`, then `if not correct[i]:`): the copy is the sync.

    Shape and Python-value checks are static under tracing and are not reported:
    `if self.training:`, `x.dim() == 3`, `x.shape[0] > 1`, `x.size(1)`, `len(x)`,
    `x is None`, `isinstance(...)`; but the length of what a boolean mask, `nonzero`,
    `unique`, `masked_select`, one-argument `torch.where` or torchvision's `nms` left (its
    `.shape[0]`, `.size(0)`, `len()` or `.numel()`: YOLO's `if not x.shape[0]:` after `x =
    x[x[:, 4] > conf]`) is known only once the device has computed it, and is reported, as is
    a `for` loop as long as such a length (`for i in range(idxs.shape[0]):` after `idxs =
    torch.nonzero(mask)`) or over such a tensor's rows.

    ## Why is this bad?
    Python needs a real bool, so the device must finish and copy the value to the host. Dynamo
    breaks the graph ("generic_jump TensorVariable()", even with capture_scalar_outputs), XLA
    compiles one graph per combination of branches, and Trainium's ahead-of-time compiler
    cannot follow the branch at all. In a step loop it is a host sync every step, which cuts
    the step's lazy graph on XLA, TorchTPU and Trainium (an early stop on `eos` in a decoding
    loop waits for every token).

    ## Example
    ```python
    def forward(self, x):
        if (x < 0).any():
            x = x.clamp(min=0)
        return x
    ```

    ## Use instead
    ```python
    def forward(self, x):
        return torch.where(x < 0, 0, x)  # or torch.cond(pred, true_fn, false_fn, (x,))
    ```

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; info on mps, xpu and rocm (a host
    sync); off on cpu, which computes on the host: nothing to copy or wait for.
    Off for the targets whose device type a branch for other devices keeps out (`if mps:`
    where `mps = "mps" in x.device.type`; not a CUDA branch, which a port may open to them).

    ## Fix safety
    No automatic fix: both branches must be rewritten as tensor operations.
    """

    code = "PC504"
    name = "tensor-dependent-control-flow"
    message = "{kind} in {where} depends on tensor values: {effect}"
    hint = (
        "compute both branches and select with torch.where, or use torch.cond(pred, true_fn, false_fn, (x,)); "
        "move input checks out of forward"
    )
    severity = SYNC_SEVERITY
    triggers = (b"forward", b"for ", b"while ")

    VALID = [
        Valid(  # attributes annotated as numbers where they start, then moved by numbers read back
            "import torch\nclass Enc:\n    def __init__(self):\n        self.low: int = 0\n        self.high: int = 0\n"
            "    def push(self, symbol, cdf: torch.Tensor):\n        self.low = self.low + int(cdf[symbol - 1].item())\n"
            "        assert self.low <= self.high\n"
            "def compress(model, frames):\n    coder = Enc()\n    for t in range(100):\n"
            "        coder.push(t, model(frames))\n"
        ),
        Valid(  # encodec's arithmetic coder: numbers read back (PC503's), then only compared
            "import math\nimport torch\nclass Coder:\n    def __init__(self):\n        self.low: int = 0\n"
            "        self.high: int = 0\n    def widen(self, width):\n        self.high = self.low + width\n"
            "        assert self.low <= self.high\n"
            "def push(coder, symbol, cdf):\n    width = int(math.floor(cdf[symbol].item() * 2))\n"
            "    low = int(cdf[symbol - 1].item())\n    assert low <= width\n    coder.widen(width)\n"
            "def compress(model, frames):\n    coder = Coder()\n    for t in range(100):\n"
            "        push(coder, t, model(frames))\n"
        ),
        Valid(  # a scaler's `backward(loss)` is no tensor's
            "import torch\ndef step(loss_scaler, loss, loader):\n    for x in loader:\n"
            "        if loss_scaler != 0:\n            loss_scaler.backward(loss)\n"
        ),
        Valid(  # audiocraft's tests: a test's assertions in its own training loop
            "import torch\ndef test_causality(model):\n    for k in [0, 10]:\n        x = torch.randn(4, 20, 16, requires_grad=True)\n"
            "        model(x)[:, k].sum().backward()\n        assert torch.allclose(x.grad[:, k + 1:], torch.tensor(0.))\n"
        ),
        Valid(  # the instance's __call__ runs only where the step loop does not call it
            "import torch\nclass PerStage:\n    def __call__(self, loss, step):\n        mask = step == 0\n"
            "        if mask.sum() > 0:\n            return (mask * loss).sum()\n        return loss\n"
            "class Solver:\n    def run(self, loader):\n        for batch in loader:\n"
            "            self.model(batch).backward()\n        return self.per_stage(self.last, 0)\n"
            "    def build(self):\n        self.per_stage = PerStage()\n"
        ),
        Valid(  # CaiT's layer dropout: which layers run is drawn on the host, in a CPU tensor
            "import torch\ndef dropout_layers(layers, p):\n    to_drop = torch.zeros(len(layers)).uniform_(0., 1.) < p\n"
            "    if all(to_drop):\n        to_drop[0] = False\n"
            "    return [layer for layer, drop in zip(layers, to_drop) if not drop]\n"
            "class CaiT(torch.nn.Module):\n    def forward(self, x):\n"
            "        for layer in dropout_layers(self.layers, 0.1):\n            x = layer(x)\n        return x\n"
        ),
        Valid(  # a loop as long as a static size: the count is known when tracing
            "import torch\nclass Splice(torch.nn.Module):\n    def forward(self, ids, feats):\n"
            "        num_tokens = ids.shape[1]\n        out = []\n"
            "        for i in range(num_tokens + 1):\n            out.append(feats[i])\n        return out\n"
        ),
        Valid(  # SV2TTS: a model moved to the device is no tensor, nor what its `get_step()` returns
            "import torch\nfrom synthesizer.models.tacotron import Tacotron\ndef train(loader, opt, device):\n"
            "    model = Tacotron(4).to(device)\n    for x, y in loader:\n        loss = model(x.to(device), y.to(device))\n"
            "        loss.backward()\n        opt.step()\n        step = model.get_step()\n        if step % 100 == 0:\n"
            "            print(step)\n"
        ),
        Valid(  # what else a model returns is not known to be a tensor
            "import torch\nfor step in range(100):\n    logits, stats = model(x)\n"
            "    if stats['skip']:\n        continue\n    logits.sum().backward()\n"
        ),
        Valid(  # unpacked from numbers the module's function returns
            "import torch\ndef bounds(n):\n    return n // 2, n\n"
            "class M(torch.nn.Module):\n    def forward(self, x):\n        lo, hi = bounds(x.shape[0])\n"
            "        if lo == 0:\n            return x\n        return x[lo:hi]\n"
        ),
        Valid(  # a parameter rebound to a number, and `max()` of numbers
            "import torch\ndef shift(x, tx):\n    tx = float(tx) * 4\n    if abs(tx) < max(tx, 4):\n        x = x.roll(1)\n    return x\n"
            "class Metric(torch.nn.Module):\n    def forward(self, x):\n        return shift(x, 0.25)\n"
        ),
        Valid(  # the same step given Python numbers
            "import torch\nclass Diffusion(torch.nn.Module):\n    def p_sample(self, x, time, time_next):\n"
            "        out = self.model(x, time)\n        if time_next == 0:\n            return out\n"
            "        return out + torch.randn_like(x)\n    def sample(self, x, n):\n        for i in range(n):\n"
            "            x = self.p_sample(x, i, i - 1)\n        return x\n"
        ),
        Valid(  # items of what is no tensor: host values, NumPy's, the module's functions' Python results
            "import numpy as np\nimport torch\ndef sample(net, x, steps):\n"
            "    for t_cur, t_next in zip(steps.tolist()[:-1], steps.numpy()[1:]):\n"
            "        x = net(x, t_cur) if t_cur > 0.5 else x\n        if t_next == 0:\n            break\n"
            "    for s in schedule(8):\n        x = net(x, s) if s > 2 else x\n    return x\n"
            "def schedule(n):\n    return [i * 0.5 for i in range(n)]\n"
        ),
        Valid(  # no class the decoder may be of returns a tensor there
            "import torch\nclass BeamSearchDecoder:\n    def update(self, tokens, logits):\n"
            "        return tokens, all(len(t) > 4 for t in tokens)\nclass Task:\n    def __init__(self):\n"
            "        self.decoder = BeamSearchDecoder()\n    def run(self, tokens):\n        for i in range(224):\n"
            "            tokens, completed = self.decoder.update(tokens, self.model(tokens))\n"
            "            if completed:\n                break\n"
        ),
        Valid(  # DiT: a staticmethod called through self is given no self (`dim` is the int)
            "import math\nimport torch\nclass TimestepEmbedder(torch.nn.Module):\n    @staticmethod\n"
            "    def embedding(t, dim):\n        args = t[:, None] * torch.arange(dim // 2)\n"
            "        if dim % 2:\n            args = torch.cat([args, args[:, :1]], -1)\n        return args\n"
            "    def forward(self, x):\n        t = torch.arange(len(x))\n        return self.embedding(t, self.size)\n"
        ),
        Valid(  # minGPT's adder: the results copied to the host once per batch, then read there
            "import torch\nfor b, (x, y) in enumerate(loader):\n    x = x.to(device)\n    pred = model.generate(x)\n"
            "    correct = (pred == y.to(device)).cpu()\n    for i in range(x.size(0)):\n"
            "        if not correct[i] and shown < 5:\n            print(i)\n"
        ),
        Valid(  # a dict kept on self from another method's `**kwargs`: no tensor (ChatGLM's Seq2SeqTrainer)
            "import torch\nclass T(torch.nn.Module):\n    def evaluate(self, **gen_kwargs):\n"
            "        gen_kwargs = gen_kwargs.copy()\n        self._gen_kwargs = gen_kwargs\n"
            "    def forward(self, x):\n        gen_kwargs = self._gen_kwargs.copy()\n"
            "        if x.shape[-1] < gen_kwargs['max_length']:\n            x = x[:, :3]\n        return x\n"
        ),
        Valid(
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, mask=None):\n"
            "        if self.training and mask is not None:\n            x = x * mask\n"
            "        if x.dim() == 3 or x.shape[0] > 1 or x.size(1) > 2 or len(x) > 4:\n            x = x[0]\n"
            "        assert isinstance(x, torch.Tensor)\n        return x\n"
        ),
        Valid("import torch\ndef check(x):\n    if x.sum() > 0:\n        return x\n"),
        Valid(  # a loop as long as a dimension the input fixes
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
            "        for i in range(x.shape[0]):\n            x[i] = x[i] * 2\n        return x\n"
        ),
        Valid(  # read every N steps, and on the error path
            "import torch\nfor step in range(n):\n    loss = F.cross_entropy(model(x), y)\n    loss.backward()\n"
            "    if step % 100 == 0 and loss.item() > 10:\n        raise RuntimeError('diverged')\n"
            "    if step % 10 == 0:\n        if torch.isnan(loss):\n            break\n"
        ),
        Valid(  # Python values and parameters of unknown type in a decoding loop
            "import torch\ndef gen(model, idx, eos):\n    for i in range(64):\n"
            "        nxt = torch.multinomial(model(idx).softmax(-1), 1)\n        if i == 10 or eos is None:\n"
            "            break\n        if idx == eos:\n            break\n"
        ),
        Valid(
            "import numpy as np\nimport torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
            "        return x if np.any(self.flags) else -x\n"
        ),
        Valid("class M:\n    def forward(self, torch, x):\n        if torch.any(x):\n            return x\n"),
        Valid(
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, xs):\n"
            "        if any(x is None for x in xs):\n            return None\n        return xs\n"
        ),
        # on the CPU the tensor is already in host memory: no device to wait for
        Valid(
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        if (x < 0).any():\n            x = x.clamp(min=0)\n        return x\n",
            options={"targets": ["cpu"]},
        ),
        Valid(  # peft's merge: the check runs only where a call asks for a safe merge, and forward does not
            "import torch\nclass Layer(torch.nn.Module):\n    def merge(self, safe_merge=False, names=None):\n"
            "        if safe_merge:\n            if not torch.isfinite(self.w + self.delta).all():\n"
            "                raise ValueError('NaN')\n        self.w += self.delta\n"
            "    def forward(self, x):\n        self.merge(names=['a'])\n        return x @ self.w\n"
        ),
        Valid(  # the sizes a mask leaves alone, and the size of what no mask or selection made
            "import torch\ndef keep(x, conf):\n    for row in x:\n        row = row[row[:, 4] > conf]\n"
            "        if row.size(1) > 5 or row.shape[-1] > 5:\n            row = row[:, :5]\n"
            "        boxes = row[:, :4]\n    n = len(conf)\n    if n > 2:\n        return x\n"
            "def detect(model, loader):\n    for imgs in loader:\n        keep(model(imgs), 0.5)\n"
        ),
    ]
    INVALID = [
        Invalid(  # DINO's video segmentation: the model run by a method of its own, on a frame sent to the GPU
            "import torch\ndef extract(model, frame):\n"
            "    return model.get_intermediate_layers(frame.unsqueeze(0).cuda(), n=1)[0]\n"
            "def track(model, frames):\n    for frame in frames:\n        feat = extract(model, frame)\n"
            "        if feat.max() > 0:\n            feat = feat / feat.max()\n",
            lines=[7],
            message="in a step loop",
        ),
        Invalid(  # StyleTTS2: a loss from another module's model, tested, then backpropagated
            "import torch\ndef train(model, loader, opt, slmadv):\n    for x, y in loader:\n"
            "        model(x, y).backward()\n        out = slmadv(x)\n        if out is None:\n            d_loss_slm = 0\n"
            "        else:\n            d_loss_slm, gen = out\n        if d_loss_slm != 0:\n"
            "            d_loss_slm.backward(retain_graph=True)\n            opt.step()\n",
            lines=[10],
        ),
        Invalid(  # fish-speech: a function that decodes one token, given the model, until the end token
            "import torch\ndef decode_n_tokens(model, cur_token, num_new_tokens, end_id, decode_one_token=None):\n"
            "    new_tokens = []\n    for i in range(num_new_tokens):\n"
            "        next_token = decode_one_token(model=model, x=cur_token).clone()\n"
            "        cur_token = next_token.view(1, -1)\n        new_tokens.append(next_token)\n"
            "        if cur_token[0, -1] == end_id:\n            break\n    return torch.cat(new_tokens, dim=1)\n",
            lines=[8],
            message="`if` in a decoding loop depends on tensor values",
        ),
        Invalid(  # seed-vc: the token a method returns, rebound from a list to a tensor before its return
            "import torch\nclass AR(torch.nn.Module):\n    def generate(self, emb):\n        codes = []\n"
            "        for _ in range(4000):\n            pred = self.decode_one(emb)[0]\n"
            "            if pred == 1023:\n                break\n            codes.append(pred)\n"
            "        return torch.stack(codes)\n    def decode_one(self, x):\n        logits = self.model(x)\n"
            "        out = [torch.multinomial(logits.softmax(-1), 1)[0]]\n        out = torch.stack(out, dim=0)\n"
            "        return out\n",
            lines=[7],
            message="`if` in a decoding loop depends on tensor values",
        ),
        Invalid(  # AllenNLP's beam search (OLMo): the model's step given as a callable, run until the end
            "import torch\nclass BeamSearch:\n    def search(self, start, state, step):\n"
            "        predictions = [start]\n        for t in range(self.max_steps - 1):\n"
            "            last = predictions[-1].reshape(-1)\n            if (last == self._end_index).all():\n"
            "                break\n            log_probs, state = step(last, state, t + 1)\n"
            "            predictions.append(torch.where(log_probs > 0, 1, 0))\n        return torch.stack(predictions)\n",
            lines=[7],
            message="`if` in a step loop depends on tensor values",
        ),
        Invalid(  # vits' flows: a function picked in branches, then called, runs every step too
            "import torch\ndef spline(inputs):\n    if torch.min(inputs) < 0:\n        raise ValueError('domain')\n"
            "    return inputs * 2\ndef plain(inputs):\n    return inputs\ndef transform(inputs, tails=None):\n"
            "    if tails is None:\n        spline_fn = plain\n    else:\n        spline_fn = spline\n"
            "    return spline_fn(inputs)\nclass Flow(torch.nn.Module):\n    def forward(self, x):\n"
            "        return transform(x, tails='linear')\n",
            lines=[3],
        ),
        Invalid(  # the same, asked while the walk is in forward(): the number's branch is found from the function
            "import torch\nclass Noise(torch.nn.Module):\n    def forward(self, img, gray_noise=0):\n"
            "        if isinstance(gray_noise, (float, int)):\n            cal_gray_noise = gray_noise > 0\n"
            "        else:\n            cal_gray_noise = torch.sum(gray_noise) > 0\n        if cal_gray_noise:\n"
            "            img = img + torch.randn_like(img)\n        return img\n",
            lines=[8],
        ),
        Invalid(  # BasicVSR++: an even number of frames is no periodic step, what it guards runs every step
            "import torch\nfrom torch import nn\nclass Net(nn.Module):\n    def check_mirror(self, lqs):\n"
            "        if lqs.size(1) % 2 == 0:\n            a, b = torch.chunk(lqs, 2, dim=1)\n"
            "            if torch.norm(a - b.flip(1)) == 0:\n                self.mirrored = True\n"
            "    def forward(self, lqs):\n        self.check_mirror(lqs)\n        return lqs\n",
            lines=[7],
        ),
        Invalid(  # BasicSR's degradation: a number in the `isinstance` branch, a tensor in the other
            "import torch\ndef noise(img, gray_noise=0):\n    if isinstance(gray_noise, (float, int)):\n"
            "        cal_gray_noise = gray_noise > 0\n    else:\n        gray_noise = gray_noise.view(-1, 1)\n"
            "        cal_gray_noise = torch.sum(gray_noise) > 0\n    if cal_gray_noise:\n"
            "        img = img + torch.randn_like(img) * gray_noise\n    return img\n"
            "def train(loader, model, opt):\n    for x in loader:\n        model(noise(x, torch.rand(4))).sum().backward()\n"
            "        opt.step()\n",
            lines=[8],
        ),
        Invalid(  # Tacotron's inference: a range loop over the decoder that stops on its stop tokens
            "import torch\nimport torch.nn as nn\nclass Decoder(nn.Module):\n    def forward(self, x, h):\n"
            "        h = self.proj(x) + h\n        return h, torch.sigmoid(self.stop(h))\n"
            "class Tacotron(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.decoder = Decoder()\n"
            "    def generate(self, x, steps=200):\n        h, outs = torch.zeros(4), []\n        for t in range(steps):\n"
            "            h, stop_tokens = self.decoder(x, h)\n            outs.append(h)\n"
            "            if (stop_tokens > 0.5).all() and t > 10:\n                break\n        return torch.stack(outs)\n",
            lines=[16],
            message="`if` in a decoding loop depends on tensor values",
        ),
        Invalid(  # YOLOv9's loss: a reduction tested for nonzero
            "import torch.nn as nn\nclass Loss(nn.Module):\n    def forward(self, pred):\n        fg_mask = pred > 0\n"
            "        if fg_mask.sum():\n            pred = pred * 2\n        return pred\n",
            lines=[5],
        ),
        Invalid(  # GroundingDINO's text masks: a loop as long as what nonzero found, and an element tested
            "import torch\nclass Text(torch.nn.Module):\n    def forward(self, ids):\n"
            "        idxs = torch.nonzero(ids == 101)\n        for i in range(idxs.shape[0]):\n"
            "            row, col = idxs[i]\n            if col == 0:\n                continue\n"
            "        for row in idxs:\n            print(row)\n        return idxs\n",
            lines=[5, 7, 9],
        ),
        Invalid(  # LLaVA's image splicing: a loop as long as a count of image tokens, a 0-d tensor
            "import torch\nclass Llava(torch.nn.Module):\n    def forward(self, ids, feats):\n"
            "        num_images = (ids == -200).sum()\n        out = []\n"
            "        for i in range(num_images + 1):\n            out.append(feats[i])\n        return out\n",
            lines=[6],
            message="`for` loop's count in forward() depends on tensor values",
        ),
        Invalid(  # GroundingDINO's decoder: a NaN check after each layer, the two answers joined by `|`
            "import torch\nclass Decoder(torch.nn.Module):\n    def forward(self, output):\n"
            "        for layer in self.layers:\n            output = layer(output)\n"
            "            if output.isnan().any() | output.isinf().any():\n                print('nan')\n"
            "        return output\n",
            lines=[6],
            message="`if` in forward()",
        ),
        Invalid(  # a beam search keeps the beams that have not ended: one read per beam, every step
            "import torch\ndef beam(decoder, k_prev, end, k):\n    while True:\n"
            "        top, words = decoder.fc(k_prev).view(-1).topk(k, 0, True, True)\n"
            "        alive = [i for i, w in enumerate(words) if w != end]\n        if not alive:\n            break\n"
            "        k_prev = words\n",
            lines=[5],
            message="comprehension's `if` in a decoding loop",
        ),
        Invalid(  # LoRA's beam candidates: the ids `torch.topk` gives, tested against the end tokens
            "import torch\ndef add_candidates(history, eos):\n    last = history[:, -1]\n"
            "    for i in range(len(last)):\n        if last[i] in eos:\n            print(i)\n"
            "def beam(model, ids, n, eos):\n    history = None\n    for step in range(n):\n"
            "        scores, nxt = torch.topk(model(ids)[:, -1], 1)\n"
            "        history = nxt if history is None else torch.cat([history, nxt], 1)\n        add_candidates(history, eos)\n",
            lines=[5],
        ),
        Invalid(  # LoRA's beam search: a model's first output, through a helper that returns what it is given
            "import torch\ndef penalize(lprobs, prev):\n    for i in range(lprobs.shape[0]):\n        for tok in prev[i]:\n"
            "            if lprobs[i, tok] < 0:\n                lprobs[i, tok] *= 2.0\n"
            "def process(scores, prev):\n    penalize(scores, prev)\n    return scores\n"
            "def beam(model, ids, n):\n    logits, past = model(ids)\n    for i in range(n):\n"
            "        logits = process(logits[:, -1, :], ids)\n        nxt = logits.argmax(-1, keepdim=True)\n"
            "        logits, past = model(nxt, past=past)\n        ids = torch.cat([ids, nxt], 1)\n",
            lines=[5],
            message="`if` in `penalize()`, called from",
        ),
        Invalid(  # bark: a test over several lines is reported on each line that reads the device
            "import torch\ndef generate(model, x, n, eos, min_p, early):\n    for _ in range(n):\n"
            "        probs = torch.softmax(model(x)[-1], dim=-1)\n        nxt = torch.multinomial(probs, 1)\n"
            "        if early and (\n            nxt == eos\n"
            "            or (min_p is not None and probs[-1] >= min_p)\n        ):\n            break\n"
            "        x = torch.cat([x, nxt])\n",
            lines=[7, 8],
            message="`if` in a decoding loop depends on tensor values",
        ),
        Invalid(  # tacotron2's decoder: a model's own `while` loop over its layers, stopped by its gate
            "import torch\nclass Decoder(torch.nn.Module):\n    def __init__(self):\n        self.prenet = Prenet(80)\n"
            "    def inference(self, x):\n        while True:\n            x, gate = self.prenet(x)\n"
            "            if torch.sigmoid(gate) > 0.5:\n                break\n        return x\n",
            lines=[8],
            message="in a decoding loop",
        ),
        Invalid(  # what a model returns is a tensor
            "import torch\nfor i in range(steps):\n    logits = model(ids)[:, -1]\n    if logits[0, eos] > 0:\n        break\n",
            lines=[4],
        ),
        Invalid(  # ConvNeXt's training step: a tensor, or None on the other path
            "import torch\nfor x, y in loader:\n    out = model(x)\n    acc = (out.argmax(-1) == y).float().mean() if y.ndim == 1 else None\n"
            "    if acc:\n        wandb.log({'acc': acc})\n",
            lines=[5],
        ),
        Invalid(  # LoRA's beam search: a token tested for membership every step
            "import torch\nfor step in range(n):\n    logits = model(ids)\n    last = torch.argmax(logits, -1)\n"
            "    if last[0] in eos_ids:\n        break\n    if 'cuda' in device_name:\n        pass\n",
            lines=[5],
        ),
        Invalid(  # dino's clip_gradients: a gradient's norm, tested for every parameter every step
            "import torch\ndef clip(model, clip):\n    for name, p in model.named_parameters():\n"
            "        norm = p.grad.data.norm(2)\n        if clip / (norm + 1e-6) < 1:\n            p.grad.data.mul_(0.5)\n"
            "for x in loader:\n    model(x).backward()\n    clip(model, 3.0)\n",
            lines=[5],
        ),
        Invalid(  # denoising-diffusion-pytorch's elucidated sampler: the schedule a method of the class returns
            "import torch\nclass Elucidated(torch.nn.Module):\n    def sample(self, n):\n"
            "        sigmas = self.schedule(n)\n        for i in range(n - 1):\n            x = self.net(sigmas[i])\n"
            "            if sigmas[i + 1] == 0:\n                break\n"
            "    def schedule(self, n):\n        return torch.linspace(1, 0, n)\n",
            lines=[7],
        ),
        Invalid(  # EDM's sampler: the noise levels are items of a device tensor, paired by zip
            "import torch\ndef edm_sampler(net, latents, n=18, s_min=0.0, s_max=80.0):\n"
            "    t_steps = torch.arange(n, device=latents.device) * 0.5\n    x = latents * t_steps[0]\n"
            "    for i, (t_cur, t_next) in enumerate(zip(t_steps[:-1], t_steps[1:])):\n"
            "        gamma = 0.4 if s_min <= t_cur <= s_max else 0\n        x = x + (t_next - t_cur) * net(x, t_cur * gamma)\n"
            "    return x\n",
            lines=[6],
            message="conditional expression in a step loop",
        ),
        Invalid(  # k-diffusion's samplers: picked from a table, given what the module's own function returns
            "import torch as th\ndef karras_sample(denoiser, x, steps, sampler='heun', device=None):\n"
            "    sigmas = get_sigmas_karras(steps, device=device)\n"
            "    sample_fn = {'heun': sample_heun, 'euler': sample_euler}[sampler]\n"
            "    return sample_fn(denoiser, x, sigmas)\n"
            "def get_sigmas_karras(n, device='cpu'):\n    return append_zero(th.linspace(80.0, 0.002, n)).to(device)\n"
            "def append_zero(x):\n    return th.cat([x, x.new_zeros([1])])\n"
            "def sample_heun(denoiser, x, sigmas):\n    for i in range(len(sigmas) - 1):\n"
            "        denoised = denoiser(x, sigmas[i])\n        if sigmas[i + 1] == 0:\n            x = denoised\n"
            "        else:\n            x = x + (sigmas[i + 1] - sigmas[i]) * denoised\n    return x\n"
            "def sample_euler(denoiser, x, sigmas):\n    return denoiser(x, sigmas[0])\n",
            lines=[13],
            message="`if` in a step loop",
        ),
        Invalid(  # denoising-diffusion-pytorch: the sampling loop passes device tensors to the step's parameters
            "import torch\nclass Diffusion(torch.nn.Module):\n    def p_sample(self, x, time, time_next):\n"
            "        out = self.model(x, time)\n        if time_next == 0:\n            return out\n"
            "        return out + torch.randn_like(x)\n    def sample(self, x, n):\n"
            "        steps = torch.linspace(1.0, 0.0, n + 1, device=x.device)\n        for i in range(n):\n"
            "            x = self.p_sample(x, steps[i], steps[i + 1])\n        return x\n",
            lines=[5],
            message="`p_sample()`, called from a step loop",
        ),
        Invalid(  # DPM-Solver's adaptive solver: the loop runs the model through a lambda and `model_fn`
            "import torch\nclass Solver:\n    def model_fn(self, x, t):\n        return self.model(x, t)\n"
            "    def update(self, x, s):\n        return x + self.model_fn(x, s)\n"
            "    def adaptive(self, x, s, t_0, t_err):\n        lower = lambda x, s: self.update(x, s)\n"
            "        while torch.abs(s - t_0).mean() > t_err:\n            x = lower(x, s)\n            s = s - 0.1\n"
            "        return x\n",
            lines=[9],
            message="`while` in a step loop",
        ),
        Invalid(  # stylegan3's equivariance metric: a parameter made a tensor first, then `abs()` of it
            "import torch\ndef shift(x, tx):\n    tx = torch.as_tensor(tx * 4).to(x.device)\n    ix = tx.round()\n"
            "    if abs(ix) < 4:\n        x = x.roll(1)\n    return x\n"
            "class Metric(torch.nn.Module):\n    def forward(self, x):\n        return shift(x, 0.25)\n",
            lines=[5],
        ),
        Invalid(  # LLaVA's attention patch: a function the module makes a class's forward
            "import torch\nfrom typing import Optional\nimport transformers\n"
            "def xformers_forward(self, x, attention_mask: Optional[torch.Tensor] = None):\n"
            "    if attention_mask is None or attention_mask[0, 0, 0, 1] == 0:\n        x = x * 2\n    return x\n"
            "def replace_llama_attn():\n"
            "    transformers.models.llama.modeling_llama.LlamaAttention.forward = xformers_forward\n",
            lines=[5],
        ),
        Invalid(  # k-diffusion's ancestral samplers: a name unpacked from what the module's function returns
            "import torch\ndef ancestral_step(sigma_from, sigma_to):\n"
            "    sigma_up = (sigma_to ** 2 * (sigma_from ** 2 - sigma_to ** 2) / sigma_from ** 2) ** 0.5\n"
            "    return (sigma_to ** 2 - sigma_up ** 2) ** 0.5, sigma_up\n"
            "def sample(model, x, n):\n    sigmas = torch.linspace(1.0, 0.0, n, device=x.device)\n"
            "    for i in range(n - 1):\n        x = model(x, sigmas[i])\n"
            "        sigma_down, sigma_up = ancestral_step(sigmas[i], sigmas[i + 1])\n"
            "        if sigma_down == 0:\n            break\n    return x\n",
            lines=[10],
        ),
        Invalid(  # whisper: the decoder may be greedy, whose `completed` is a tensor, or beam search, whose is a bool
            "import torch\nclass GreedyDecoder:\n    def update(self, tokens, logits):\n"
            "        return tokens, (logits.argmax(-1) == 0).all()\nclass BeamSearchDecoder:\n"
            "    def update(self, tokens, logits):\n        return tokens, all(len(t) > 4 for t in tokens)\n"
            "class DecodingTask:\n    def __init__(self, beam):\n"
            "        self.decoder = BeamSearchDecoder() if beam else GreedyDecoder()\n"
            "    def run(self, tokens):\n        for i in range(224):\n            logits = self.model(tokens)\n"
            "            tokens, completed = self.decoder.update(tokens, logits)\n            if completed:\n"
            "                break\n",
            lines=[15],
        ),
        Invalid(  # CenterNet's focal loss: the module's function, held by the loss module and called from forward
            "import torch\nfrom torch import nn\ndef _neg_loss(pred, gt):\n    pos = gt.eq(1).float()\n"
            "    num_pos = pos.sum()\n    loss = (torch.log(pred) * pos).sum()\n    if num_pos == 0:\n"
            "        return -loss\n    return -loss / num_pos\nclass FocalLoss(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.neg_loss = _neg_loss\n    def forward(self, out, target):\n"
            "        return self.neg_loss(out, target)\n",
            lines=[7],
            message="in `_neg_loss()`, called from forward()",
        ),
        Invalid(  # a parameter annotated as a tensor (lit-llama's input_pos)
            "import torch\nfrom typing import Optional\nclass Attention(torch.nn.Module):\n"
            "    def forward(self, x, input_pos: Optional[torch.Tensor] = None):\n"
            "        if input_pos is not None and input_pos[-1] >= self.max_len:\n            x = x[:1]\n        return x\n",
            lines=[5],
        ),
        Invalid(  # fairseq's speech generator: the model runs through a forward_* method
            "import torch\nfor step in range(max_iter):\n    out, eos, extra = model.forward_decoder(prev, encoder_out=enc)\n"
            "    finished = finished | (torch.sigmoid(eos) > 0.5)\n    if finished.all():\n        break\n",
            lines=[5],
            message="a step loop",
        ),
        Invalid(  # a stop test in a helper the decoding loop's `while` calls every step
            "import torch\ndef decode(model, ids, eos, n):\n    def should_stop(tok):\n        if (tok == eos).all():\n"
            "            return True\n        return ids.shape[1] >= n\n    while not should_stop(ids[:, -1:]):\n"
            "        ids = torch.cat([ids, torch.multinomial(model(ids)[:, -1].softmax(-1), 1)], 1)\n",
            lines=[4],
            message="`if` in `should_stop()`, called from a decoding loop",
        ),
        Invalid(  # the same, where forward asks for it
            "import torch\nclass Layer(torch.nn.Module):\n    def merge(self, safe_merge=False):\n"
            "        if safe_merge:\n            if not torch.isfinite(self.w + self.delta).all():\n"
            "                raise ValueError('NaN')\n        self.w += self.delta\n"
            "    def forward(self, x):\n        self.merge(True)\n        return x @ self.w\n",
            lines=[5],
            message="called from forward()",
        ),
        Invalid(  # improved-diffusion's loss-scale check, in a method the step loop calls
            "import torch as th\nclass TrainLoop:\n    def run_loop(self):\n        while True:\n"
            "            batch = next(self.data)\n            self.run_step(batch)\n    def run_step(self, batch):\n"
            "        self.model(batch).backward()\n        if self.use_fp16:\n            self.optimize_fp16()\n"
            "    def optimize_fp16(self):\n        if any(not th.isfinite(p.grad).all() for p in self.params):\n"
            "            self.scale -= 1\n",
            lines=[12],
            message="`if` in `optimize_fp16()`, called from a training loop,",
        ),
        Invalid(  # audiocraft: an instance kept on `self` is called every step, and so is its __call__
            "import torch\nclass PerStage:\n    def __call__(self, loss, step):\n        mask = step == 0\n"
            "        if mask.sum() > 0:\n            return (mask * loss).sum()\n        return loss\n"
            "class Solver:\n    def run(self, loader):\n        for batch in loader:\n"
            "            loss = self.per_stage(self.model(batch), batch)\n            loss.backward()\n"
            "    def build(self):\n        self.per_stage = PerStage()\n",
            lines=[5],
            message="`if` in `__call__()`, called from a loop over a DataLoader,",
        ),
        Invalid(
            "import torch\nimport torch.nn.functional as F\ndef generate(model, idx, eos):\n"
            "    done = torch.zeros(idx.size(0), dtype=torch.bool)\n    for _ in range(64):\n"
            "        nxt = torch.multinomial(F.softmax(model(idx)[:, -1], -1), 1)\n"
            "        done |= nxt.squeeze(1) == eos\n        if all(done):\n            break\n"
            "        if not torch.all(done) and nxt[0, 0] == eos:\n            break\n"
            "        if nxt.item() == eos:\n            break\n",
            lines=[8, 10, 12],
            message="`if` in a decoding loop depends on tensor values: a host sync every step",
        ),
        Invalid(
            "from torch.nn import functional as F\nwhile True:\n    loss = F.cross_entropy(model(x), y)\n"
            "    loss.backward()\n    opt.step()\n    if loss < 0.01:\n        break\n",
            lines=[6],
            message="in a training loop",
        ),
        Invalid(
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        if (x < 0).any():\n"
            "            x = x.clamp(min=0)\n        return x\n",
            lines=[4],
            message="`if` in forward()",
        ),
        Invalid(
            "import torch as T\nclass M(T.nn.Module):\n    def forward(self, x):\n"
            "        while x.abs().max() > 1:\n            x = x / 2\n        return x\n",
            lines=[4],
        ),
        Invalid(
            "from torch import equal\nclass M:\n    def forward(self, a, b):\n        return a if equal(a, b) else b\n",
            lines=[4],
        ),
        Invalid(
            "from torch.nn import Module as Base\nimport torch.nn\nclass M(Base):\n    def forward(self, x):\n"
            "        has_nan = torch.isnan(x).any()\n        assert not has_nan\n"
            "        if bool(x.sum()) and x.item() != 0:\n            pass\n        return x\n",
            lines=[6, 7],
        ),
        Invalid(  # YOLO's NMS: the number of boxes a mask or nms leaves, read every step
            "import torch\nimport torchvision\ndef nms(prediction, conf, max_det):\n    for x in prediction:\n"
            "        x = x[x[..., 4] > conf]\n        if not x.shape[0]:\n            continue\n"
            "        n = x.size(0)\n        if not n:\n            continue\n"
            "        i = torchvision.ops.nms(x[:, :4], x[:, 4], 0.5)\n        if len(i) > max_det:\n"
            "            i = i[:max_det]\n"
            "def detect(model, loader):\n    for imgs in loader:\n        nms(model(imgs), 0.5, 300)\n",
            lines=[6, 9, 12],
        ),
        Invalid(  # LitGPT's speculative decoding: each pass drafts k tokens in a loop of their own and
            # carries the last token on, so the `while` loop decodes too
            "import torch\ndef speculate(draft, target, token, k):\n    drafted = []\n    for _ in range(k):\n"
            "        token = draft(token).argmax(-1)\n        drafted.append(token)\n"
            "    keep = torch.rand(1) <= target(token).max()\n    if not keep:\n        return drafted[:1]\n"
            "    return drafted\n"
            "def generate(draft, target, token, limit):\n    pos = 0\n    while pos < limit:\n"
            "        new = speculate(draft, target, token, 4)\n        token = new[-1]\n        pos += len(new)\n",
            lines=[8],
            message="called from a decoding loop",
        ),
    ]

    def visit_If(self, node: cst.If) -> None:
        self._check(node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._check(node)

    def visit_Assert(self, node: cst.Assert) -> None:
        function = enclosing_function(self.ctx.ancestors)
        if function is not None and function.name.value.startswith("test"):
            return  # a test's assertions are what it runs for, on whatever device it picks
        self._check(node)

    def visit_CompIf(self, node: cst.CompIf) -> None:
        self._check(node)

    def visit_For(self, node: cst.For) -> None:
        """A loop as long as what a mask or `nonzero` left (GroundingDINO's `for i in
        range(idxs.shape[0]):` after `idxs = torch.nonzero(mask)`) or as a tensor's value
        (LLaVA's `range(num_images + 1)`): the count is read back, and the loop unrolls into a
        different graph for each."""
        where = self.step_context(self.ctx.ancestors)
        if where is None:
            return
        iterated = node.iter
        called = iterated if type(iterated) is cst.Call and patterns.dotted(iterated.func) == "range" else None
        path = (*self.ctx.ancestors, node)
        if called is not None:  # `range(num_images + 1)` after `num_images = (ids == IMAGE).sum()` reads it back
            counted = any(
                _reads_data_shaped_size(self.ctx, arg.value, path) or _counts_tensor_value(self.ctx, arg.value)
                for arg in called.args
            )
        else:
            counted = shaped_by_data(self.ctx, iterated, path) and not in_host_memory(self.ctx, iterated)
        if counted:
            effect = _effect(where)
            self.report_in_step(iterated, where, lambda: True, kind=_KINDS[cst.For], effect=effect)

    def _check(self, node: cst.If | cst.While | cst.IfExp | cst.Assert | cst.CompIf) -> None:
        if _asks_the_host(node.test):
            return  # most tests: no need to ask where they run
        where = self.step_context(self.ctx.ancestors)
        if isinstance(node, cst.While) and self.ctx.flow is not None and not self.ctx.project.complete:
            where = self.ctx.flow.loop_step(node) or where  # its test runs before each of its own steps
        if where is None:
            return
        test = node.test
        if where not in TRACED and isinstance(test, cst.BooleanOperation) and periodic(test.left):
            return  # `if step % N == 0 and loss.item() > x:` reads every N steps
        effect = _effect(where)
        lines = _by_line(test)
        for line in lines if len(lines) > 1 else [[test]]:
            path = (*self.ctx.ancestors, node)
            sized = any(_reads_data_shaped_size(self.ctx, part, path) for part in line)  # where the walk is
            holds = partial(_tests_device_values, self.ctx, line, sized)
            self.report_in_step(line[0], where, holds, kind=_KINDS[type(node)], effect=effect)


def _effect(where: str | cst.FunctionDef) -> str:
    """What a read of tensor values costs there: a graph break in forward(), a sync in a step loop."""
    return "a host sync and a graph break" if where in TRACED else "a host sync every step"


def _tests_device_values(ctx: FileContext, parts: list[cst.BaseExpression], sized: bool) -> bool:
    """Whether the parts of a test on one line read tensor values (`sized`: the size of a
    tensor shaped by data, found where the walk was)."""
    return sized or any(
        tests_tensor_value(ctx, part, read_back=False) and not _reads_host_memory_only(ctx, part) for part in parts
    )


def _counts_tensor_value(ctx: FileContext, count: cst.BaseExpression) -> bool:
    """Whether a loop's count is a number read from a tensor on the device (`num_images + 1`
    after `num_images = (ids == IMAGE).sum()`)."""
    read = reads_tensor_scalar(ctx, count) or tensor_valued(ctx, count)
    return read and not in_host_memory(ctx, count)


def _reads_data_shaped_size(ctx: FileContext, test: cst.BaseExpression, path: Sequence[cst.CSTNode]) -> bool:
    """Whether a test reads the size of a tensor whose shape depends on tensor values (YOLO's
    `if not x.shape[0]:` after `x = x[x[:, 4] > conf]`, `n = len(keep)` after `keep = nms(...)`):
    that size is known only once the device has computed it. `path`: the nodes from the module
    down to the test's statement."""
    return any(_data_shaped_size(ctx, operand, path, 0) for operand in _operands(test, identity=False))


def _data_shaped_size(ctx: FileContext, node: cst.BaseExpression, path: Sequence[cst.CSTNode], depth: int) -> bool:
    if type(node) is cst.Name and depth < 2:
        return any(_data_shaped_size(ctx, value, path, depth + 1) for value in values_reaching(ctx, node, path))
    sized = None  # the first dimension, which a mask or a selection sets
    if type(node) is cst.Subscript and type(node.value) is cst.Attribute and node.value.attr.value == "shape":
        sized = node.value.value if _first(node.slice) else None  # `x.shape[0]`
    elif type(node) is cst.Call and patterns.method_name(node) == "size" and _first(node.args):
        sized = node.func.value  # type: ignore[attr-defined]
    elif type(node) is cst.Call and patterns.method_name(node) == "numel":
        sized = node.func.value  # type: ignore[attr-defined]
    elif type(node) is cst.Call and patterns.dotted(node.func) == "len" and len(node.args) == 1:
        sized = node.args[0].value
    return sized is not None and shaped_by_data(ctx, sized, path) and not in_host_memory(ctx, sized)


def _by_line(
    test: cst.BaseExpression, newline: bool = False, found: list[list[cst.BaseExpression]] | None = None
) -> list[list[cst.BaseExpression]]:
    """The values a test joins with `and`, `or` and `not`, grouped by the line each starts
    (bark's `if stop and (\n nxt == EOS\n or probs[-1] >= p\n):`): each is read on the host
    in turn, and a test written over several lines is reported on each line that reads one.
    `newline`: whether a line break comes right before `test`."""
    found = [] if found is None else found
    newline = newline or any(_breaks(paren.whitespace_after) for paren in test.lpar)
    if isinstance(test, cst.BooleanOperation):
        _by_line(test.left, newline, found)
        operator = test.operator
        _by_line(test.right, _breaks(operator.whitespace_before) or _breaks(operator.whitespace_after), found)
    elif isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        _by_line(test.expression, newline or _breaks(test.operator.whitespace_after), found)
    elif newline or not found:
        found.append([test])
    else:
        found[-1].append(test)
    return found


def _first(items: Sequence[cst.SubscriptElement] | Sequence[cst.Arg]) -> bool:
    """`[0]` or `(0)`: the first dimension."""
    if len(items) != 1:
        return False
    item = items[0]
    value = item.value if isinstance(item, cst.Arg) else item.slice.value if isinstance(item.slice, cst.Index) else None
    return isinstance(value, cst.Integer) and value.value == "0"


def _breaks(whitespace: cst.BaseParenthesizableWhitespace) -> bool:
    return isinstance(whitespace, cst.ParenthesizedWhitespace)


def _reads_host_memory_only(ctx: FileContext, test: cst.BaseExpression) -> bool:
    """Whether every tensor a test reads is in host memory (`if not correct[i]:` after
    `correct = (pred == gt).cpu()`; CaiT's `if all(to_drop):` after `to_drop =
    torch.zeros(n).uniform_() < p`): Python reads it there without waiting; the copy is the
    sync, and host-sync-in-step reports it where it is made."""
    operands = [builtin_call(ctx, each, ("all", "any", "bool")) or each for each in _operands(test)]
    read = [operand for operand in operands if tests_tensor_value(ctx, operand)]
    return bool(read) and all(in_host_memory(ctx, operand) for operand in read)


def _asks_the_host(test: cst.BaseExpression) -> bool:
    """A test that reads no tensor by its form alone: `x is None`, `mode == "train"`,
    `isinstance(x, list)`, `self.training`, and those joined by `and`, `or`, `not`."""
    if type(test) is cst.BooleanOperation:
        return _asks_the_host(test.left) and _asks_the_host(test.right)
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _asks_the_host(test.expression)
    if type(test) is cst.Comparison:
        sides = (test.left, *(link.comparator for link in test.comparisons))
        identity = all(type(link.operator) in (cst.Is, cst.IsNot) for link in test.comparisons)
        return identity or any(type(side) in _TEXT for side in sides)
    if type(test) is cst.Call:
        return type(test.func) is cst.Name and test.func.value in _PREDICATES
    return type(test) is cst.Attribute and test.attr.value == "training"


def _operands(test: cst.BaseExpression, identity: bool = True) -> Iterator[cst.BaseExpression]:
    """The values a test combines with `and`, `or`, `not` and comparisons (without `identity`,
    not those of `is`/`is not` comparisons: `mask is not None` reads no value)."""
    if isinstance(test, cst.BooleanOperation):
        yield from _operands(test.left, identity)
        yield from _operands(test.right, identity)
    elif isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        yield from _operands(test.expression, identity)
    elif isinstance(test, cst.Comparison):
        if not identity and all(type(link.operator) in (cst.Is, cst.IsNot) for link in test.comparisons):
            return
        for part in (test.left, *(link.comparator for link in test.comparisons)):
            yield from _operands(part, identity)
    else:
        yield test
