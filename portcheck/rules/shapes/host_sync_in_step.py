from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial

import libcst as cst

from portcheck import flow, patterns
from portcheck.resolve import Scope
from portcheck.rule import FileContext, Invalid, Valid
from portcheck.rules.shapes import (
    SYNC_SEVERITY,
    StepRule,
    builtin_call,
    controlling_part,
    filling_in,
    in_host_memory,
    makes_instance,
    off_host_at_end,
    read_in_host_memory,
    reads_names,
    reads_tensor_value,
    tensor_method,
    tensor_valued,
    tests_tensor_value,
)
from portcheck.walk import descendants

_SYNCS = frozenset({"item", "tolist", "cpu", "numpy"})
# What writes a host copy out (an image, an array or audio file): the copy is the output's cost.
_WRITERS = frozenset(
    {
        "PIL.Image.fromarray", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt",
        "cv2.imwrite", "imageio.imwrite", "imageio.imsave", "imageio.mimwrite", "imageio.mimsave",
        "imageio.v2.imwrite", "imageio.v3.imwrite", "skimage.io.imsave", "matplotlib.pyplot.imsave",
        "torchvision.utils.save_image", "torchaudio.save", "soundfile.write", "scipy.io.wavfile.write",
    }
)  # fmt: skip
_HAND_OFF_CONTEXTS = flow.TRACED | {"a step loop"}  # no training, no decoding
_WHOLE_COPIES = frozenset({"`.numpy()`", "`.cpu()`", '`.to("cpu")`'})  # what an output leaves by
_NO_AUTOGRAD = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad",
     "torch.autograd.grad_mode.inference_mode"}
)  # fmt: skip
_FROM_NUMPY = frozenset({"torch.from_numpy", "torch.tensor", "torch.as_tensor"})
_CONVERSIONS = ("int", "float", "bool")  # of a tensor: `.item()` by another name
_SCALER_NAME = re.compile(r"scaler$", re.IGNORECASE)  # `scaler`, `loss_scaler`, `self.grad_scaler`
_VALUE_REDUCTIONS = frozenset({"sum", "max", "min", "mean", "amax", "amin", "norm", "prod"})  # each a 0-dim tensor
_SCALAR_LOGGERS = frozenset({"add_scalar"})  # TensorBoard's SummaryWriter (torch.utils.tensorboard, tensorboardX)
_MATH = frozenset(
    f"math.{name}"
    for name in ("isnan", "isinf", "isfinite", "sqrt", "exp", "log", "log2", "log10", "floor", "ceil", "fabs")
)
# Arguments that torch reads as Python numbers, (position, keyword): a tensor there is read on
# the host, an implicit `.item()` (`torch.full(size, alphas[t])`, `one_hot(y, n_classes)`).
_NUMBER_ARGUMENTS = {
    "torch.full": ((1, "fill_value"),),
    "torch.full_like": ((1, "fill_value"),),
    "torch.arange": ((0, "start"), (1, "end"), (2, "step")),
    "torch.nn.functional.one_hot": ((1, "num_classes"),),
    "torch.randint": ((0, "low"), (1, "high")),
}


class HostSyncInStep(StepRule):
    """## What it does
    Reports `.item()`, `.tolist()`, `.cpu()`, `.to("cpu")` (also `.to(cpu_device)` where
    `cpu_device = torch.device("cpu")`), `.numpy()`, `int()`, `float()`,
    `bool()` of a tensor (a buffer the module registers, `int(self.queue_ptr)`, whatever value
    it is registered with), `min()` / `max()` comparing one (`min(self.decay, n / 10)`), a
    tensor formatted into text (`f"{loss:.4f}"`, `"%.4g" % (*mloss,)`, `"{:.6f}".format(norm)`)
    or printed (`print(pre_norm)`) or logged as a number (`writer.add_scalar("loss", loss,
    step)`, `writer.add_scalars("Loss", {"train": loss}, step)`, `wandb.log({"loss": loss})`),
    a tensor given where torch or Python reads a number (`torch.full(size, alphas[t])`'s fill
    value, an item of the list `torch.tensor([t])` is made of, `torch.arange`'s and `range`'s
    bounds, `F.one_hot`'s `num_classes`, `torch.randint`'s bounds, `math.isnan(grad_norm)`; a
    length a function fills in from a tensor where a call leaves it out: glow-tts'
    `sequence_mask(length)` with `if max_length is None: max_length = length.max()`; a read
    in such a fill-in counts only where a call of the module leaves the length out, or the
    module makes none),
    and a GradScaler's scale read as a
    number (`scaler.get_scale()`, `scaler.state_dict()["scale"]`) where they run every step. That is step
    code:
    - a module's `forward`, and a method a framework runs every step (Lightning's
      `training_step` and batch hooks, the Hugging Face Trainer's `compute_loss`, MMEngine's
      `train_step` and `forward_train`, a torchmetrics `Metric`'s `update`, an `Optimizer`'s
      `step` (D-Adaptation's `.item()` per parameter); the `__call__` of a
      `StoppingCriteria` or `LogitsProcessor` and the `put` of a streamer (`BaseStreamer`,
      `TextStreamer`), run for every generated token);
    - a step loop: a `for` loop over a DataLoader (a name bound to `DataLoader(...)`, or one
      that says "loader", also wrapped: `pbar = tqdm(loader)`), or any `for` or `while` loop
      that trains (`.backward()`, an optimizer's `.step()`), evaluates (calls the model or a
      predictor's `predict_*()`, a diffusers pipeline's `pipe.unet(...)` or
      `pipeline.transformer(...)`, `next(...)` or a batch getter, or something it was given with
      data sent to a device: `inception(img)` after `img = img.to(device)`) or decodes (samples
      tokens: an `argmax` or `topk` whose pick feeds the next pass, a sampler given the logits,
      `sampler.sample(logits=logits)`; or a `while` loop calls layers its class made:
      tacotron2's `self.prenet(x)`), in
      its body or `while` test, or batches by hand (`for i in range(0, n, chunk):` slicing
      `x[i : i + chunk]`, DINO's k-NN evaluation),
      directly or through the module's functions and the methods of its class (Mamba's
      `get_logits()`, segment-anything's `self._process_batch()`; not one with a step loop of
      its own, which makes an epoch loop, nor a `for` loop calling a function that runs one:
      `for i in range(num_samples): y = generate(...)` reads each sample back once; an
      evaluation over a DataLoader every N steps, `if is_eval_step:`, leaves the loop around
      it a step loop);
    - a generator's body (a function that yields, a class's `__iter__`) where a step loop
      draws its items: `for x, y in loader:` where `loader = batches(data)` or an instance of
      the class (airbench's `CifarLoader`), `x, y = next(loader)` in the loop;
    - the module's functions that step code calls every step (`self.log_step()` from the loop,
      a loss helper from `forward`, and what they call in turn; a method through `self.` in its
      own class, or on an object of the module's classes: `self.decoder.update(...)` where
      `self.decoder` is made `GreedyDecoder()` or `BeamSearchDecoder()`, `for f in
      self.filters: f.apply(...)`, a base class's method where the subclass has none); not what
      runs only `if flag:` where the flag defaults to False or None and the calls leave it so;
    - the functions and methods of the repository's other modules that step code calls, and
      what those call in their own module: `utils.clip_gradients(model)` (also by the name a
      package re-exports it by: `dist.all_gather(comm)`, defined in `distributed/distributed.py`),
      `metric_logger.update(acc=acc)`, `self.mp_trainer.optimize(opt)` where `self.mp_trainer =
      MixedPrecisionTrainer(...)` (also `given or Default()`, narrowed by `isinstance`, or made
      by a function of the module: tacotron2's `model = load_model(h)`, which returns
      `Tacotron2(h).cuda()`), and
      an object called (`compute_loss(pred, targets)` runs `ComputeLoss.__call__`); what runs
      there only `if isinstance(v, torch.Tensor):` counts where a call passes a tensor, and a
      number read so is reported at such a call too (ConvNeXt's `metric_logger.update(
      class_acc=class_acc)`), where a port keeps the value on the device;
    - a function handed to another module's function that calls it, or hands it on, every
      step: Megatron's `forward_step`, given to `pretrain()`, which passes it to `train()`,
      whose training loop hands it to `train_step()`.

    Left alone: calls on the error path (in a `raise` or an assertion's message, or an `if` body
    that ends raising or with `sys.exit()`, or that runs only once values have gone NaN or
    infinite: `if x.isnan().any():`, `if not torch.isfinite(loss):`), only while the model is exported (`if
    torch.onnx.is_in_onnx_export():`, `torch.jit.is_tracing()`), under an `if step % N == 0:`
    or a predicate of the module that returns True only so (an image logger's
    `if self.check_frequency(idx):`), once per interval of time (`if time.time() - last >
    60:`) or of steps counted from the last pass (`if step - last_save >= N:` that sets
    `last_save = step`), but not a block that steps the optimizer (gradient accumulation's
    `if step % accum == 0: optimizer.step()` is the step) (reading back every N steps, also
    where a function is called; not in a step loop of its own there, such as an evaluation
    every N steps) or an `if i < 3:` / `if i == 0:` on the loop's
    index, a count it keeps or a parameter named for the step (`batch_idx`: the first steps
    only); those that decide a branch (PC504) or a slice length (PC505); and those on NumPy
    arrays (made by `numpy` or `.numpy()`) or on tensors in host memory (copied there, made from
    Python data where nothing sets a default device, or in a dataset's methods, a collate
    function or a data transform: a torchvision transform's subclass, or an `nn.Module` of a
    module that uses torchvision's transforms and makes no layer or model; a loader's batch
    items the loop leaves there while it moves others to the device; the items of a host
    tensor), which live on the host. Info: a copy written out (given to
    `Image.fromarray`, `np.save`, `cv2.imwrite`, `torchaudio.save`... directly or through the
    name it is bound to in the same function), `.numpy()` in forward() or in a loop that
    runs the model without training or decoding (a sampling script), and a whole tensor copied
    (`.cpu()`, `.to("cpu")`, `.numpy()`) with autograd off (`torch.no_grad()`,
    `torch.inference_mode()`) there or in a loop over a DataLoader, or in such a loop that
    takes no training step (an evaluation), also in a function the module calls only there
    (BasicSR's `get_current_visuals()`): the tensor leaves torch there, mostly as an output
    (an image, a file, another runtime's input, predictions kept) whose copy is its cost; not
    where the same function makes a tensor of NumPy data on a device again (vits' monotonic
    alignment: `.numpy()`, a Cython search, `torch.from_numpy(path).to(device)`), nor where
    it keeps the copies in a list that it sends back to a device (BLIP's retrieval
    evaluation: `image_feats.append(image_feat.cpu())`, later `image_feats[idx].to(device)`),
    a round trip every step.

    ## Why is this bad?
    Each call copies a value to the host and waits for the device to finish everything queued
    before it. On lazy and compiled backends (XLA, TorchTPU, Trainium, Gaudi) it also cuts the
    step's graph in two: Dynamo breaks at `.item()` by default, XLA executes the pending graph
    (`aten::_local_scalar_dense`), and on Neuron it blocks fusion. `.tolist()` values become
    constants that recompile when they change.

    ## Example
    ```python
    for images, labels in loader:
        loss = criterion(model(images), labels)
        running_loss += loss.item()
    ```

    ## Use instead
    ```python
    running_loss = torch.zeros((), device=device)
    for images, labels in loader:
        loss = criterion(model(images), labels)
        running_loss += loss.detach()
    print(running_loss.item())  # once, after the loop or every N steps
    ```

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; info on mps, xpu and rocm, where it
    is only a sync; off on cpu, which computes on the host: nothing to copy or wait for.
    Off for the targets whose device type a branch for other devices keeps out (`if mps:`
    where `mps = "mps" in x.device.type`; not a CUDA branch, which a port may open to them).

    ## Fix safety
    No automatic fix: where the value is read back is a design decision.
    """

    code = "PC503"
    name = "host-sync-in-step"
    message = "{call} in {where} copies a tensor to the host and waits for the device every step"
    hint = "keep values on the device (accumulate tensors, use torch.where) and read them back every N steps"
    severity = SYNC_SEVERITY
    triggers = (
        b".item",
        b"tensor([",
        b".tolist",
        b".cpu",
        b".numpy",
        b"'cpu'",
        b'"cpu"',
        b"register_buffer",
        b".format(",
        b"math.",
        b"add_scalar",
        b"wandb",
        b"print(",
        b"get_scale",
        b"max(",
        b"min(",
        b'["scale"]',
        b"['scale']",
    )

    VALID = [
        Valid(  # nanotron: the loop binds `self.iteration_step`; the interval read through `self` is no item of it
            "import torch\nclass Trainer:\n    def train(self, loader):\n        for self.step in range(100):\n"
            "            loss = self.model(next(loader)).sum()\n            loss.backward()\n            self.optimizer.step()\n"
            "            if self.step % self.config.log_interval == 0:\n                print(loss.item())\n"
        ),
        Valid(  # DeepSpeed's ViT example: an epoch loop handing a device module to epoch functions defined below it
            "import torch\ndef main(train_loader, model, optimizer):\n    criterion = torch.nn.CrossEntropyLoss().cuda()\n"
            "    for epoch in range(10):\n        acc = train(train_loader, model, criterion, optimizer)\n"
            "        print(acc.item())\n"
            "def train(loader, model, criterion, optimizer):\n    for images, target in loader:\n"
            "        loss = criterion(model(images), target)\n        loss.backward()\n        optimizer.step()\n"
            "    return loss\n"
        ),
        Valid(  # OLMo's trainer: the best so far, kept from itself and a number
            "import time\nimport torch\nclass Trainer:\n    def fit(self, loader):\n        for batch in loader:\n"
            "            start = time.time()\n            self.model(batch).sum().backward()\n            self.optim.step()\n"
            "            self.last = time.time() - start\n            self.best = min(self.best, self.last)\n"
        ),
        Valid(  # OLMo: a name bound to the class's predicate, true every N steps
            "import torch\nclass Trainer:\n    def should_log(self):\n        if self.wandb is None:\n"
            "            return False\n        return self.global_step % self.interval == 0\n"
            "    def fit(self, loader):\n        for batch in loader:\n            loss = self.model(batch)\n"
            "            loss.backward()\n            log_now = self.should_log()\n            if log_now:\n"
            "                print(loss.item())\n"
        ),
        Valid(  # stable-audio-tools' demo callback: it leaves unless the step is a multiple of N
            "import torch\nimport pytorch_lightning as pl\nclass Demo(pl.Callback):\n"
            "    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):\n"
            "        if (trainer.global_step - 1) % self.demo_every != 0 or self.last == trainer.global_step:\n"
            "            return\n        try:\n            log_image(trainer.logger, module.sample(batch).cpu())\n"
            "        except Exception:\n            pass\n"
        ),
        Valid(  # audiocraft's diffusion U-Net: a step that is no tensor made into one
            "import torch\nclass UNet(torch.nn.Module):\n    def forward(self, x, step: torch.Tensor):\n"
            "        if type(step) is torch.Tensor:\n            t = step\n        else:\n"
            "            t = torch.tensor([step], device=x.device).expand(x.size(0))\n"
            "        if not isinstance(step, torch.Tensor):\n            t = torch.tensor([step])\n        return x * t\n"
        ),
        Valid(  # StyleTTS2: reconstructions of the last batch's samples once per epoch, after its training loop
            "import torch\ndef main(model, loader, opt, epochs):\n    for epoch in range(epochs):\n"
            "        for texts, lengths in loader:\n            asr = model.encode(texts)\n"
            "            model(texts).backward()\n            opt.step()\n        with torch.no_grad():\n"
            "            for bib in range(len(asr)):\n                n = int(lengths[bib].item())\n"
            "                sample = model.decoder(asr[bib])\n"
        ),
        Valid(  # GPTQ's Catcher: a forward that records the first layer's inputs and stops the model
            "import torch\nfrom torch import nn\nclass Catcher(nn.Module):\n    def forward(self, inp, **kwargs):\n"
            "        cache['masks'].append(kwargs['attention_mask'].detach().cpu())\n        raise ValueError\n"
        ),
        Valid(  # a `get_scale()` of something that is no GradScaler: an augmentation's scale, a number
            "import torch\ndef train(model, loader, opt, aug):\n    for x, y in loader:\n"
            "        x = aug(x) * aug.get_scale()\n        model(x, y).backward()\n        opt.step()\n"
        ),
        Valid(  # CenterNet: the debug view runs only with --debug
            "import torch\ndef run_epoch(model, loader, opt, optimizer):\n    for iter_id, batch in enumerate(loader):\n"
            "        output = model(batch['input'].cuda())\n        loss = output.sum()\n        loss.backward()\n"
            "        optimizer.step()\n        if opt.debug > 0:\n            print(output.detach().cpu().numpy())\n"
        ),
        Valid(  # hifi-gan: printed only where the values are off (the test is the sync, PC504's)
            "import torch\nfor x, y in loader:\n    if torch.min(y) < -1.0:\n        print('min value is ', torch.min(y))\n"
            "    loss = model(x.cuda(), y.cuda())\n    loss.backward()\n"
        ),
        Valid(  # PointNet: the batch is augmented in NumPy before the loop moves it to the device
            "import torch\ndef train(loader, model, opt, args):\n"
            "    for batch_id, (points, target) in enumerate(loader, 0):\n        points = points.data.numpy()\n"
            "        points = torch.Tensor(shift(points))\n        if not args.use_cpu:\n"
            "            points, target = points.cuda(), target.cuda()\n"
            "        model(points, target).backward()\n        opt.step()\n"
        ),
        Valid(  # torchvision's references: a module of transforms, which run in the data pipeline
            "import torch\nfrom torchvision.transforms import functional as F\nclass RandomCutmix(torch.nn.Module):\n"
            "    def forward(self, batch, target):\n        if not batch.is_floating_point():\n"
            "            batch = batch.float()\n        _, h, w = F.get_dimensions(batch)\n"
            "        cut = int(target.float().mean().item() * h)\n        batch[:, :, :cut] = batch.roll(1, 0)[:, :, :cut]\n"
            "        return batch, target\n"
        ),
        Valid(  # a class made of device data is no model run; nor a function given host data
            "import torch\nfor b in sizes:\n    z = torch.randn(b, 512, device=device)\n    stats = Summary(z)\n"
            "    y = process(b)\n    print(z.sum().item())\n"
        ),
        Valid(  # EDM's seeds: a Click command's parameter is command-line data, so its tensor is in host memory
            "import click\nimport torch\n@click.command()\n@click.option('--seeds', type=parse_int_list)\n"
            "def main(seeds, device):\n    for batch_seeds in torch.as_tensor(seeds).tensor_split(4):\n"
            "        images = net(torch.randn([len(batch_seeds), 3], device=device))\n"
            "        for seed in batch_seeds:\n            print(f'{seed:06d}')\n"
        ),
        Valid(  # YOLOX: copies made only in the out-of-memory retry, where the call gives `mode="cpu"`
            "import torch\nclass Head(torch.nn.Module):\n    def forward(self, x):\n        try:\n"
            "            return self.assign(x)\n        except RuntimeError:\n"
            "            torch.cuda.empty_cache()\n            return self.assign(x, mode='cpu')\n"
            "    def assign(self, x, mode='gpu'):\n        if mode == 'cpu':\n            x = x.cpu().float()\n"
            "        return x * 2\n"
        ),
        Valid(  # numbers logged
            "import torch\nimport wandb\nfor x, y in train_loader:\n    loss = model(x, y)\n    loss.backward()\n"
            "    writer.add_scalar('lr', optimizer.param_groups[0]['lr'], step)\n    wandb.log({'step': step})\n"
        ),
        Valid(  # numbers formatted, and Python's math of numbers
            "import math\nimport torch\nfor batch in train_loader:\n    loss = model(batch)\n    loss.backward()\n"
            "    print('step {} of {}'.format(i, n), math.sqrt(n))\n"
        ),
        Valid(  # a callback given to a function that calls it once, not in its loop
            "import torch\ndef apply(fn, x, n):\n    for i in range(n):\n        x = model(x)\n    return fn(x)\n"
            "def run(x):\n    def report(y):\n        return y.sum().item()\n    apply(report, x, 3)\n"
        ),
        Valid(  # vicreg: logging throttled by the clock reads back once per interval
            "import time\nimport torch\nlast = time.time()\nfor x, y in loader:\n    loss = model(x, y)\n"
            "    loss.backward()\n    optimizer.step()\n    now = time.time()\n"
            "    if now - last > 60:\n        print(loss.item())\n        last = now\n"
        ),
        Valid(  # stable-diffusion's image logger: its predicate says yes every N steps
            "import torch\nfrom pytorch_lightning.callbacks import Callback\nclass ImageLogger(Callback):\n"
            "    def check_frequency(self, idx):\n        if idx % self.batch_freq == 0 and idx > 0:\n"
            "            return True\n        return False\n    def log_img(self, pl_module, batch, idx):\n"
            "        if self.check_frequency(idx):\n            images = pl_module.log_images(batch)\n"
            "            for k in images:\n                images[k] = images[k].detach().cpu()\n"
            "    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):\n"
            "        self.log_img(pl_module, batch, batch_idx)\n"
        ),
        Valid(  # a running number that starts as a number and stays one (the actor-critic example)
            "import torch\nrunning = 10.0\nbaseline = torch.zeros(1).cpu()\nfor episode in range(n):\n"
            "    reward = run_episode(model)\n"
            "    model.update()\n    opt.step()\n    running = 0.05 * reward + 0.95 * running\n"
            "    start = 0\n    for k in sizes:\n        end = start + k\n        start = end\n"
            "    print(f'{running:.2f} {start}')\n"
        ),
        Valid(  # only while the model is exported to ONNX or traced
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        n = x.sum(0)\n"
            "        if torch.onnx.is_in_onnx_export():\n            n = torch.from_numpy(n.cpu().numpy()).to(x.device)\n"
            "        if torch.jit.is_tracing() and x.dim() > 2:\n            print(n.item())\n        return x / n\n"
        ),
        Valid(  # the first step only, counted by the framework's own parameter
            "import torch\nimport lightning as L\nclass M(L.LightningModule):\n"
            "    def training_step(self, batch, batch_idx):\n        out = self.model(batch)\n"
            "        if batch_idx == 0:\n            self.logger.log_image(out.cpu())\n        return out.mean()\n"
        ),
        Valid("import torch\nfor batch in loader:\n    loss = step(batch)\nprint(loss.item())\n"),
        Valid(  # Python numbers where torch takes them
            "import torch\nfor i in range(steps):\n    x = model(x)\n    a = torch.full((4, 1), 0.5 * i)\n"
            "    y = torch.arange(x.shape[0], device=x.device)\n    for k in range(len(x)):\n        pass\n"
        ),
        Valid(
            "import torch\nfor i, batch in enumerate(loader):\n    loss = step(batch)\n"
            "    if i % log_interval == 0 or last:\n        print(loss.item())\n"
        ),
        Valid(
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, ids):\n"
            "        if torch.any(ids < 0):\n            raise ValueError(f'bad ids {ids.tolist()}')\n        return ids\n"
        ),
        Valid("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x.sum()\n"),
        Valid(  # a loop over a range that runs the class's layers on the same input: no pass goes on from another
            "import torch\nclass Probe(torch.nn.Module):\n    def __init__(self):\n        self.head = torch.nn.Linear(4, 4)\n"
            "    def scores(self, x, n):\n        found = []\n        for i in range(n):\n"
            "            found.append(self.head(x[i]).sum().item())\n        return found\n"
        ),
        Valid(  # GPT-SoVITS: the CPU is where the module runs its model, so the batch moved there stays put
            "import torch\ndevice = 'cpu'\ndef train(loader, rank):\n    net = Net(4).to(device)\n"
            "    for batch_idx, data in enumerate(loader):\n        x, y = data\n        if torch.cuda.is_available():\n"
            "            x, y = x.cuda(rank), y.cuda(rank)\n        else:\n            x, y = x.to(device), y.to(device)\n"
            "        net(x, y).backward()\n"
        ),
        Valid(  # a method the optimizer's step does not run
            "import torch\nclass DAdaptAdam(torch.optim.Optimizer):\n    def describe(self):\n"
            "        return [p.norm().item() for g in self.param_groups for p in g['params']]\n"
        ),
        Valid(  # modded-nanogpt: a parameter given a tensor that a function read into host memory
            "import torch\ndef load(path):\n    tokens = torch.empty(10, dtype=torch.uint16, pin_memory=True)\n"
            "    return tokens\nclass Shard:\n    def __init__(self, tokens):\n"
            "        self.bos = (tokens == 1).nonzero()[:, 0].numpy()\n"
            "def batches(path):\n    shard = Shard(load(path))\n    while True:\n        yield shard\n"
            "loader = batches('x')\nfor step in range(100):\n    model(next(loader)).backward()\n"
        ),
        Valid(  # pinned host memory, and a tensor kept by an object of the module's class
            "import torch\nclass Shard:\n    def __init__(self, n):\n"
            "        self.tokens = torch.empty(n, dtype=torch.int32, pin_memory=True)\n"
            "for step in range(100):\n    shard = Shard(1024)\n    ids = torch.empty_like(x, pin_memory=True)\n"
            "    model(x).backward()\n    print(ids.numpy(), shard.tokens.tolist())\n"
        ),
        Valid(  # loaded into host memory once, read there
            "import torch\nclass Vocab:\n    def __init__(self, path):\n"
            "        self.ids = torch.load(path, map_location='cpu')\n    def words(self, loader):\n"
            "        for batch in loader:\n            print(self.ids[:3].tolist())\n"
        ),
        Valid(  # once per sample: `generate()` runs the whole decoding loop, and its output comes back
            "import torch\ndef decode_n(model, x, n):\n    for _ in range(n):\n"
            "        x = torch.cat([x, model(x).argmax(-1)[:, -1:]], 1)\n    return x\n"
            "def generate(model, x, n):\n    model(x)\n    return decode_n(model, x, n)\n"
            "for i in range(samples):\n    y = generate(model, prompt, 64)\n    print(decode(model(y).tolist()))\n"
        ),
        Valid("import torch\ndef forward(x):\n    return x.item()\nfor n in range(3):\n    y = x.cpu()\n"),
        Valid("import numpy as np\nimport torch.cuda\nfor b in loader:\n    a = np.numpy()\n"),
        Valid(  # NumPy arrays live on the host
            "import numpy as np\nimport torch\nfor b in loader:\n    ids = np.asarray(b['ids'])\n"
            "    keep = ids.tolist()\n    top = np.argsort(ids)[:3].tolist()\n"
        ),
        Valid("def run(torch, loader):\n    for b in loader:\n        torch.cpu()\n"),
        Valid(  # tensors in host memory: made from Python data, or copied once before the loop
            "import torch\nlabels = torch.tensor([ids[n] for n in names])\nw = weights.cpu()\nfor b in loader:\n"
            "    ids = torch.tensor([len(s) for s in b['text']])\n    print(ids.max().item(), w.float().numpy())\n"
            "    keep = labels.tolist()\n    for row in torch.from_numpy(b['boxes']).permute(1, 0):\n        print(row.numpy())\n"
        ),
        Valid(
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
            "        if x.sum().item() > 0:\n            x = x[: x.max().item()]\n        return x\n"
        ),
        Valid(  # called every N steps, or once after the loop
            "import torch\ndef report(loss):\n    print(loss.item())\ndef summary(t):\n    return t.cpu()\n"
            "for step, batch in enumerate(loader):\n    loss = model(batch)\n    if step % 100 == 0:\n"
            "        report(loss)\nsummary(loss)\n"
        ),
        Valid(  # a branch only another device takes
            "import torch\nfor x in loader:\n    out = model(x)\n    mps = 'mps' in out.device.type\n    if mps:\n"
            "        out = out.cpu()\n    elif out.device.type == 'cpu':\n        print(out.numpy())\n"
            "    nms(out)\ndef nms(pred):\n    device = pred.device\n    apple = 'mps' in device.type\n    if apple:\n"
            "        pred = pred.cpu()\n    return pred\n",
            options={"targets": ["tpu", "neuron", "xla"]},
        ),
        Valid(  # the first few steps only
            "import torch\npbar = enumerate(loader)\npbar = tqdm(pbar)\nfor batch_i, (im, targets) in pbar:\n"
            "    out = model(im)\n"
            "    if plots and batch_i < 3:\n        print(out.cpu())\n    ni = batch_i + len(loader) * epoch\n"
            "    if ni <= 2:\n        print(out.tolist())\n"
        ),
        Valid(  # helpers that run a step loop of their own make an epoch loop; an argmax that scores a diff samples nothing
            "import torch\ndef train_one_epoch(model, loader, opt):\n    for x in loader:\n        model(x).sum().backward()\n"
            "        opt.step()\ndef worst(a, b):\n    return (a - b).abs().argmax()\n"
            "def device_of(model):\n    return next(iter(model.parameters())).device\n"
            "for epoch in range(10):\n    train_one_epoch(model, loader, opt)\n    print(loss_total.item())\n"
            "for case in cases:\n    i = worst(case.out, case.ref)\n    d = device_of(net)\n    print(case.out.flatten()[i].item())\n"
        ),
        Valid(  # yolov5's detect.py: `torch.tensor` copies whatever it is given to the host
            "import torch\nfor path, im in dataset:\n    pred = model(im.to(device))\n"
            "    gn = torch.tensor(im.shape)[[1, 0, 1, 0]]\n    for *xyxy, conf, cls in reversed(pred[0]):\n"
            "        line = (torch.tensor(xyxy).view(1, 4) / gn).view(-1).tolist()\n"
        ),
        Valid(  # BLIP's captioning eval: the loop moves the images to the device, not the ids
            "import torch\ndef evaluate(model, data_loader, device):\n    result = []\n"
            "    for image, image_id in logger.log_every(data_loader, 10):\n        image = image.to(device)\n"
            "        captions = model.generate(image)\n        for caption, img_id in zip(captions, image_id):\n"
            "            result.append({'image_id': img_id.item(), 'caption': caption})\n    return result\n"
        ),
        Valid(  # BLIP's VQA: an id of the batch the loop leaves on the host, rebound to its number
            "import torch\ndef evaluate(model, data_loader, device):\n    result = []\n"
            "    for n, (image, question, question_id) in enumerate(logger.log_every(data_loader, 10)):\n"
            "        image = image.to(device)\n        answers = model(image, question)\n"
            "        for answer, ques_id in zip(answers, question_id):\n            ques_id = int(ques_id.item())\n"
            "            result.append({'question_id': ques_id, 'answer': answer})\n    return result\n"
        ),
        Valid(  # the first few steps only, counted by hand
            "import torch\nseen = 0\nfor example in examples:\n    loss = model(example)\n    seen += 1\n"
            "    if seen < 10:\n        print(loss.item())\n"
        ),
        Valid(  # every N steps, through names
            "import torch\nfor i, batch in enumerate(loader):\n    loss = model(batch)\n    last = i == len(loader) - 1\n"
            "    console = i % 10 == 0 or last\n    metric = i % 50 == 0 or console\n    if metric:\n"
            "        print(loss.item())\n"
        ),
        Valid(  # a function with a step loop of its own runs an epoch: what is around its loop is not per step
            "import torch\ndef train_one_epoch(model, loader, opt):\n    total = torch.zeros(())\n    for batch in loader:\n"
            "        loss = model(batch)\n        loss.backward()\n        total += loss.detach()\n    return total.item()\n"
            "for epoch in range(10):\n    train_one_epoch(model, loader, opt)\n    ema = task.get_eval_model(ema=True)\n"
            "    print(model(sample))\n"
        ),
        Valid(  # `self.log(...)` in the loop calls Trainer's log, not Stats'
            "import torch\nclass Stats:\n    def log(self, t):\n        return t.item()\nclass Trainer:\n"
            "    def log(self, t):\n        pass\n    def fit(self):\n        for batch in self.loader:\n"
            "            self.log(self.model(batch))\n"
        ),
        Valid(  # yolov5: once per epoch, around the batch loop
            "import torch\nfor epoch in range(epochs):\n    model.train()\n    optimizer.zero_grad()\n"
            "    cw = model.class_weights.cpu().numpy()\n    for i, (imgs, targets) in enumerate(batches):\n"
            "        loss = model(imgs)\n        loss.backward()\n        optimizer.step()\n    scheduler.step()\n"
        ),
        Valid(  # LeRobot: an argmax over the episodes each rollout returned picks no token; the
            # rollout's own loop reads back once per batch of episodes
            "import torch\ndef rollout(env, policy):\n    return torch.stack([torch.from_numpy(env.step())])\n"
            "def evaluate(env, policy, n, keep):\n    rewards, kept = [], None\n    for batch in range(n):\n"
            "        done = rollout(env, policy)\n        first = torch.argmax(done.to(int), dim=1)\n"
            "        rewards.extend(first.tolist())\n        if keep:\n            these = first + 1\n"
            "            kept = these\n    return rewards, kept\n"
        ),
        Valid(  # every call gives the length: the tensor's maximum is never read
            "import torch\ndef sequence_mask(length, max_length=None):\n    if max_length is None:\n"
            "        max_length = length.max()\n    x = torch.arange(max_length, device=length.device)\n"
            "    return x.unsqueeze(0) < length.unsqueeze(1)\nclass Encoder(torch.nn.Module):\n"
            "    def forward(self, x, x_lengths):\n        return x * sequence_mask(x_lengths, x.size(2))\n"
        ),
        Valid(  # CosyVoice's `make_pad_mask`, read back only where a call leaves the length out: none does
            "import torch\ndef make_pad_mask(lengths, max_len=0):\n"
            "    max_len = max_len if max_len > 0 else lengths.max().item()\n"
            "    return torch.arange(0, max_len, device=lengths.device).unsqueeze(0) >= lengths.unsqueeze(-1)\n"
            "class Flow(torch.nn.Module):\n    def forward(self, token, token_len):\n"
            "        return token * ~make_pad_mask(token_len, max_len=token.size(1))\n"
        ),
        Valid(  # functions that call each other, never from a step
            "import torch\ndef f(x):\n    return g(x)\ndef g(x):\n    return f(x.item())\nfor i in range(3):\n    f(i)\n"
        ),
        # on the CPU the tensor is already in host memory: no device to wait for
        Valid(
            "import torch\nfor b in loader:\n    loss = model(b)\n    loss.backward()\n    print(loss.item())\n",
            options={"targets": ["cpu"]},
        ),
    ]
    INVALID = [
        Invalid(  # seed-vc: features made in a closure `__init__` keeps on `self`, from host copies, every step
            "import torch\nclass Trainer:\n    def __init__(self, extractor, encoder, device):\n"
            "        def semantic_fn(waves):\n"
            "            inputs = extractor([w.cpu().numpy() for w in waves], return_tensors='pt').to(device)\n"
            "            with torch.no_grad():\n                return encoder(inputs.input_values)\n"
            "        self.semantic_fn = semantic_fn\n    def train_one_step(self, batch):\n"
            "        loss = self.model(self.semantic_fn(batch)).mean()\n        loss.backward()\n"
            "    def train(self, loader):\n        for batch in loader:\n            self.train_one_step(batch)\n",
            lines=[5],
            message="`.numpy()` in `semantic_fn()`, called from a loop over a DataLoader",
        ),
        Invalid(  # Kandinsky's (guided diffusion's) dynamic thresholding: a percentile on the host, used on the device
            "import numpy as np\nimport torch as th\nclass Diffusion:\n    def sample(self, model, img):\n"
            "        for i in reversed(range(self.num_timesteps)):\n            img = self.p_sample(model, img, i)\n"
            "        return img\n    def p_sample(self, model, x, t):\n        out = model(x, t)\n"
            "        x2 = th.clone(out).cpu().numpy()\n        s = np.percentile(np.abs(x2), 99.5)\n"
            "        s = max(s, 1.0)\n        return th.clip(out, -s, s) / s\n",
            lines=[10],
            message="`.numpy()` in `p_sample()`, called from a step loop",
        ),
        Invalid(  # an optimizer's step: each parameter of each group is a tensor, read per parameter and step
            "import math\nimport torch\nfrom torch.optim import Optimizer\nclass Lion(Optimizer):\n"
            "    def step(self, closure=None):\n        for group in self.param_groups:\n"
            "            for p in group['params']:\n                first = math.sqrt(p.data[0, 0])\n"
            "                p.data.add_(p.grad.sign(), alpha=-group['lr'] * first)\n",
            lines=[8],
            message="in `step()` of an optimizer",
        ),
        Invalid(  # PixArt's inpainting pipeline: a timestep of the device schedule read into a new tensor
            "import torch\ndef denoise(model, scheduler, latents, noise):\n"
            "    timesteps = torch.linspace(999, 0, 50, device=latents.device)\n"
            "    for i, t in enumerate(timesteps):\n        latents = model(latents, t)\n"
            "        if i < len(timesteps) - 1:\n"
            "            latents = scheduler.add_noise(latents, noise, torch.tensor([timesteps[i + 1]]))\n"
            "    return latents\n",
            lines=[7],
            message="a tensor as `torch.tensor()`'s list item",
        ),
        Invalid(  # denoising-diffusion-pytorch: the sampling loop reaches the model three methods down
            "import torch\nclass Diffusion(torch.nn.Module):\n    def __init__(self, model):\n        super().__init__()\n"
            "        self.model = model\n    def model_predictions(self, x, t):\n        return self.model(x, t)\n"
            "    def p_mean_variance(self, x, t):\n        return self.model_predictions(x, t)\n"
            "    def p_sample(self, x, t):\n        mean = self.p_mean_variance(x, t)\n"
            "        print('mean:', mean.mean().item())\n        return mean\n"
            "    def p_sample_loop(self, img):\n        for t in reversed(range(self.num_timesteps)):\n"
            "            img = self.p_sample(img, t)\n        return img\n",
            lines=[12],
            message="`.item()` in `p_sample()`, called from a step loop",
        ),
        Invalid(  # Tacotron 2: lengths read back in forward() for a torch function: no output
            "import torch\nfrom torch import nn\nclass Encoder(nn.Module):\n    def forward(self, x, input_lengths):\n"
            "        input_lengths = input_lengths.cpu().numpy()\n"
            "        x = nn.utils.rnn.pack_padded_sequence(x, input_lengths, batch_first=True)\n"
            "        return self.lstm(x)\n",
            lines=[5],
            message="waits for the device every step",
        ),
        Invalid(  # muse-maskgit's trainer: a module that builds the dataset's transforms and the optimizer
            "import torch\nimport torchvision.transforms as T\nfrom torch.optim import Adam\n"
            "class Images(torch.utils.data.Dataset):\n    def __init__(self):\n        self.transform = T.Compose([T.ToTensor()])\n"
            "class Trainer(torch.nn.Module):\n    def __init__(self, vae):\n        super().__init__()\n"
            "        self.vae = vae\n        self.optim = Adam(vae.parameters())\n"
            "    def train_step(self, dl_iter):\n        img = next(dl_iter)\n        loss = self.vae(img)\n"
            "        loss.backward()\n        self.optim.step()\n        return loss.item()\n",
            lines=[17],
            message="`.item()` in `train_step()`",
        ),
        Invalid(  # HRNet's OHEM loss: the k-th smallest probability, sorted into the name it came from
            "import torch\nclass Ohem(torch.nn.Module):\n    def forward(self, score, target):\n"
            "        pred = torch.softmax(score, dim=1)\n        pred, ind = pred.view(-1)[target.view(-1) != 255].sort()\n"
            "        threshold = max(pred[self.min_kept], self.thresh)\n        return pred[pred < threshold].mean()\n",
            lines=[6],
            message="`max()` in forward()",
        ),
        Invalid(  # Swin Transformer: the loss scale logged every step, read from the scaler's state
            "import torch\nfrom torch.cuda import amp\ndef train(model, loader, opt, meter):\n"
            "    scaler = amp.GradScaler()\n    for x, y in loader:\n"
            "        scaler.scale(model(x, y)).backward()\n        scaler.step(opt)\n        scaler.update()\n"
            "        meter.update(scaler.get_scale())\n        logged = scaler.state_dict()['scale']\n",
            lines=[9, 10],
            message="in a loop over a DataLoader copies a tensor to the host",
        ),
        Invalid(  # SV2TTS's encoder: the loss runs on the CPU; `embeds` is a NumPy array only in the UMAP block
            "import torch\ndef train(loader, model, opt):\n    loss_device = torch.device('cpu')\n"
            "    for step, batch in enumerate(loader):\n        embeds = model(torch.from_numpy(batch).to('cuda'))\n"
            "        loss = model.loss(embeds.view((4, 5, -1)).to(loss_device))\n        loss.backward()\n        opt.step()\n"
            "        if step % 100 == 0:\n            embeds = embeds.detach().cpu().numpy()\n",
            lines=[6],
            message='`.to("cpu")` in a loop over a DataLoader',
        ),
        Invalid(  # LoRA's PTI: a tensor printed in the accumulation block that steps the optimizer
            "import torch\nfor step, (x, y) in enumerate(loader):\n    loss = model(x, y)\n    loss.backward()\n"
            "    if step % accum_iter == 0:\n        pre_norm = emb.weight.norm(dim=-1)\n        print(pre_norm)\n"
            "        optimizer.step()\n",
            lines=[7],
            message="printing `pre_norm`",
        ),
        Invalid(  # YOLOv9's loss: Python's max() compares a reduction with a number
            "import torch.nn as nn\nclass Loss(nn.Module):\n    def forward(self, scores, boxes):\n"
            "        n = max(scores.sum(), 1)\n        m = max(len(boxes), 1)\n        self.seen = scores.mean().item()\n"
            "        return scores / n / m\n",
            lines=[4, 6],
            message="in forward()",
        ),
        Invalid(  # a perceptual loss: a model of torchvision's makes it no transforms module
            "import torch\nimport torchvision\nfrom torchvision import transforms\nclass VGGLoss(torch.nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.vgg = torchvision.models.vgg16().features\n"
            "        self.norm = transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])\n"
            "    def forward(self, x, y):\n        loss = (self.vgg(self.norm(x)) - self.vgg(self.norm(y))).abs().mean()\n"
            "        print(loss.item())\n        return loss\n",
            lines=[11],
            message="`.item()` in forward()",
        ),
        Invalid(  # a module that makes layers is a model's, whatever transforms it also uses
            "import torch\nfrom torchvision.transforms import functional as F\nclass Head(torch.nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.proj = torch.nn.Linear(4, 4)\n"
            "    def forward(self, batch, target):\n        _, h, w = F.get_dimensions(batch)\n"
            "        cut = int(target.float().mean().item() * h)\n        return self.proj(batch[:, :, :cut])\n",
            lines=[9],
            message="`.item()` in forward()",
        ),
        Invalid(  # torchvision's detection evaluation: outputs copied to a CPU device named once
            "import torch\ndef evaluate(model, data_loader, device):\n    cpu_device = torch.device('cpu')\n"
            "    for images, targets in data_loader:\n        outputs = model([img.to(device) for img in images])\n"
            "        outputs = [{k: v.to(cpu_device) for k, v in t.items()} for t in outputs]\n",
            lines=[6],
            message='`.to("cpu")` in a loop over a DataLoader',
        ),
        Invalid(  # BasicSR: outputs copied in a helper that only the validation loop calls (info), and
            # the same copy in a helper the training loop calls (every step)
            "import torch\nclass SRModel:\n    def get_current_visuals(self):\n"
            "        return {'result': self.output.detach().cpu()}\n"
            "    def nondist_validation(self, dataloader):\n        for val_data in dataloader:\n"
            "            self.feed_data(val_data)\n            visuals = self.get_current_visuals()\n"
            "    def optimize_parameters(self, dataloader, optimizer):\n        for data in dataloader:\n"
            "            self.net_g(data).mean().backward()\n            optimizer.step()\n"
            "            self.log_images(self.net_g(data))\n"
            "    def log_images(self, images):\n        return images.detach().cpu()\n",
            lines=[4, 15],
            message="called from a loop over a DataLoader",
        ),
        Invalid(  # DINO's k-NN evaluation: a loop over chunks of device features
            "import torch\ndef knn(train_features, test_features, test_labels, chunk):\n    top1 = 0.0\n"
            "    for idx in range(0, test_features.shape[0], chunk):\n"
            "        features = test_features[idx : min(idx + chunk, len(test_features))]\n"
            "        similarity = torch.mm(features, train_features)\n"
            "        top1 = top1 + similarity.gt(0.5).eq(test_labels[idx : idx + chunk]).sum().item()\n"
            "    return top1\n",
            lines=[7],
            message="in a loop over chunks",
        ),
        Invalid(  # a predicate that holds every step
            "import torch\nfrom pytorch_lightning.callbacks import Callback\nclass ImageLogger(Callback):\n"
            "    def check_frequency(self, idx):\n        if self.enabled:\n"
            "            return True\n        return False\n    def log_img(self, pl_module, batch, idx):\n"
            "        if self.check_frequency(idx):\n            images = pl_module.log_images(batch)\n"
            "            for k in images:\n                images[k] = images[k].detach().cpu()\n"
            "    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):\n"
            "        self.log_img(pl_module, batch, batch_idx)\n",
            lines=[12],
        ),
        Invalid(  # I-JEPA: an autograd Function's `apply` makes a tensor of the loss
            "import torch\nimport torch.nn.functional as F\nclass AllReduce(torch.autograd.Function):\n"
            "    @staticmethod\n    def forward(ctx, x):\n        return x\n"
            "for x, y in loader:\n    loss = AllReduce.apply(F.mse_loss(model(x), y))\n    loss.backward()\n"
            "    print(float(loss))  # loss.item() by another name\n",
            lines=[10],
            message="in a loop over a DataLoader",
        ),
        Invalid(  # V-JEPA's step: a number first, a tensor on the way (assigned, or added in place)
            "import torch\nfrom torch.nn import functional as F\nx = x.cpu()\nfor step in range(steps):\n    loss = 0.\n"
            "    for z, h in zip(model(x), targets):\n        loss += F.l1_loss(z, h)\n    loss.backward()\n"
            "    norm = -1.0\n    if clip:\n        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)\n"
            "    opt.step()\n    print(f'loss {float(loss):.3f} norm {norm:.2f}')\n",
            lines=[13, 13],
            message="in a training loop",
        ),
        Invalid(  # I-JEPA: the step is a closure the loop hands to a timer, which runs it
            "import torch\nimport torch.nn.functional as F\nfrom utils import gpu_timer\ndef main(loader, encoder, opt):\n"
            "    for imgs, masks in loader:\n        def train_step():\n"
            "            loss = F.mse_loss(encoder(imgs), imgs)\n            loss.backward()\n            opt.step()\n"
            "            return loss.item()\n        loss, elapsed = gpu_timer(train_step)\n",
            lines=[10],
            message="in `train_step()`, called from a loop over a DataLoader",
        ),
        Invalid(  # nanochat: a generator's body runs as the training loop draws each batch
            "import torch\ndef batches(device):\n    while True:\n"
            "        ids = torch.randint(0, 9, (8, 64), device=device)\n        print(ids.max().item())\n"
            "        yield ids\nloader = batches('cuda')\nfor step in range(100):\n"
            "    x = next(loader)\n    model(x).mean().backward()\n",
            lines=[5],
            message="in `batches()`, called from a training loop",
        ),
        Invalid(  # a parameter goes where its module goes, whatever it was made from
            "import torch\nfrom torch import nn\nclass Scale(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.gain = nn.Parameter(torch.ones(1))\n"
            "    def forward(self, x):\n        return x * self.gain.item()\n",
            lines=[8],
            message="in forward()",
        ),
        Invalid(  # a speculative step runs a drafting loop, then the loop around it decodes on
            "import torch\ndef draft(model, x, k):\n    for _ in range(k):\n"
            "        x = torch.cat([x, model(x).argmax(-1)[:, -1:]], 1)\n    return x\n"
            "def speculate(model, draft_model, x, k):\n    guess = draft(draft_model, x, k)\n"
            "    return model(guess).argmax(-1)\n"
            "while pos < n:\n    out = speculate(model, small, seq, 4)\n    seq = keep(seq, out.tolist())\n",
            lines=[11],
            message="in a step loop",
        ),
        Invalid(  # yolov5's progress bar: the running losses formatted every step
            "import torch\nimport torch.nn.functional as F\nmloss = torch.zeros(3, device=device)\n"
            "for i, (imgs, targets) in enumerate(loader):\n"
            "    loss = F.cross_entropy(model(imgs), targets)\n    loss.backward()\n"
            "    mloss = (mloss * i + loss) / (i + 1)\n    pbar.set_description(('%11.4g' * 3) % (*mloss,))\n"
            "    print(f'loss {loss:.4f}')\nprint(mloss.sum().item())\n",
            lines=[8, 9],
            message="formatting",
        ),
        Invalid(  # ControlNet's EMA: Python's min() compares a buffer with a number every step
            "import torch\nclass LitEma(torch.nn.Module):\n    def __init__(self, decay):\n"
            "        self.register_buffer('decay', torch.tensor(decay, dtype=torch.float32))\n"
            "    def forward(self, model):\n        return min(self.decay, 0.999)\n",
            lines=[6],
            message="`min()` in forward()",
        ),
        Invalid(  # BLIP: a queue pointer kept in a buffer, read as a Python int every step
            "import torch\nclass Blip(torch.nn.Module):\n    def __init__(self):\n"
            "        self.register_buffer('queue_ptr', torch.zeros(1, dtype=torch.long))\n"
            "    def _enqueue(self, feats):\n        ptr = int(self.queue_ptr)\n        self.queue_ptr[0] = ptr + 1\n"
            "    def forward(self, x):\n        self._enqueue(x)\n        return x\n",
            lines=[6],
            message="`int()` in `_enqueue()`, called from forward()",
        ),
        Invalid(  # methods a framework runs every step, and a generation callback every token
            "import torch\nimport lightning as L\nfrom transformers import StoppingCriteria\n"
            "class M(L.LightningModule):\n    def training_step(self, batch, i):\n        loss = self.model(batch)\n"
            "        self.log('loss', loss.item())\n        return loss\n"
            "class Stop(StoppingCriteria):\n    def __call__(self, ids, scores, **kw):\n        return ids[0, -1].item() == 2\n",
            lines=[7, 11],
            message="every step",
        ),
        Invalid(  # nanotron's GroupedMLP: counts copied to the host in forward
            "import torch\nclass GroupedMLP(torch.nn.Module):\n    def forward(self, x, num_tokens_per_expert):\n"
            "        counts = num_tokens_per_expert.to('cpu')\n        return self.ops(x, counts)\n",
            lines=[4],
            message='`.to("cpu")` in forward()',
        ),
        Invalid(  # Latent Diffusion's DDIM step, dinov2's kNN eval: torch reads a tensor where it takes a number
            "import torch\nimport torch.nn.functional as F\nclass Sampler:\n    def __init__(self, n):\n"
            "        self.register_buffer('alphas', torch.linspace(0.1, 1.0, n))\n"
            "    def sample(self, model, x, use_original, steps):\n        for i in range(steps):\n"
            "            e = model(x)\n            alphas = self.model.alphas if use_original else self.alphas\n"
            "            a_t = torch.full((x.shape[0], 1), alphas[i], device=x.device)\n"
            "            n = self.alphas.argmax() + 1\n            y = F.one_hot(e.argmax(-1), num_classes=n)\n"
            "            for k in range(n):\n                x = x - a_t * e\n",
            lines=[10, 12, 13],
            message="a tensor as `",
        ),
        Invalid(  # pytorch/examples' SNLI: an evaluation loop every N steps runs steps of its own
            "import torch\nfor i, batch in enumerate(loader):\n    model(batch).backward()\n    if i % 100 == 0:\n"
            "        for name, value in stats.items():\n            print(name, value.item())\n"
            "        for dev in dev_loader:\n            correct += (model(dev).argmax(-1) == dev.y).sum().item()\n",
            lines=[8],
        ),
        Invalid(  # stylegan2's metrics: a loader wrapped under another name, a model given as a parameter
            "import torch\ndef extract(loader, inception, device):\n    pbar = tqdm(loader)\n    feats = []\n"
            "    for img in pbar:\n        img = img.to(device)\n        feats.append(inception(img).to('cpu'))\n"
            "def sample(g, sizes, device):\n    for b in sizes:\n        z = torch.randn(b, 512, device=device)\n"
            "        img, _ = g([z])\n        feats.append(img.to('cpu'))\n",
            lines=[7, 12],
        ),
        Invalid(  # a logger reads the tensor it writes, every step
            "import torch\nimport wandb\nfor x, y in train_loader:\n    loss = torch.nn.functional.mse_loss(model(x), y)\n"
            "    loss.backward()\n    writer.add_scalar('loss', loss, step)\n    wandb.log({'loss': loss, 'step': step})\n"
            "    writer.add_scalars('Loss', {'train': loss}, step)\n    wandb.log(dict(loss=loss))\n",
            lines=[6, 7, 8, 9],
            message="logging `loss`",
        ),
        Invalid(  # llama-recipes: the run wandb.init() made, handed to the training loop
            "import torch\nimport wandb\ndef train(model, loader, optimizer, wandb_run=None):\n"
            "    for step, batch in enumerate(loader):\n        loss = model(**batch).loss\n        loss.backward()\n"
            "        optimizer.step()\n        if wandb_run:\n            wandb_run.log({'train/loss': loss.detach().float()})\n"
            "run = wandb.init(project='p')\nfor x in loader:\n    loss = model(x)\n    loss.backward()\n"
            "    run.log({'loss': loss})\n    logger.log({'loss': loss})\n",
            lines=[9, 14],
            message="logging",
        ),
        Invalid(  # the error path: SAM 2's trainer logs the loss before it raises (the test itself reads it every step)
            "import math\nimport torch\nfor batch in loader:\n    loss = model(batch)\n"
            "    if not math.isfinite(loss.detach().float().sum()):\n        msg = f'Loss is {loss.item()}'\n"
            "        logging.error(msg)\n        if raise_on_error:\n            raise FloatingPointError(msg)\n"
            "        else:\n            return\n    loss.backward()\n",
            lines=[5],
        ),
        Invalid(  # DINO stops on a non-finite loss; mistral-inference's assertion message: only the test reads
            "import sys\nimport math\nimport torch\nfor batch in loader:\n    loss = model(batch)\n"
            "    if not math.isfinite(loss.detach().float().sum()):\n        print(f'Loss is {loss.item()}')\n        sys.exit(1)\n"
            "    assert loss.dim() == 0, f'loss {loss.sum().item()}'\n    loss.backward()\n",
            lines=[6],
        ),
        Invalid(  # tacotron2: the gradient norm tested and printed every step
            "import math\nimport torch\nfor batch in train_loader:\n    model(batch).backward()\n"
            "    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n    overflow = math.isnan(norm)\n"
            "    print('norm {:.6f}'.format(norm))\n",
            lines=[6, 7],
        ),
        Invalid(  # point-e's k-diffusion: a closure given to the sampler, whose loop calls it
            "import torch\ndef sample_heun(denoiser, x, sigmas):\n    for i in range(len(sigmas) - 1):\n"
            "        x = x + denoiser(x, sigmas[i])\ndef run(x, sigmas):\n    def scaled(x_t, sigma):\n"
            "        return x_t * sigma.item()\n    sample_heun(scaled, x, sigmas)\n",
            lines=[7],
            message="`scaled()`, called from a step loop",
        ),
        Invalid(  # ... and a method of the object the caller rebinds its parameter to, which
            # reads the schedule out to NumPy and makes a tensor of it on the device again
            "import torch as th\nclass Karras:\n    def denoise(self, x, sigmas):\n"
            "        t = th.tensor([f(s) for s in sigmas.cpu().numpy()], device=sigmas.device)\n"
            "        return self.model(x, t)\ndef sample_euler(model_fn, x, sigmas):\n"
            "    for i in range(len(sigmas) - 1):\n        x = x + model_fn(x, sigmas[i])\n"
            "def sample(model, x, sigmas):\n    model = Karras(model)\n    def denoiser(x_t, sigma):\n"
            "        return model.denoise(x_t, sigma)\n    sample_euler(denoiser, x, sigmas)\n",
            lines=[4],
            message="`.numpy()` in `denoise()`, called from a step loop",
        ),
        Invalid(  # Latent Diffusion's PLMS: the loop's method, defined after it, runs the model in a closure
            "import torch\nclass PLMSSampler:\n    def sampling(self, x, steps):\n        for i in range(steps):\n"
            "            x = self.p_sample(x, i)\n            print(x.sum().item())\n"
            "    def p_sample(self, x, index):\n        def model_output(x):\n"
            "            return self.model.apply_model(x)\n        e_t = model_output(x)\n"
            "        return x - e_t * x[index].item()\n",
            lines=[6, 11],
            message="a step loop",
        ),
        Invalid(  # Latent Diffusion's DDIMSampler: a buffer holds a tensor whatever made it
            "import torch\nfrom ldm.util import make_params\nclass DDIMSampler:\n    def make_schedule(self, n):\n"
            "        sigmas, alphas = make_params(self.model.alphas_cumprod.cpu(), n)\n"
            "        self.register_buffer('ddim_alphas', alphas)\n"
            "    def sample(self, x, steps):\n        for i in range(steps):\n            e = self.model(x)\n"
            "            a_t = torch.full((x.shape[0], 1), self.ddim_alphas[i], device=x.device)\n",
            lines=[10],
            message="fill_value",
        ),
        Invalid(  # a torchmetrics metric's update runs every step
            "import torch\nfrom torchmetrics import Metric\nclass Acc(Metric):\n    def update(self, preds, target):\n"
            "        self.correct += (preds.argmax(-1) == target).sum().item()\n",
            lines=[5],
            message="`update()` of a torchmetrics metric",
        ),
        Invalid(  # MAR: a loop over a range that runs the class's layers and goes on from the last pass
            "import torch\nclass MAR(torch.nn.Module):\n    def __init__(self):\n        self.decoder = torch.nn.Linear(4, 4)\n"
            "    def sample_tokens(self, tokens, num_iter):\n        indices = list(range(num_iter))\n"
            "        for step in indices:\n            cur = tokens.clone()\n            z = self.decoder(cur)\n"
            "            n = z.sum().item()\n            tokens = cur + z\n        return tokens\n",
            lines=[10],
            message="in a decoding loop",
        ),
        Invalid(  # audiocraft's D-Adaptation: an optimizer's step() runs every training step
            "import torch\nclass DAdaptAdam(torch.optim.Optimizer):\n    def step(self, closure=None):\n"
            "        g_sq = 0.0\n        for group in self.param_groups:\n            for p in group['params']:\n"
            "                g_sq += p.grad.pow(2).sum().item()\n        return g_sq\n",
            lines=[7],
            message="`step()` of an optimizer (run every training step)",
        ),
        Invalid(  # stylegan3: a period that each phase sets (the main phases' is 1) skips no step
            "import torch\nfor batch_idx, batch in enumerate(loader):\n    for phase in phases:\n"
            "        if batch_idx % phase.interval != 0:\n            continue\n        loss = phase.model(batch)\n"
            "        loss.backward()\n        print(loss.item())\n",
            lines=[8],
            message="a training loop",
        ),
        Invalid(  # mistral-inference: decoding with autograd off, through a sampler defined below the loop
            "import torch\n@torch.inference_mode()\ndef generate(model, logits, n, eos):\n"
            "    done = torch.tensor([False])\n    for _ in range(n):\n        token = sample(logits)\n"
            "        done = done | (token == eos).cpu()\n        if done.all():\n            break\n"
            "        out.append(token[:, None])\n        logits = model.forward(token)\n"
            "def sample(logits):\n    return torch.multinomial(logits.softmax(-1), 1).reshape(-1)\n",
            lines=[7],
            message="`.cpu()` in a decoding loop",
        ),
        Invalid(  # RIFE's inference_video.py: a loop over frames that runs the model's `inference`
            "import torch\nwhile True:\n    frame = read_buffer.get()\n    if frame is None:\n        break\n"
            "    out = model.inference(I0, torch.from_numpy(frame).to(device))\n    print(out.mean().item())\n",
            lines=[7],
            message="in a step loop",
        ),
        Invalid(  # fairseq_cli/train.py: a step by its name
            "import torch\nfor i, samples in enumerate(progress):\n    log_output = trainer.train_step(samples)\n"
            "    stats = {k: v.item() for k, v in log_output.items()}\n",
            lines=[4],
            message="a training loop",
        ),
        Invalid(  # Mamba's decode: the loop runs the model and samples through helpers, and tests in its `while`
            "import torch\ndef sample(logits, min_p=0.0):\n    probs = torch.softmax(logits, -1)\n"
            "    if min_p > 0:\n        limit = probs.max().item() * min_p\n    return torch.multinomial(probs, 1)\n"
            "def decode(model, ids, eos, n):\n    def get_logits(ids):\n        return model(ids)[:, -1]\n"
            "    def should_stop(tok):\n        if (tok == eos).all():\n            return True\n        return ids.shape[1] >= n\n"
            "    while not should_stop(ids[:, -1:]):\n        tok = sample(get_logits(ids))\n"
            "        streamer.put(tok.cpu())\n        ids = torch.cat([ids, tok], 1)\n",
            lines=[5, 16],
            message="a decoding loop",
        ),
        Invalid(
            "import torch\nfor i, (x, y) in enumerate(train_loader):\n    loss = f(x, y)\n    total += loss.item()\n",
            lines=[4],
            message="every step",
        ),
        Invalid(  # not the loop's count
            "import torch\nfor i, b in enumerate(loader):\n    out = model(b)\n    k = len(b)\n    if k < 3:\n"
            "        print(out.cpu())\n",
            lines=[6],
        ),
        Invalid(  # a number first, then a sum of device tensors
            "import torch\nfor x, y in loader:\n    style = 0.0\n    for a, b in zip(x, y):\n"
            "        style += torch.dist(a, b)\n    print(style.item())\n",
            lines=[6],
        ),
        Invalid(
            "import torch as T\nclass Net(T.nn.Module):\n    def forward(self, x):\n        n = x.argmax().tolist()\n"
            "        return x.cpu().float().numpy()\n",
            lines=[4, 5],
        ),
        Invalid(
            "from torch.utils.data import DataLoader as DL\ndl = DL(ds)\nfor b in dl:\n    preds.append(b.cpu())\n",
            lines=[4],
        ),
        Invalid("from torch import nn\nfor b in tqdm(self.val_dataloader):\n    acc.append(b.numpy())\n", lines=[3]),
        Invalid(
            "import torch\nwhile True:\n    X, Y = get_batch('train')\n    loss = model(X, Y)\n    loss.backward()\n"
            "    optimizer.step()\n    print(loss.item())\n",
            lines=[7],
            message="in a training loop",
        ),
        Invalid(
            "import torch\nfor _ in range(max_new_tokens):\n    logits = model(idx)\n"
            "    nxt = torch.multinomial(logits.softmax(-1), 1)\n    out.extend(nxt.tolist())\n",
            lines=[5],
            message="in a decoding loop",
        ),
        Invalid(  # nanoGPT: gradient accumulation inside the step loop, which steps the optimizer
            "import torch\nwhile True:\n    for micro in range(accum):\n        loss = model(X, Y)\n"
            "        loss.backward()\n    scaler.step(optimizer)\n    lossf = loss.item()\n",
            lines=[7],
            message="in a training loop",
        ),
        Invalid(  # a method the training loop calls every step
            "import torch\nclass Trainer:\n    def grad_norm(self):\n        total = 0.0\n        for p in self.params:\n"
            "            total += (p.grad ** 2).sum().item()\n        return total\n    def fit(self):\n"
            "        while True:\n            self.model(next(self.data)).backward()\n            self.grad_norm()\n",
            lines=[6],
            message="in `grad_norm()`, called from a training loop,",
        ),
        Invalid(  # through a function that the loop calls
            "import torch\ndef log_losses(losses):\n    for key, value in losses.items():\n        print(key, value.mean().item())\n"
            "def train_step(model, batch):\n    log_losses(model(batch))\nfor batch in loader:\n    train_step(model, batch)\n",
            lines=[4],
            message="called from a loop over a DataLoader",
        ),
        Invalid(
            "import torch\nclass Router(torch.nn.Module):\n    def route(self, x):\n        return x.argmax(-1).tolist()\n"
            "    def forward(self, x):\n        return self.route(x)\n",
            lines=[4],
            message="called from forward()",
        ),
        Invalid(
            "import torch\nfor k in range(eval_iters):\n    X, Y = get_batch('val')\n    losses[k] = model(X, Y).item()\n"
            "    if k % 10 == 0:\n        print(model(X, Y).item())\n",
            lines=[4],
            message="in a step loop",
        ),
        Invalid(  # lit-llama: logged every `log_interval` steps, which is every step
            "import torch\nlog_interval = 1\nfor iter_num, batch in enumerate(loader):\n    loss = model(batch)\n"
            "    loss.backward()\n    if iter_num % log_interval == 0:\n        print(loss.item())\n",
            lines=[7],
        ),
        Invalid(  # YOLOX: a count per image, in a helper of forward() with a loop of its own (topk per box)
            "import torch\nclass Head(torch.nn.Module):\n    def forward(self, x, labels):\n"
            "        return self.losses(x, labels)\n    def losses(self, x, labels):\n"
            "        nlabel = (labels.sum(dim=2) > 0).sum(dim=1)\n"
            "        for b in range(x.shape[0]):\n            num_gt = int(nlabel[b])\n"
            "            self.match(x[b], num_gt)\n    def match(self, cost, n):\n"
            "        for i in range(n):\n            _, pos = torch.topk(cost[i], k=3)\n"
            "        return (cost > 0).sum().item()\n",
            lines=[8, 13],
            message="called from forward()",
        ),
        Invalid(  # CoOp: the step method of a Dassl trainer
            "import torch\nfrom dassl.engine import TrainerX\nclass CoOp(TrainerX):\n"
            "    def forward_backward(self, batch):\n        loss = self.model(batch)\n        loss.backward()\n"
            "        return {'loss': loss.item()}\n",
            lines=[7],
            message="`forward_backward()` of a Dassl trainer",
        ),
        Invalid(  # a Hugging Face streamer: generate() calls its put() with every new token
            "import torch\nfrom transformers.generation.streamers import BaseStreamer\n"
            "class TokenStreamer(BaseStreamer):\n    def put(self, value):\n"
            "        self.text.append(self.tokenizer.decode(value.tolist()))\n",
            lines=[5],
            message="of a generation streamer (run for every token)",
        ),
        Invalid(  # gpt-neox: each pass over the module's token stream is one decoding step of its loop,
            # and the copy's chain goes on in NumPy past `.numpy()`
            "import torch\ndef stream_tokens(model, tokens, n):\n    for i in range(n):\n"
            "        nxt = torch.multinomial(model(tokens).softmax(-1), 1)\n"
            "        tokens = torch.cat([tokens[:, 1:], nxt], 1)\n        yield tokens\n"
            "def interactive(model, tokens, tokenizer):\n    for out in stream_tokens(model, tokens, 64):\n"
            "        print(tokenizer.decode(out[0].cpu().numpy().tolist()))\n",
            lines=[9],
            message="`.numpy()` in a decoding loop",
        ),
        Invalid(  # LeRobot: an evaluation over a DataLoader every N steps leaves the loop a training loop
            "import torch\ndef update(policy, batch, optimizer):\n    loss = policy(batch)\n    loss.backward()\n"
            "    optimizer.step()\n    return loss.item()\n"
            "def train(policy, batches, optimizer, eval_loader, steps):\n    for step in range(steps):\n"
            "        update(policy, next(batches), optimizer)\n        is_eval_step = step % 1000 == 0\n"
            "        if is_eval_step:\n            for batch in eval_loader:\n                policy(batch)\n",
            lines=[6],
            message="called from a training loop",
        ),
        Invalid(  # GPT-SoVITS' batched decoding: a sampler draws each pass's tokens from the logits
            "import torch\ndef decode(head, sampler, h, y, done):\n    for idx in range(1500):\n"
            "        logits = head(h[:, -1])\n        samples = sampler.sample(logits=logits, previous_tokens=y)\n"
            "        y = torch.cat([y, samples], dim=1)\n        done.append(samples.tolist())\n",
            lines=[7],
            message="`.tolist()` in a decoding loop",
        ),
        Invalid(  # CogVideoX's DDIM inversion: the pipeline's denoiser runs every step of the scheduler's timesteps
            "import math\nimport torch\nfrom diffusers.pipelines.cogvideo.pipeline_cogvideox import retrieve_timesteps\n"
            "def invert(pipeline, scheduler, latents, n, device):\n"
            "    timesteps, n = retrieve_timesteps(scheduler, n, device)\n    for i, t in enumerate(timesteps):\n"
            "        noise = pipeline.transformer(hidden_states=latents, timestep=t.expand(2))[0]\n"
            "        scale = 1 + math.cos(math.pi * (n - t.item()) / n)\n"
            "        latents = scheduler.step(noise * scale, t, latents)[0]\n    return latents\n",
            lines=[8],
            message="`.item()` in a step loop",
        ),
        Invalid(  # glow-tts' `sequence_mask`: a length filled in from the tensor where callers give none
            "import torch\ndef sequence_mask(length, max_length=None):\n    if max_length is None:\n"
            "        max_length = length.max()\n    x = torch.arange(max_length, device=length.device)\n"
            "    return x.unsqueeze(0) < length.unsqueeze(1)\nclass Encoder(torch.nn.Module):\n"
            "    def forward(self, x, x_lengths):\n        return x * sequence_mask(x_lengths)\n",
            lines=[5],
            message="a tensor as `torch.arange()`'s end in `sequence_mask()`, called from forward()",
        ),
        Invalid(  # one call of the two leaves the length out: its fill-in reads the maximum back
            "import torch\ndef make_pad_mask(lengths, max_len=0):\n"
            "    max_len = max_len if max_len > 0 else lengths.max().item()\n"
            "    return torch.arange(0, max_len, device=lengths.device).unsqueeze(0) >= lengths.unsqueeze(-1)\n"
            "class Flow(torch.nn.Module):\n    def forward(self, token, token_len, feat, feat_len):\n"
            "        mask = ~make_pad_mask(token_len, max_len=token.size(1))\n"
            "        return token * mask + feat * ~make_pad_mask(feat_len)\n",
            lines=[3],
            message="`.item()` in `make_pad_mask()`, called from forward()",
        ),
    ]

    hand_off_hint = (
        "The value leaves torch here (for NumPy, an image, a file): where it is an output, one copy"
        " per item is its cost; keep what the loop computes with on the device"
    )

    reads_given_tensors = True

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._writers_read: dict[int, frozenset[str]] = {}  # by function: see `_written_names`
        self._reader_calls: list[_ReaderCall] = []  # see `_note_reader_call`

    def reads_given(self, fields: Mapping[str, object]) -> bool:
        """A number read back (`.item()`, `float()`), not a whole copy, which may be an output."""
        return fields.get("call") not in _WHOLE_COPIES and not fields.get("written")

    def handed_off(self, root: str, fields: Mapping[str, object]) -> bool:
        """A copy written out (an image, a file) anywhere; `.numpy()` in forward() or in a loop
        that runs the model without training or decoding (a sampling script, an exporter's
        backends); and a whole tensor copied to the host (`.cpu()`, `.to("cpu")`, `.numpy()`)
        with autograd off in such a loop or in a loop over a DataLoader (an evaluation, an
        extraction), also in a function only such loops call: the tensor leaves torch there as
        an output, unless the function brings it back to a device (`round_trip`)."""
        if fields.get("written"):
            return True
        if fields.get("round_trip") or fields.get("call") not in _WHOLE_COPIES:
            return False
        if fields.get("call") == "`.numpy()`" and root in _HAND_OFF_CONTEXTS:
            return True
        inference = fields.get("inference")
        if isinstance(inference, cst.FunctionDef):  # a helper: whether every call is an evaluation's
            module_flow = self.ctx.flow
            inference = module_flow is not None and module_flow.evaluated_only(inference)
        return bool(inference) and root in ("a step loop", "a loop over a DataLoader")

    def leave_Module(self, node: cst.Module) -> None:
        self.record_module_facts(node)  # once for the step rules, here
        self._report_reader_calls()
        super().leave_Module(node)

    def _note_reader_call(self, call: cst.Call) -> None:
        """In the second pass, a call of another module's function that reads back the tensors
        it is given (ConvNeXt's `metric_logger.update(class_acc=class_acc)`, whose `v.item()`
        runs `if isinstance(v, torch.Tensor):`), made with a tensor: where it runs every step,
        the call is where the port keeps the value on the device, or reads it every N steps."""
        known, module_flow = self.ctx.project, self.ctx.flow
        if not known.complete or module_flow is None or self.ctx.path not in known.tensor_reader_callers:
            return
        ancestors = self.ctx.ancestors
        function = flow.enclosing_function(ancestors)
        own = self.ctx.module.name + "."
        callees = [name for name in self._local_callees(call, function, ancestors) if not name.startswith(own)]
        read = next(filter(None, map(known.tensor_reader, callees)), None)
        if read is None or not self._passes_tensor(call) or module_flow.off_the_step_path(ancestors):
            return
        chain = self.ctx.chain(call)
        self._reader_calls.append(_ReaderCall(call, read, function, tuple(ancestors), chain, module_flow.scope))

    def _report_reader_calls(self) -> None:
        module_flow = self.ctx.flow
        for site in self._reader_calls if module_flow is not None else ():
            where = module_flow.in_scope(site.scope, partial(module_flow.step_context, site.ancestors))
            if where is None and site.function is not None:
                caller = module_flow.called_every_step(site.function)
                where = f"`{site.function.name.value}()`, called from {caller}," if caller else None
            if where is None:
                continue
            place, read = site.read
            called = cst.Module([]).code_for_node(site.call.func)
            shown = f"`{called}(...)`, whose {read} at {place} reads back the tensor given here,"
            self.reports.append(self.report_here(site.call, chain=site.chain, call=shown, where=where))

    def _to_named_cpu(self, node: cst.Call) -> bool:
        """`.to(cpu_device)` where `cpu_device = torch.device("cpu")` (torchvision's detection
        evaluation), unless the module runs its model there too."""
        module_flow = self.ctx.flow
        if patterns.method_name(node) != "to" or module_flow is None:
            return False
        places = [arg.value for arg in node.args if arg.keyword is None or arg.keyword.value == "device"]
        return any(
            type(place) is cst.Name and module_flow.is_cpu(place) and place.value not in self._model_devices
            for place in places
        )

    @cached_property
    def _model_devices(self) -> frozenset[str]:
        """The names the module moves a model to (GPT-SoVITS's `device = "cpu"`, then
        `net_g.to(device)`): the device it runs on, which moving a batch there does not leave."""
        module = self.ctx.ancestors[0]
        return frozenset(
            call.args[0].value.value  # type: ignore[attr-defined]
            for call in descendants(module)
            if type(call) is cst.Call
            and patterns.method_name(call) == "to"
            and call.args
            and type(call.args[0].value) is cst.Name
            and self._model(call.func.value)  # type: ignore[attr-defined]
        )

    def _model(self, node: cst.BaseExpression) -> bool:
        """`Net(...)`, or a name bound to one: an object of a class, not a tensor."""
        if type(node) is cst.Name:
            return any(self._model(value) for value in self.ctx.assigned_values(node))
        return makes_instance(self.ctx, node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        parent = self.ctx.parent
        if type(node.value) is cst.Name and not (type(parent) is cst.Call and parent.func is node):
            self.note_property_read(node)  # `train_loss.avg`: an AverageMeter's property may sync

    def visit_Call(self, node: cst.Call) -> None:
        self.note_step_call(node)
        self._note_reader_call(node)
        self.note_tensor_arguments(node)  # once for the step rules, here
        method = patterns.method_name(node)
        if method == "format" and _is_text(node.func.value):  # type: ignore[attr-defined]
            self._report_format_arguments(node)
            return
        logged = self._logged_tensor(node, method)
        if logged is not None:
            self._report_formatted(logged, "logging")
            return
        printed = self._printed_tensor(node)
        if printed is not None:
            if not self._under_tensor_test(self.ctx.ancestors):
                self._report_formatted(printed, "printing")
            return
        converted = builtin_call(self.ctx, node, _CONVERSIONS) or self._math_of(node)
        if converted is None or not tensor_valued(self.ctx, converted):
            converted = self._compared_tensor(node)  # `min(t, 1)`: a tensor (or a reduction of one) already
        as_number = self._tensor_as_number(node)
        number = as_number or self._scale_read(node)
        if converted is not None:
            copied, call = converted, f"`{patterns.dotted(node.func)}()`"  # `int(self.queue_ptr)`, `min(t, 1)`
        elif number is not None:
            copied, call = number
        elif (_syncs(node) or self._to_named_cpu(node)) and tensor_method(self.ctx, node, _SYNCS | {"to"}):
            copied, call = _copied(node), '`.to("cpu")`' if method == "to" else f"`.{method}()`"
        else:
            return
        ancestors = self.ctx.ancestors
        if _inside_outer_sync(ancestors):
            return
        where = self.step_context(ancestors)
        if where is None or self._owned_elsewhere(ancestors, node) or in_host_memory(self.ctx, copied):
            return
        written = self._written_out(node)
        back = (
            self._sends_numpy_back(node) if method == "numpy" else call in _WHOLE_COPIES and self._kept_to_send_back()
        )
        inference = self._inference(ancestors) if call in _WHOLE_COPIES else False
        holds = off_host_at_end(self.ctx, copied)
        if converted is None and as_number is not None and self._filled_in(copied):
            holds = partial(self._number_at_end, holds, copied)  # the calls after the function say if they give it
        filling = filling_in(ancestors)
        if filling is not None:  # `max_len = max_len if max_len > 0 else lengths.max().item()`
            holds = partial(self._left_out, holds, *filling)
        self.report_in_step(node, where, holds, call=call, written=written, round_trip=back, inference=inference)

    def _left_out(self, off_host: Callable[[], bool], function: cst.FunctionDef, parameter: str) -> bool:
        """Whether the module's calls of the function leave the parameter out, or it makes none
        (another module's calls may): only there does its fill-in run (asked at the end)."""
        module_flow = self.ctx.flow
        assert module_flow is not None
        return off_host() and module_flow.passed_arguments(function, parameter) in (None, [])

    def _filled_in(self, node: cst.BaseExpression) -> bool:
        """A parameter its function fills in where the caller leaves it out (see `filled_parameter`)."""
        resolver = self.ctx.resolver
        return type(node) is cst.Name and resolver is not None and resolver.filled_parameter(node) is not None

    def _number_at_end(self, off_host: Callable[[], bool], given: cst.BaseExpression) -> bool:
        """Whether what torch reads as a number is still a tensor off the host once the module's
        calls are known (`sequence_mask(x_lengths, x.size(2))` gives the length it fills in)."""
        return off_host() and tensor_valued(self.ctx, given)

    def _inference(self, ancestors: Sequence[cst.CSTNode]) -> bool | cst.FunctionDef:
        """Whether the node runs without training: in a loop over a DataLoader that takes no
        training step (an evaluation), or, where no training loop of the function is around
        it, with autograd off: under `with torch.no_grad():` (or `torch.inference_mode()`), in
        a function decorated with one or that opens one itself (taming-transformers'
        `run_model` returns `(...).cpu()` after its `with torch.no_grad():` block). Outside any
        loop, the function it is in, for `handed_off` to ask once the walk is done whether the
        module calls it only in evaluation loops (`evaluated_only`)."""
        module_flow = self.ctx.flow
        assert module_flow is not None
        loop = module_flow.innermost_step_loop(ancestors)
        if loop is not None and module_flow.trains(loop):
            return False
        if loop is not None and module_flow.loop_step(loop) == "a loop over a DataLoader":
            return True
        for node in ancestors:
            if type(node) is cst.With and any(self._no_autograd(item.item) for item in node.items):
                return True
            if type(node) is cst.FunctionDef and any(self._no_autograd(d.decorator) for d in node.decorators):
                return True
        function = flow.enclosing_function(ancestors)
        if function is None:
            return False
        return any(
            type(statement) is cst.With and any(self._no_autograd(item.item) for item in statement.items)
            for statement in function.body.body
        ) or (function if loop is None else False)

    def _no_autograd(self, expression: cst.BaseExpression) -> bool:
        called = expression.func if type(expression) is cst.Call else expression
        return bool(self.ctx.qualified_names(called) & _NO_AUTOGRAD)

    def _sends_numpy_back(self, node: cst.Call) -> bool:
        """Whether the function that reads a tensor out with `.numpy()` makes a tensor of NumPy
        data on a device again (vits' monotonic alignment: `.cpu().numpy()`, a Cython search,
        then `torch.from_numpy(path).to(device=device)`; point-e's `torch.tensor([...],
        device=sigmas.device)`), or gives the copy it binds to a torch function (Tacotron 2's
        `pack_padded_sequence`), also through what is worked out from the copy (guided
        diffusion's dynamic thresholding: `s = np.percentile(np.abs(x2), p)`, then
        `th.clip(x, -s, s)`), or gives it to a processor that makes tensors of it which the
        function moves to a device (seed-vc's Whisper features: `extractor([w.cpu().numpy() for
        w in waves], return_tensors="pt")`, then `.to(device)`): a round trip in the step, not
        an output."""
        ancestors = self.ctx.ancestors
        function = flow.enclosing_function(ancestors)
        if function is None:
            return False
        # the loop it is read in, if any: a long function's other loops bring other data over
        below = ancestors[ancestors.index(function) :]
        region = next((node.body for node in reversed(below) if type(node) in (cst.For, cst.While)), function.body)
        # `lengths = lengths.cpu().numpy()`: the copy itself, by name (also a list made of copies)
        top = len(ancestors) - 1
        while top > 0 and type(ancestors[top]) in (cst.ListComp, cst.List, cst.Element):
            top -= 1
        parent, value = ancestors[top], ancestors[top + 1] if top + 1 < len(ancestors) else node
        copied = type(parent) is cst.Assign and parent.value is value and len(parent.targets) == 1
        target = parent.targets[0].target if copied else None  # type: ignore[attr-defined]
        bound = {target.value} if type(target) is cst.Name else set()
        after = processed = False  # what runs after the copy: only there can torch be given it
        for each in descendants(region):
            after = after or each is node
            if after and bound and type(each) is cst.Assign and len(each.targets) == 1:
                made = each.targets[0].target
                if type(made) is cst.Name and reads_names(each.value, bound):
                    bound.add(made.value)  # worked out from the copy
            if type(each) is not cst.Call:
                continue
            if _makes_torch_tensors(each):
                processed = processed or self._given_copy(each, node, bound, after)
            if _moves(self.ctx, each) and (
                _made_of_numpy(self.ctx, each.func) or (processed and after) or self._processed(each.func, node, bound)
            ):
                return True
            if self.ctx.qualified_names(each.func) & _FROM_NUMPY and self._placed_off_host(each):
                return True
            if after and any(self._torch_computes_with(each, name) for name in bound):
                return True
        return False

    def _kept_to_send_back(self) -> bool:
        """Whether a whole copy to the host is appended to a list that the function sends back
        to a device later (BLIP's retrieval evaluation: `image_feats.append(image_feat.cpu())`,
        then `image_feats = torch.cat(image_feats)` and `image_feats[topk_idx].to(device)`): a
        round trip, kept in host memory between, not an output."""
        ancestors = self.ctx.ancestors
        appending = ancestors[-2] if len(ancestors) >= 2 and type(ancestors[-1]) is cst.Arg else None
        func = appending.func if type(appending) is cst.Call else None
        if type(func) is not cst.Attribute or func.attr.value != "append" or type(func.value) is not cst.Name:
            return False
        kept, function = func.value.value, flow.enclosing_function(ancestors)
        for each in descendants(function.body) if function is not None else ():
            if type(each) is cst.Call and patterns.method_name(each) in ("to", "cuda"):
                moved = each.func.value  # type: ignore[attr-defined]
                while type(moved) in (cst.Subscript, cst.Call, cst.Attribute):  # `kept[i].repeat(k, 1)`
                    moved = moved.value if type(moved) is not cst.Call else moved.func
                if type(moved) is cst.Name and moved.value == kept:
                    return True
        return False

    def _processed(self, func: cst.BaseExpression, copy: cst.Call, bound: set[str]) -> bool:
        """`extractor(waves, return_tensors="pt").to(device)`: what is moved is what a processor
        made of the copy."""
        made = func.value if type(func) is cst.Attribute else None
        return type(made) is cst.Call and _makes_torch_tensors(made) and self._given_copy(made, copy, bound, True)

    @staticmethod
    def _given_copy(call: cst.Call, copy: cst.Call, bound: set[str], after: bool) -> bool:
        """Whether a call is given the copy, in its arguments or by a name bound to it."""
        return reads_names(call, bound) if after and bound else any(each is copy for each in descendants(call))

    def _torch_computes_with(self, call: cst.Call, name: str) -> bool:
        """`pack_padded_sequence(x, input_lengths)` after `input_lengths = lengths.cpu().numpy()`
        (Tacotron 2's encoder): a torch function given the copy, not a constructor of a tensor
        (which stays on the host unless placed) nor a writer."""
        given = any(type(arg.value) is cst.Name and arg.value.value == name for arg in call.args)
        names = self.ctx.qualified_names(call.func) if given else frozenset()
        if names & (_FROM_NUMPY | _WRITERS) or any(each.endswith("Tensor") for each in names):
            return False
        return any(each.startswith("torch.") for each in names)

    def _placed_off_host(self, call: cst.Call) -> bool:
        """`torch.tensor(data, device=x.device)`: host data made a tensor on a device (not
        `device="cpu"`, not a tensor already, nor a display of numbers such as
        `torch.tensor((w, h, w, h), device=device)`)."""
        device, data = patterns.keyword(call, "device"), patterns.positional(call, 0)
        if device is None or data is None or type(data.value) in (cst.Tuple, cst.List):
            return False
        return patterns.string_value(device.value) != "cpu" and not tensor_valued(self.ctx, data.value)

    def _written_out(self, node: cst.Call) -> bool:
        """Whether a host copy is written out: given to a writer (`np.save(path, x.cpu().numpy())`)
        or bound to a name that one is given in the same function (`img = x.cpu().numpy()`, then
        `Image.fromarray(img).save(path)`). The node is the one being visited."""
        ancestors = self.ctx.ancestors
        for index in range(len(ancestors) - 1, 0, -1):
            parent = ancestors[index]
            if type(parent) is cst.Call and self.ctx.qualified_names(parent.func) & _WRITERS:
                return True
            if type(parent) is cst.SimpleStatementLine or isinstance(parent, cst.BaseCompoundStatement):
                break
        bound = self._bound_name()
        return bound is not None and bound in self._written_names(flow.enclosing_function(ancestors) or ancestors[0])

    def _bound_name(self) -> str | None:
        """The one name the statement being visited binds by `=` (`img = x.cpu().numpy()`)."""
        ancestors = self.ctx.ancestors
        for index in range(len(ancestors) - 1, 0, -1):
            if type(ancestors[index]) is cst.SimpleStatementLine:
                assign = ancestors[index + 1]
                if type(assign) is cst.Assign and len(assign.targets) == 1:
                    target = assign.targets[0].target
                    return target.value if type(target) is cst.Name else None
                return None
            if isinstance(ancestors[index], cst.BaseCompoundStatement):
                return None
        return None

    def _written_names(self, scope: cst.CSTNode) -> frozenset[str]:
        """The names read in the arguments of the writers called in a function (or module)."""
        key = id(scope)
        if key not in self._writers_read:
            self._writers_read[key] = frozenset(
                name.value
                for call in descendants(scope)
                if type(call) is cst.Call and self.ctx.qualified_names(call.func) & _WRITERS
                for name in descendants(call)
                if type(name) is cst.Name
            )
        return self._writers_read[key]

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        """`f"loss {loss:.4f}"`: formatting a tensor reads its value on the host."""
        if tensor_valued(self.ctx, node.expression):
            self._report_formatted(node.expression)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        """`"%11.4g" * 3 % (*mloss, n)`: %-formatting reads each tensor's value on the host."""
        if not isinstance(node.operator, cst.Modulo) or not _is_text(node.left):
            return
        right = node.right
        values = [element.value for element in right.elements] if isinstance(right, cst.Tuple) else [right]
        formatted = next((value for value in values if tensor_valued(self.ctx, value)), None)
        if formatted is not None:
            self._report_formatted(formatted)

    def _report_format_arguments(self, node: cst.Call) -> None:
        """`"loss {:.6f}".format(loss)`: `str.format` reads each tensor it formats on the host."""
        formatted = next((arg.value for arg in node.args if not arg.star and tensor_valued(self.ctx, arg.value)), None)
        if formatted is not None:
            self._report_formatted(formatted)

    def _logged_tensor(self, node: cst.Call, method: str | None) -> cst.BaseExpression | None:
        """The tensor a logger writes as a number: TensorBoard's `writer.add_scalar(tag,
        loss, step)` (its value), `writer.add_scalars(tag, {"train": loss}, step)` and
        `wandb.log({"loss": loss})` (a value of the dict, also `dict(loss=loss)`), also through
        a run object (llama-recipes' `wandb_run.log({...})`, the run `wandb.init()` made); each
        reads it on the host."""
        if method in _SCALAR_LOGGERS:
            value = patterns.argument(node, 1, "scalar_value")
            return value.value if value is not None and tensor_valued(self.ctx, value.value) else None
        if method == "add_scalars":
            logged = patterns.argument(node, 1, "tag_scalar_dict")
        elif node.args and (self.ctx.qualified_names(node.func) & {"wandb.log"} or self._logs_to_wandb_run(node)):
            logged = node.args[0]
        else:
            return None
        values = _dict_values(self.ctx, logged.value) if logged is not None else []
        return next((value for value in values if tensor_valued(self.ctx, value)), None)

    def _logs_to_wandb_run(self, node: cst.Call) -> bool:
        """`run.log(...)` on what `wandb.init()` returned, or on a name that says it is a wandb
        run where nothing in the module says what it holds (a parameter: `wandb_run`)."""
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value != "log" or type(func.value) is not cst.Name:
            return False
        values = self.ctx.assigned_values(func.value)
        if values:
            return any(
                type(value) is cst.Call and "wandb.init" in self.ctx.qualified_names(value.func) for value in values
            )
        return "wandb" in func.value.value.lower()

    def _printed_tensor(self, node: cst.Call) -> cst.BaseExpression | None:
        """The first tensor `print(...)` is given (LoRA's `print(pre_norm)` every step): printing
        a tensor formats its values on the host."""
        if type(node.func) is not cst.Name or node.func.value != "print" or self.ctx.qualified_names(node.func):
            return None
        given = (arg.value for arg in node.args if arg.keyword is None and not arg.star)
        return next((value for value in given if tensor_valued(self.ctx, value)), None)

    def _under_tensor_test(self, ancestors: Sequence[cst.CSTNode]) -> bool:
        """In the body of an `if` that compares tensor values (hifi-gan's `if torch.min(y) <
        -1.: print('min value is ', torch.min(y))`): the test is the sync every step
        (tensor-dependent-control-flow says so); what the branch prints, it prints only when
        the values are off."""
        for index in range(len(ancestors) - 2, -1, -1):
            node = ancestors[index]
            if type(node) in (cst.FunctionDef, cst.For, cst.While):
                return False
            if type(node) is cst.If and ancestors[index + 1] is node.body and type(node.test) is cst.Comparison:
                parts = (node.test.left, *(link.comparator for link in node.test.comparisons))
                return any(tensor_valued(self.ctx, part) for part in parts)
        return False

    def _math_of(self, node: cst.Call) -> cst.BaseExpression | None:
        """The argument of `math.isnan(x)`, `math.sqrt(x)`...: Python's math reads a tensor as
        a number (tacotron2's `math.isnan(grad_norm)` every step)."""
        if len(node.args) != 1 or node.args[0].star or not self.ctx.qualified_names(node.func) & _MATH:
            return None
        return node.args[0].value

    def _report_formatted(self, tensor: cst.BaseExpression, how: str = "formatting") -> None:
        ancestors = self.ctx.ancestors
        where = self.step_context(ancestors)
        if where is not None and not in_host_memory(self.ctx, tensor):
            self.report_in_step(tensor, where, call=f"{how} `{cst.Module([]).code_for_node(tensor)}`")

    def _tensor_as_number(self, node: cst.Call) -> tuple[cst.BaseExpression, str] | None:
        """The tensor given where torch or `range()` reads a Python number, and how to name it:
        `torch.full(size, alphas[t])`, `F.one_hot(y, num_classes=labels.max() + 1)`, `range(n)`."""
        if isinstance(node.func, cst.Name) and node.func.value == "range" and not self.ctx.qualified_names(node.func):
            function, given = "range", [(arg.value, "bound") for arg in node.args if not arg.star]
        else:
            names = self.ctx.qualified_names(node.func)
            function = next((name for name in names if name in _NUMBER_ARGUMENTS), "")
            given = []
            for position, keyword in _NUMBER_ARGUMENTS.get(function, ()):
                arg = patterns.keyword(node, keyword) or patterns.positional(node, position)
                if arg is not None:
                    given.append((arg.value, _arange_end(node) if keyword == "start" else keyword))
            data = patterns.argument(node, 0, "data") if "torch.tensor" in names else None
            if data is not None and type(data.value) in (cst.List, cst.Tuple):
                # `torch.tensor([t])`: a list is read item by item as Python numbers (a tensor alone is copied)
                function = "torch.tensor"
                items = [element.value for element in data.value.elements]  # type: ignore[attr-defined]
                given = [(item, "list item") for item in items if not self._tested_not_tensor(item)]
        found = next(((value, what) for value, what in given if tensor_valued(self.ctx, value)), None)
        if found is None:
            return None
        shown = function.replace("torch.nn.functional.", "F.")
        return found[0], f"a tensor as `{shown}()`'s {found[1]}"

    def _tested_not_tensor(self, node: cst.BaseExpression) -> bool:
        """A name where an enclosing test says it is no tensor: audiocraft's `else` of `if
        type(step) is torch.Tensor:` (also `isinstance(step, torch.Tensor)`, `torch.is_tensor(step)`,
        and the body of such a test negated)."""
        if type(node) is not cst.Name:
            return False
        ancestors = self.ctx.ancestors
        for index, branch in enumerate(ancestors[:-1]):
            if type(branch) is not cst.If:
                continue
            test, negated = branch.test, False
            if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
                test, negated = test.expression, True
            if self._tests_tensor_type(test, node.value):
                inside = ancestors[index + 1]
                if (inside is branch.body) == negated:
                    return True
        return False

    def _tests_tensor_type(self, test: cst.BaseExpression, name: str) -> bool:
        """`type(name) is torch.Tensor`, `isinstance(name, torch.Tensor)`, `torch.is_tensor(name)`."""
        if type(test) is cst.Comparison and len(test.comparisons) == 1:
            link = test.comparisons[0]
            called = test.left
            return (
                type(link.operator) in (cst.Is, cst.Equal)
                and type(called) is cst.Call
                and patterns.dotted(called.func) == "type"
                and bool(called.args)
                and patterns.dotted(called.args[0].value) == name
                and "torch.Tensor" in self.ctx.qualified_names(link.comparator)
            )
        if type(test) is not cst.Call or not test.args or patterns.dotted(test.args[0].value) != name:
            return False
        if "torch.is_tensor" in self.ctx.qualified_names(test.func):
            return True
        kind = patterns.positional(test, 1)
        return (
            patterns.dotted(test.func) == "isinstance"
            and kind is not None
            and "torch.Tensor" in self.ctx.qualified_names(kind.value)
        )

    def _scale_read(self, node: cst.Call) -> tuple[cst.BaseExpression, str] | None:
        """A GradScaler's loss scale read as a number: `scaler.get_scale()`, or
        `scaler.state_dict()["scale"]` (Swin's logging), each an `.item()` of the scale tensor.
        The receiver is made `GradScaler(...)` or named for one (a scaler given as a parameter)."""
        method = patterns.method_name(node)
        if method not in ("get_scale", "state_dict") or node.args:
            return None
        receiver = node.func.value  # type: ignore[attr-defined]
        bound = self.ctx.flow.bound_values(receiver) if self.ctx.flow is not None else []
        made = [self.ctx.qualified_names(value.func) for value in bound if type(value) is cst.Call]
        if not any(names & patterns.GRAD_SCALERS for names in made) and not _SCALER_NAME.search(
            patterns.dotted(receiver)
        ):
            return None
        if method == "get_scale":
            return node, "`.get_scale()`"
        parent = self.ctx.parent
        if type(parent) is not cst.Subscript or parent.value is not node or len(parent.slice) != 1:
            return None
        index = parent.slice[0].slice
        if type(index) is not cst.Index or patterns.string_value(index.value) != "scale":
            return None
        return node, '`.state_dict()["scale"]`'

    def _compared_tensor(self, node: cst.Call) -> cst.BaseExpression | None:
        """The tensor among the arguments of `min(a, b)` / `max(a, b)` (also a reduction of one:
        YOLOv9's `max(target_scores.sum(), 1)`): Python compares them, reading the tensor's
        value on the host."""
        if not (isinstance(node.func, cst.Name) and node.func.value in ("min", "max")) or len(node.args) < 2:
            return None
        if self.ctx.qualified_names(node.func) or any(arg.star or arg.keyword for arg in node.args):
            return None
        return next(
            (
                arg.value
                for arg in node.args
                if tensor_valued(self.ctx, arg.value) or tensor_method(self.ctx, arg.value, _VALUE_REDUCTIONS)
            ),
            None,
        )

    def _owned_elsewhere(self, ancestors: Sequence[cst.CSTNode], node: cst.Call) -> bool:
        """A tensor-valued slice bound (PC505) or a tensor-valued test (PC504)."""
        found = controlling_part(ancestors, node)
        if found is None:
            return False
        holder, part = found
        if isinstance(holder, cst.Slice):
            return reads_tensor_value(self.ctx, part) and not read_in_host_memory(self.ctx, part)
        return tests_tensor_value(self.ctx, part)


def _dict_values(ctx: FileContext, logged: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values of a dict display, or of a `dict(loss=loss, ...)` call's keywords."""
    if type(logged) is cst.Dict:
        return [element.value for element in logged.elements if type(element) is cst.DictElement]
    if type(logged) is cst.Call and type(logged.func) is cst.Name and logged.func.value == "dict":
        if not ctx.qualified_names(logged.func):
            return [arg.value for arg in logged.args if arg.keyword is not None]
    return []


@dataclass(frozen=True)
class _ReaderCall:
    """A call that gives a tensor to another module's function that reads it back."""

    call: cst.Call
    read: tuple[str, str]  # where and how the callee reads it (`Project.tensor_reader`)
    function: cst.FunctionDef | None  # the function the call is made in
    ancestors: tuple[cst.CSTNode, ...]
    chain: tuple[cst.CSTNode, ...]
    scope: Scope


def _is_text(node: cst.BaseExpression) -> bool:
    """A string literal, or one repeated or joined (`"%11s" * 2 + "%11.4g" * 5`)."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    return isinstance(node, cst.BinaryOperation) and (_is_text(node.left) or _is_text(node.right))


def _syncs(call: cst.CSTNode) -> bool:
    """`.item()`, `.tolist()`, `.cpu()`, `.numpy()` or `.to("cpu")`: a copy to the host."""
    if type(call) is not cst.Call or type(call.func) is not cst.Attribute:  # type: ignore[attr-defined]
        return False
    method = call.func.attr.value  # type: ignore[attr-defined]
    if method == "to":
        places = [arg.value for arg in call.args if arg.keyword is None or arg.keyword.value == "device"]
        return any(patterns.string_value(place) == "cpu" for place in places)
    return method in _SYNCS


def _copied(node: cst.Call) -> cst.BaseExpression:
    """The tensor a chain of syncs copies to the host: `x` in `x.cpu().float().numpy()`."""
    assert isinstance(node.func, cst.Attribute)
    copied = current = node.func.value
    while isinstance(current, cst.Call) and isinstance(current.func, cst.Attribute):
        if _syncs(current):
            copied = current.func.value
        current = current.func.value
    return copied


def _moves(ctx: FileContext, call: cst.Call) -> bool:
    """`x.to(device=...)`, `x.to(device)`, `x.cuda()`: a move of the receiver (not `x.to(dtype)`)."""
    method = patterns.method_name(call)
    if method == "cuda" or (method == "to" and patterns.keyword(call, "device") is not None):
        return True
    first = patterns.positional(call, 0) if method == "to" else None
    return first is not None and ctx.flow is not None and not ctx.flow.is_dtype(first.value)


def _makes_torch_tensors(call: cst.Call) -> bool:
    """A processor asked for PyTorch tensors: `return_tensors="pt"` (Hugging Face's)."""
    asked = patterns.keyword(call, "return_tensors")
    return asked is not None and patterns.string_value(asked.value) == "pt"


def _made_of_numpy(ctx: FileContext, func: cst.BaseExpression) -> bool:
    """The receiver of a method call is `torch.from_numpy(...)` (or `torch.tensor`/`as_tensor`)."""
    receiver = func.value if type(func) is cst.Attribute else None
    return type(receiver) is cst.Call and bool(ctx.qualified_names(receiver.func) & _FROM_NUMPY)


def _inside_outer_sync(ancestors: Sequence[cst.CSTNode]) -> bool:
    """`x.cpu().float().numpy()`: one finding, on the outermost sync of a method chain; past
    `.numpy()` the chain holds an array (`x.cpu().numpy().tolist()`: the finding is `.numpy()`'s)."""
    index, child = len(ancestors) - 1, None
    while index >= 1:
        attribute, call = ancestors[index], ancestors[index - 1]
        if not (isinstance(attribute, cst.Attribute) and isinstance(call, cst.Call) and call.func is attribute):
            return False
        if child is not None and attribute.value is not child:
            return False
        if type(attribute.value) is cst.Call and patterns.method_name(attribute.value) == "numpy":
            return False
        if _syncs(call):
            return True
        index, child = index - 2, call
    return False


def _arange_end(call: cst.Call) -> str:
    """How `torch.arange` names its first argument: the end where it is given alone (`arange(n)`)."""
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return "end" if len(positional) == 1 and patterns.keyword(call, "end") is None else "start"
