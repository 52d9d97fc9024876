from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from portcheck import flow, patterns, project
from portcheck.flow import BATCH_GETTER, COLLATE_NAME, NESTED_SCOPES, enclosing_function
from portcheck.project import Project
from portcheck.rewrites.calls import is_none
from portcheck.rule import UNPLACED, FileContext, Invalid, Rule, Valid
from portcheck.rules.shapes import RECOMPILE_SEVERITY, advice, defined_names, resolved_call
from portcheck.walk import descendants

_PAD_SEQUENCE = frozenset({"torch.nn.utils.rnn.pad_sequence"})
_COLLATORS = frozenset(
    {"transformers.DataCollatorWithPadding", "transformers.data.data_collator.DataCollatorWithPadding"}
)
# torchtext's iterators that batch examples of similar length and pad them to the longest.
_BUCKET_ITERATORS = frozenset(
    f"torchtext.{package}.{name}"
    for package in ("data", "legacy.data", "data.iterator", "legacy.data.iterator")
    for name in ("BucketIterator", "BucketIterator.splits")
)
_FIELDS = frozenset(f"torchtext.{package}.Field" for package in ("data", "legacy.data", "data.field"))
# The least `pad_to_multiple_of=` that buckets lengths (TPU guides pad to multiples of 64 or 128).
_FEW_BUCKETS = 64
_TOKENIZER_KEYWORDS = frozenset({"padding", "max_length", "truncation", "pad_to_multiple_of"})
# the legacy typed constructors, given sizes (`torch.LongTensor(n, longest)`) or data (a list)
_TYPED = frozenset(f"torch.{name}" for name in ("Tensor", "LongTensor", "IntTensor", "FloatTensor", "HalfTensor"))
_SIZE_FACTORIES = frozenset(f"torch.{name}" for name in ("zeros", "ones", "full", "empty")) | _TYPED
_SORT = frozenset({"torch.sort"})
_LENGTH_TENSORS = frozenset({"torch.tensor", "torch.as_tensor"})
_PAD_NAME = re.compile(r"^pad(\d?d|_\w+)?$", re.IGNORECASE)  # pad, pad1d, pad_to_length; not padding
# An array's largest value along an axis: `np.max([t.shape for t in tensors], 0)` is the longest shape.
_ARRAY_MAX = frozenset({"numpy.max", "numpy.amax", "torch.max", "torch.amax"})
# A padding helper's parameter that rounds the longest length up (trl's `pad_to_multiple_of`).
_MULTIPLE = re.compile(r"multiple", re.IGNORECASE)
_PARTIAL = frozenset({"functools.partial"})
# The loops whose function runs once per epoch or evaluation over a DataLoader (not per request,
# whose loops decode or go over chunks and frames).
_EPOCHS = frozenset({"a loop over a DataLoader", "a training loop"})
_BATCHING_CLASS = re.compile(r"collat|token|processor", re.IGNORECASE)  # classes whose `padding=` pads batches


class PadToLongestBatching(Rule):
    """## What it does
    Reports batching that pads to the longest sequence of each batch:
    `torch.nn.utils.rnn.pad_sequence` in a collate function (named like one, a class named
    like a collator, or passed as `collate_fn=`), a batch made there or in a function that
    fetches a step's batch (`get_batch`) with a size that is the longest of the batch
    (`torch.zeros(len(caps), max(lengths)).long()`, also through a name bound to `max(...)`
    or to a function of the module that returns what it keeps the `max(...)` of, such as
    DETR's `_max_by_axis`; reported at the `max(...)`, or that call), also in a function of
    the module that a collate function calls (DETR's `nested_tensor_from_tensor_list`), and at
    a batch function's call of another module's function that pads what it is given to its
    longest (trl's collators calling `trainer/utils.py`'s `pad()`, sized by `np.max([t.shape for
    t in tensors], 0)`) unless the call passes a multiple that leaves few lengths, and where
    such a function of another module is given as `collate_fn=` (also through
    `functools.partial`, or made by another module's function that returns it: litgpt's
    `get_sft_collate_fn(...)`) or named by a string (torchtune's configured default
    `"torchtune.data.padded_collate_sft"`); the
    same sizes, and a list padded to the longest (`ids + [bos] * (longest - len(ids))`), where
    they run every step: in a step loop (nanochat's evaluation and RL rollouts), a model's
    forward (MiniGPT-4) or a function one of those calls; calls with `padding=True` or
    `padding="longest"` (tokenizers: `tokenizer(...)`, `tok.pad(...)`; of classes, only
    collators, tokenizers and processors: `DataCollatorForSeq2Seq(tok, padding=True)`), also
    through a name bound to a choice of it (`padding = "max_length" if flag else "longest"`)
    or a collator's own default for `self.padding` (a dataclass field `padding: str =
    "longest"`), and `transformers.DataCollatorWithPadding(...)` without `padding="max_length"`, and
    torchtext's `BucketIterator` (also `.splits`) where no `Field` of the module sets
    `fix_length=`. Calls that
    also pass `pad_to_multiple_of=` already bucket lengths and are left alone (not a literal
    multiple under 64, such as the 8 that aligns to tensor cores, nor a field that defaults
    to None, nor a name bound to either: the accelerate examples' `pad_to_multiple_of = 8`
    else `None`; and `max_length=` bounds only a call that can truncate, not `tok.pad(...,
    padding="longest")`, which pads to the longest whatever it says), and so is a
    tokenizer given one item of a loop or comprehension (`[tok(t, padding="longest") for t in
    texts]`), which has nothing to pad against, and a call before the loop of a function that
    runs an epoch or an evaluation (ALBEF's answer list, padded once for every step).

    ## Why is this bad?
    Every batch gets the length of its longest member, so the input shape changes from step to
    step. XLA, TorchTPU and Gaudi compile a new graph for each new length, and Trainium needs
    all shapes known ahead of time.

    ## Example
    ```python
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    ```

    ## Use instead
    ```python
    batch = tokenizer(texts, padding="max_length", max_length=512, truncation=True, return_tensors="pt")
    ```
    or bucket lengths to a few sizes (`pad_to_multiple_of=128` on TPU).

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: the maximum length is a property of the data.
    """

    code = "PC507"
    name = "pad-to-longest-batching"
    message = "{what} pads each batch to its longest sequence, so every new length compiles a new graph"
    hint = 'pad to a fixed length (padding="max_length", max_length=N) or to a few bucket sizes{advice}'
    severity = RECOMPILE_SEVERITY
    triggers = (
        b"pad_sequence", b"padding", b"DataCollatorWithPadding", b"collat", b"Collat", b"BucketIterator",
        b"get_batch", b"next_batch", b"sample_batch", b"load_batch", b"max(",
    )  # fmt: skip

    VALID = [
        Valid(  # ALBEF's evaluation: the answer list, padded once before the loop, has one length
            "import torch\ndef evaluation(model, loader, tokenizer, answers):\n"
            "    answer_input = tokenizer(answers, padding='longest', return_tensors='pt')\n"
            "    for image, question in loader:\n        model(image, question, answer_input)\n"
        ),
        Valid(  # a field of the class read as padding, with no default or a fixed one
            "import torch\nclass TextCollator:\n    mode = 'max_length'\n    def __init__(self, tok, padding):\n"
            "        self.tok, self.padding = tok, padding\n    def __call__(self, features):\n"
            "        return self.tok.pad(features, padding=self.padding, return_tensors='pt'), self.tok.pad(\n"
            "            features, padding=self.mode, max_length=64)\n"
        ),
        Valid(  # sorted ascending, the first is the shortest; a typed constructor given data
            "import torch\ndef collate_fn(batch):\n"
            "    lengths, order = torch.sort(torch.LongTensor([len(x) for x in batch]))\n"
            "    return torch.LongTensor(len(batch), lengths[0]), torch.LongTensor([max(lengths)])\n"
        ),
        Valid(  # every example padded to a fixed length
            "import torch\nfrom torchtext.legacy import data\nSRC = data.Field(fix_length=128)\n"
            "train_iterator, val_iterator = data.BucketIterator.splits((train, val), batch_size=64)\n"
        ),
        Valid('import torch\nenc = tokenizer(texts, padding="max_length", max_length=128)\n'),
        Valid(
            "import torch\ndef encode(prompt):\n"
            "    ids = tokenizer(prompt, padding='max_length', max_length=77, truncation=True).input_ids\n"
            "    untruncated = tokenizer(prompt, padding='longest').input_ids\n    return ids\n"
        ),
        Valid(
            "import torch\ndef encode(prompt):\n    ids = tok(prompt, padding=True, pad_to_multiple_of=128).input_ids\n"
            "    untruncated = tok(prompt, padding='longest').input_ids\n    return ids\n"
        ),
        Valid(
            "import torch\ndef encode(prompt):\n    ids = tokenizer(prompt, max_length=77, truncation=True).input_ids\n"
            "    untruncated = tokenizer(prompt, padding=True).input_ids\n    return ids\n"
        ),
        Valid("from torch import nn\nconv = nn.Conv2d(3, 8, 3, padding=True)\nx = nn.functional.pad(x, (0, 1))\n"),
        Valid("import torch\nlayer = WeightOnlyInt4Linear(4096, 4096, groupsize=128, padding=True)\n"),
        Valid("from torch.nn.utils.rnn import pad_sequence\ndef encode(seqs):\n    return pad_sequence(seqs)\n"),
        Valid(  # one text per call: nothing to pad against (LLaVA's _tokenize_fn)
            "import torch\ndef _tokenize_fn(strings, tokenizer):\n"
            "    return [tokenizer(text, padding='longest', truncation=True) for text in strings]\n"
        ),
        Valid(  # LLaVA: a dataset item's conversation, encoded by a helper of its `__getitem__`; the collator pads
            "import torch\ndef preprocess(conversations, tokenizer):\n"
            "    return tokenizer(conversations, return_tensors='pt', padding='longest').input_ids\n"
            "class SupervisedDataset(torch.utils.data.Dataset):\n    def __getitem__(self, i):\n"
            "        return preprocess([self.items[i]], self.tokenizer)\n"
        ),
        Valid("import transformers\nc = transformers.DataCollatorWithPadding(tok, padding='max_length')\n"),
        Valid(
            "from transformers import DataCollatorWithPadding\nc = DataCollatorWithPadding(tok, pad_to_multiple_of=128)\n"
        ),
        Valid("def collate(torch, batch):\n    return torch.nn.utils.rnn.pad_sequence(batch)\n"),
        Valid(  # the largest size, but in no function that makes a step's batch
            "import torch\ndef largest(sizes):\n    top = sizes[0]\n    for s in sizes:\n        top = max(top, s)\n"
            "    return top\ndef canvas(images):\n    return torch.zeros(largest([i.shape[-1] for i in images]))\n"
        ),
        Valid(  # a prompt padded once, by a function nothing calls in a step
            "import torch\ndef encode_prompts(prompts, pad):\n    longest = max(len(p) for p in prompts)\n"
            "    return torch.tensor([p + [pad] * (longest - len(p)) for p in prompts])\n"
        ),
        Valid(  # a fixed length, or the longest outside a collate function
            "import torch\ndef collate_fn(data):\n    targets = torch.zeros(len(data), MAX_LEN).long()\n"
            "    return targets\ndef stats(lengths):\n    return torch.zeros(max(lengths))\n"
        ),
    ]
    INVALID = [
        Invalid(  # the accelerate examples: `.pad()` ignores max_length when padding to the longest, and
            # the multiple is 8 or None
            "import torch\ndef collate_fn(examples, on_xla, mixed):\n    max_length = 128 if on_xla else None\n"
            "    if mixed:\n        pad_to_multiple_of = 8\n    else:\n        pad_to_multiple_of = None\n"
            "    return tokenizer.pad(examples, padding='longest', max_length=max_length,\n"
            "                         pad_to_multiple_of=pad_to_multiple_of, return_tensors='pt')\n",
            lines=[8],
        ),
        Invalid(  # trl's `pad`: NumPy's largest shape of the items sizes the batch
            "import numpy as np\nimport torch\ndef pad(tensors, padding_value=0):\n"
            "    shape = np.max([t.shape for t in tensors], 0).tolist()\n"
            "    out = torch.full((len(tensors), *shape), padding_value)\n"
            "    for i, t in enumerate(tensors):\n        out[i, : t.shape[0]] = t\n    return out\n"
            "class PreferenceCollator:\n    def __call__(self, examples):\n"
            "        return pad([torch.tensor(e['ids']) for e in examples])\n",
            lines=[4],
            message="`np.max(...)` sizing `torch.full(...)` in a batch function",
        ),
        Invalid(  # Matcha-TTS: the longest rounded up by a function of another module, then the size
            "import torch\nfrom matcha.utils.model import fix_len_compatibility\nclass TextMelBatchCollate:\n"
            "    def __call__(self, batch):\n        y_max_length = max([item['y'].shape[-1] for item in batch])\n"
            "        y_max_length = fix_len_compatibility(y_max_length)\n"
            "        return torch.zeros((len(batch), 80, y_max_length))\n",
            lines=[5],
        ),
        Invalid(  # F5-TTS's collate_fn: the longest of a tensor of the items' lengths, as `amax()`
            "import torch\nimport torch.nn.functional as F\ndef collate_fn(batch):\n"
            "    mel_lengths = torch.LongTensor([spec.shape[-1] for spec in batch])\n    longest = mel_lengths.amax()\n"
            "    return torch.stack([F.pad(spec, (0, longest - spec.size(-1))) for spec in batch])\n",
            lines=[5],
        ),
        Invalid(  # fish-speech's VQGAN collator: the longest of a tensor of the items' lengths
            "import torch\nimport torch.nn.functional as F\nclass VQGANCollator:\n    def __call__(self, batch):\n"
            "        audio_lengths = torch.tensor([len(x['audio']) for x in batch])\n"
            "        audio_maxlen = audio_lengths.max()\n"
            "        audios = [F.pad(x['audio'], (0, audio_maxlen - len(x['audio']))) for x in batch]\n"
            "        return torch.stack(audios), audio_lengths\n",
            lines=[6],
            message="`audio_lengths.max(...)` sizing `F.pad(...)`",
        ),
        Invalid(  # vits: a legacy typed constructor sized by the longest
            "import torch\nclass TextCollate:\n    def __call__(self, batch):\n"
            "        longest = max([len(x[0]) for x in batch])\n"
            "        padded = torch.LongTensor(len(batch), longest)\n        return padded.zero_()\n",
            lines=[4],
        ),
        Invalid(  # Tacotron 2: the longest length, sorted first
            "import torch as T\nclass TextMelCollate:\n    def __call__(self, batch):\n"
            "        lengths, order = T.sort(T.LongTensor([len(x[0]) for x in batch]), dim=0, descending=True)\n"
            "        longest = lengths[0]\n        padded = T.LongTensor(len(batch), longest)\n"
            "        return padded.zero_(), order\n",
            lines=[5],
            message="the first of a descending sort",
        ),
        Invalid(  # nanochat's chat evaluation: each batch of prompts padded to its longest, every step
            "import torch\ndef run_eval(model, batches, bos, device):\n    for prompt_ids in batches:\n"
            "        max_length = max(len(ids) for ids in prompt_ids)\n"
            "        padded = [ids + [bos] * (max_length - len(ids)) for ids in prompt_ids]\n"
            "        logits = model(torch.tensor(padded, dtype=torch.long, device=device))\n",
            lines=[4],
            message="`max(...)` sizing a padding list in ",
        ),
        Invalid(  # MiniGPT-4: the model pads its batch of embeddings to the longest in forward()
            "import torch\nclass Model(torch.nn.Module):\n    def forward(self, embs):\n"
            "        max_len = max(e.shape[0] for e in embs)\n"
            "        out = torch.zeros(len(embs), max_len, embs[0].shape[-1])\n        return self.llm(out)\n",
            lines=[4],
            message="`max(...)` sizing `torch.zeros(...)` in forward()",
        ),
        Invalid(  # parler-tts: a collator's own default, and a choice that pads to the longest unless a flag is set
            "import torch\nfrom dataclasses import dataclass\n@dataclass\nclass TextCollatorWithPadding:\n"
            "    tokenizer: object\n    padding: str = 'longest'\n    pad_to_multiple_of: int = None\n"
            "    def __call__(self, features):\n        return self.tokenizer.pad(features, return_tensors='pt',\n"
            "            padding=self.padding, pad_to_multiple_of=self.pad_to_multiple_of)\n"
            "def main(args, tok, ds, model):\n    padding = 'max_length' if args.pad_to_max_length else 'longest'\n"
            "    collate = TextCollatorWithPadding(tok, padding=padding)\n"
            "    for batch in torch.utils.data.DataLoader(ds, collate_fn=collate):\n        model(**batch).loss.backward()\n",
            lines=[6, 12],
            message="pads each batch to its longest sequence",
        ),
        Invalid(  # SimCSE: the model's input either way, each branch's padding= argument on its own line
            "def batcher(tokenizer, sentences, max_length):\n    if max_length is not None:\n"
            "        batch = tokenizer(\n            sentences,\n            padding=True,\n"
            "            max_length=max_length,\n        )\n    else:\n        batch = tokenizer(\n"
            "            sentences,\n            padding=True,\n        )\n    return batch\n",
            lines=[5, 11],
        ),
        Invalid(  # attention-is-all-you-need: torchtext pads each bucket to its longest sentence
            "import torch\nfrom torchtext.data import Field, BucketIterator\nSRC = Field(pad_token='<blank>')\n"
            "train_iterator = BucketIterator(train, batch_size=64, device=device, train=True)\n",
            lines=[4],
            message="torchtext's `BucketIterator` pads each batch",
        ),
        Invalid(  # BLIP's VQA: the answers are padded to the longest, then fed to the model
            "import torch\nclass BlipVQA(torch.nn.Module):\n    def forward(self, image, question, answer):\n"
            "        q = self.tokenizer(question, padding='longest', truncation=True, max_length=35,\n"
            "                           return_tensors='pt').to(image.device)\n"
            "        a = self.tokenizer(answer, padding='longest', return_tensors='pt').to(image.device)\n"
            "        return self.decoder(a.input_ids, q.input_ids)\n",
            lines=[4, 6],
        ),
        Invalid(
            "import torch\nenc = tokenizer(texts, padding=True, return_tensors='pt')\n",
            lines=[2],
            message="padding=True",
        ),
        Invalid(
            "import torch\ndef encode(p):\n    ids = tok(p, padding='longest', max_length=512, truncation=True)\n"
            "    check = tok(p, padding='longest')\n    return ids\n",
            lines=[3],
        ),
        Invalid(
            "import torch as T\ndef collate_fn(batch):\n    return T.nn.utils.rnn.pad_sequence(batch, batch_first=True)\n",
            lines=[3],
            message="pad_sequence",
        ),
        Invalid(
            "from torch.nn.utils.rnn import pad_sequence as pad\nimport torch.utils.data\n"
            "def batchify(b):\n    return pad(b)\nloader = torch.utils.data.DataLoader(ds, collate_fn=batchify)\n",
            lines=[4],
        ),
        Invalid(
            "from torch.nn.utils import rnn\nclass Collator:\n    def __call__(self, b):\n        return rnn.pad_sequence(b)\n",
            lines=[4],
        ),
        Invalid(  # pytorch-tutorial's image captioning
            "import torch\ndef collate_fn(data):\n    images, captions = zip(*data)\n"
            "    lengths = [len(cap) for cap in captions]\n    targets = torch.zeros(len(captions), max(lengths)).long()\n"
            "    longest = max(len(c) for c in captions)\n    ids = torch.full((len(data), longest + 1), 0)\n"
            "    return targets, ids\n",
            lines=[5, 6],
            message="` in a batch function pads each batch",
        ),
        Invalid(  # SV2TTS: items padded by a helper to the longest of the batch, rounded up to a multiple of r
            "import numpy as np\nimport torch\ndef collate_synthesizer(batch, r):\n    x_lens = [len(x[0]) for x in batch]\n"
            "    max_x_len = max(x_lens)\n    chars = np.stack([pad1d(x[0], max_x_len) for x in batch])\n"
            "    max_spec_len = max(x[1].shape[-1] for x in batch) + 1\n    if max_spec_len % r != 0:\n"
            "        max_spec_len += r - max_spec_len % r\n    mel = np.stack([pad2d(x[1], max_spec_len) for x in batch])\n"
            "    return torch.tensor(chars), torch.tensor(mel)\n",
            lines=[5, 7],
        ),
        Invalid(  # deepspeech.pytorch: the longest sample's length, read from the sample
            "import torch\ndef _collate_fn(batch):\n    longest_sample = max(batch, key=lambda p: p[0].size(1))[0]\n"
            "    max_seqlength = longest_sample.size(1)\n    inputs = torch.zeros(len(batch), 1, 161, max_seqlength)\n"
            "    return inputs\n",
            lines=[3],
        ),
        Invalid(  # lit-llama's get_batch: each batch padded to its longest by a helper, every step
            "import torch\ndef get_batch(data, ix):\n    input_ids = [data[i] for i in ix]\n"
            "    max_len = max(len(s) for s in input_ids)\n    def pad_right(x, pad_id):\n"
            "        n = max_len - len(x)\n        return torch.cat((x, torch.full((n,), pad_id, dtype=x.dtype)))\n"
            "    x = torch.stack([pad_right(x, pad_id=0) for x in input_ids])\n"
            "    y = torch.stack([pad_right(x, pad_id=-1) for x in input_ids])\n    return x, y\n",
            lines=[4],
            message="`max(...)` sizing `torch.full(...)`",
        ),
        Invalid(  # DETR: the collate function's helper pads the images to the largest size of each axis
            "import torch\ndef _max_by_axis(the_list):\n    maxes = the_list[0]\n    for sublist in the_list[1:]:\n"
            "        for index, item in enumerate(sublist):\n            maxes[index] = max(maxes[index], item)\n"
            "    return maxes\ndef collate_fn(batch):\n    batch = list(zip(*batch))\n"
            "    batch[0] = nested_tensor_from_tensor_list(batch[0])\n    return tuple(batch)\n"
            "def nested_tensor_from_tensor_list(tensor_list):\n"
            "    max_size = _max_by_axis([list(img.shape) for img in tensor_list])\n"
            "    batch_shape = [len(tensor_list)] + max_size\n"
            "    tensor = torch.zeros(batch_shape, dtype=tensor_list[0].dtype)\n    return tensor\n",
            lines=[13],
            message="`_max_by_axis(...)` sizing `torch.zeros(...)`",
        ),
        Invalid(
            "from transformers import DataCollatorWithPadding\nc = DataCollatorWithPadding(tokenizer=tok)\n", lines=[2]
        ),
        Invalid(
            "from transformers.utils import PaddingStrategy\nt = tok.pad(f, padding=PaddingStrategy.LONGEST)\n",
            lines=[2],
        ),
        Invalid("import torch\ncollator = DataCollatorForSeq2Seq(tokenizer, model=model, padding=True)\n", lines=[2]),
        Invalid(  # alpaca-lora: multiples of 8 align to tensor cores, but leave a length per 8 tokens
            "import transformers\nc = transformers.DataCollatorForSeq2Seq(tok, pad_to_multiple_of=8, padding=True)\n",
            lines=[2],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._collate_fns: set[str] = set()  # names passed as collate_fn=
        # padding calls, enclosing function names, label, and the step they run in (if any) or else
        # the function they are in, asked at the end whether the module calls it every step
        self._pads: list[tuple[cst.Call | cst.Subscript, list[str], str, str | None, cst.FunctionDef | None]] = []
        self._scopes: list[_Scope] = [_Scope()]  # the module, then each enclosing function
        self._buckets: list[cst.Call] = []  # torchtext's bucket iterators made
        self._fixed_fields = False  # whether a torchtext Field pads to `fix_length=`
        self._called: list[tuple[str, list[str]]] = []  # the module's functions called, and the callers' names
        self._done: list[tuple[_Scope, cst.FunctionDef]] = []  # functions that pad to the longest, judged at the end
        self._at: set[int] = set()  # the padding choices reported: a class default read by several calls, once

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        """The names of other modules' functions that pad to the longest."""
        return known.longest_padder_triggers

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(_Scope())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        scope = self._scopes.pop()
        if scope.before_loops and self.ctx.flow is not None and self.ctx.flow.runs_steps(node, _EPOCHS):
            # ALBEF's evaluation pads its answer list once, before its loop over the DataLoader: one
            # length for every step (not a request's prompts, padded before it is decoded)
            scope.longest = [each for each in scope.longest if id(each[0]) not in scope.before_loops]
        if scope.longest:  # asked of its callers at the end: only where there is something to report
            self._done.append((scope, node))

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value in self._module_functions():
            self._called.append((node.func.value, self._enclosing_names()))
        padder = self._padder_elsewhere(node)
        if padder is not None:
            self._in_collate(node, f"`{_code(node.func)}(...)` ({padder}, which pads to the longest item)")
            return
        collate_fn = patterns.keyword(node, "collate_fn")
        if collate_fn is not None:
            self._collate_fns.add(patterns.target_name(collate_fn.value) or "")
            self._given_padder(collate_fn.value)
        if resolved_call(self.ctx, node, _PAD_SEQUENCE):
            self._in_collate(node, "`pad_sequence`")
        elif (pads := _pads(node)) or resolved_call(self.ctx, node, _SIZE_FACTORIES):
            if pads:
                sizes = [arg.value for arg in node.args if not arg.star]
            elif (
                node.args
                and type(node.args[0].value) in (cst.List, cst.Tuple)
                and resolved_call(self.ctx, node, _TYPED)
            ):
                sizes = []  # `torch.LongTensor([...])`: data, not sizes
            else:
                sizes = _sizes(node)
            longest = next(filter(None, map(self._longest, sizes)), None)
            if longest is not None:  # reported where the longest is taken
                self._in_collate(longest, f"{_shown_longest(longest)} sizing `{_code(node.func)}(...)`")
        elif resolved_call(self.ctx, node, _BUCKET_ITERATORS):
            self._buckets.append(node)
        elif resolved_call(self.ctx, node, _FIELDS):
            self._fixed_fields = self._fixed_fields or patterns.keyword(node, "fix_length") is not None
        elif resolved_call(self.ctx, node, _COLLATORS):
            padding = patterns.argument(node, 1, "padding")
            if not _bucketed(node) and (padding is None or self._pads_to_longest(padding.value)):
                self.report(node, what="`DataCollatorWithPadding`", advice=advice(self.ctx.targets))
        else:
            self._tokenizer_call(node)

    def _padder_elsewhere(self, call: cst.Call) -> str | None:
        """In the second pass, another module's function that pads to the longest (trl's
        `pad(...)`), called without a multiple that leaves few lengths."""
        if not self.ctx.project.longest_padders:
            return None
        return self._padder_named(self._absolute_names(call.func), call)

    def _given_padder(self, value: cst.BaseExpression) -> None:
        """In the second pass, another module's function that pads to the longest given as a
        `collate_fn=`, also through `functools.partial` or in a choice (torchtune's recipes:
        `collate_fn=partial(padded_collate_sft, padding_idx=...) if not packed else ...`)."""
        if type(value) is cst.IfExp:
            self._given_padder(value.body)
            self._given_padder(value.orelse)
            return
        factory = self._padder_factory(value)
        if factory is not None:
            shown = f"`collate_fn={_code(value.func)}(...)` (made by {factory})"  # type: ignore[attr-defined]
            self.report(value, what=shown, advice=advice(self.ctx.targets))
            return
        function = self._wrapped(value)
        if type(function) not in (cst.Name, cst.Attribute):
            return
        partial = value if function is not value else None  # its keywords may give the multiple
        padder = self._padder_named(self._absolute_names(function), partial)  # type: ignore[arg-type]
        if padder is not None:
            shown = f"`collate_fn={_code(function)}` ({padder})"
            self.report(function, what=shown, advice=advice(self.ctx.targets))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        """A string naming another module's function that pads to the longest: a configured
        collate function (torchtune's `cfg.get("collate_fn", "torchtune.data.padded_collate_sft")`)."""
        if not self.ctx.project.longest_padders:
            return  # the first pass, or no such function: most files
        value = patterns.string_value(node)
        if value and "." in value and value.rpartition(".")[2].encode() in self.ctx.project.longest_padder_triggers:
            padder = self._padder_named({value}, None)
            if padder is not None:
                self.report(node, what=f"the collate function `{padder}`", advice=advice(self.ctx.targets))

    def _padder_factory(self, value: cst.BaseExpression) -> str | None:
        """Another module's function that returns a collate function padding to the longest,
        called here (second pass)."""
        known = self.ctx.project
        if type(value) is not cst.Call or not known.complete or not known.longest_padder_factories:
            return None
        own = self.ctx.module.name + "."
        names = self._absolute_names(value.func) & known.longest_padder_factories
        return next((name for name in sorted(names) if not name.startswith(own)), None)

    def _absolute_names(self, node: cst.BaseExpression) -> set[str]:
        """What a name or attribute may stand for, relative imports resolved."""
        return {self.ctx.module.absolute(name) for name in self.ctx.qualified_names(node)}

    def _padder_named(self, names: set[str], call: cst.Call | None) -> str | None:
        """The function of another module among `names` that pads to the longest (second
        pass), unless `call` gives it a multiple that leaves few lengths."""
        known = self.ctx.project
        if not known.complete or not known.longest_padders:
            return None
        own = self.ctx.module.name + "."
        for name, multiple in sorted(known.longest_padders):
            if name in names and not name.startswith(own):
                given = patterns.keyword(call, multiple) if multiple and call is not None else None
                if given is None or not _few_buckets(given.value) or self._none_by_default(given.value):
                    return name
        return None

    def _tokenizer_call(self, node: cst.Call) -> None:
        keywords = {arg.keyword.value: arg.value for arg in node.args if arg.keyword is not None}
        if not keywords.keys() & _TOKENIZER_KEYWORDS or self._is_torch(node) or _builds_other_class(node):
            return
        # `tok.pad(...)` truncates nothing and, padding to the longest, ignores `max_length=` (the
        # accelerate examples' `tokenizer.pad(examples, padding="longest", max_length=128, ...)`)
        pads_given = patterns.method_name(node) == "pad"
        bounded = ("max_length" in keywords and not pads_given) or "truncation" in keywords
        multiple = keywords.get("pad_to_multiple_of")
        bucketed = multiple is not None and self._leaves_few_lengths(multiple) and not self._none_by_default(multiple)
        padding = keywords.get("padding")
        if bounded or bucketed or (padding is not None and patterns.string_value(padding) == "max_length"):
            self._scopes[-1].model_inputs.add(self._bound_name())
        written = self._longest_written(padding) if padding is not None else None
        if written is not None and not bucketed and not self._one_item(node):
            side_check = not bounded and not self._moved_to_device(node)
            argument = next(arg for arg in node.args if arg.keyword is not None and arg.keyword.value == "padding")
            at = argument if written[0] is padding else written[0]  # where the choice is written
            self._scopes[-1].longest.append((at, written[1], self._bound_name() if side_check else None))
            pads_now = not (patterns.target_name(node.func) or "")[:1].isupper()  # not a collator made
            if pads_now and not _in_loop(self.ctx.ancestors):
                self._scopes[-1].before_loops.add(id(at))

    def _pads_to_longest(self, node: cst.BaseExpression) -> bool:
        return self._longest_written(node) is not None

    def _longest_written(self, node: cst.BaseExpression) -> tuple[cst.CSTNode, str] | None:
        """Where a padding choice that is, or may be, the longest is written, and how to say it:
        the literal itself; for a name bound once to a choice with it as one side, that side
        (parler-tts' `padding = "max_length" if pad_to_max_length else "longest"`); for
        `self.<field>`, the class's own default (its collators' `padding: str = "longest"`, with
        `pad_to_multiple_of: Optional[int] = None`): what a port changes."""
        if type(node) is cst.Name and node.value not in ("True", "False"):
            value = self.ctx.assigned_value(node)
            choices = (value.body, value.orelse) if type(value) is cst.IfExp else (value,)
            written = next((each for each in choices if each is not None and _pads_to_longest(each)), None)
            return None if written is None else (written, f"`{_code(written)}`, given as `padding={node.value}`,")
        if flow.is_self_attribute(node):
            assert type(node) is cst.Attribute
            holder = next((each for each in reversed(self.ctx.ancestors) if type(each) is cst.ClassDef), None)
            defaults = _class_defaults(holder, node.attr.value) if holder is not None else []
            written = next((value for value in defaults if _pads_to_longest(value)), None)
            if written is None:
                return None
            return written, f"the default `{node.attr.value} = {_code(written)}` of `padding=self.{node.attr.value}`"
        return (node, f"`padding={_code(node)}`") if _pads_to_longest(node) else None

    def _leaves_few_lengths(self, multiple: cst.BaseExpression) -> bool:
        """`_few_buckets` for what `pad_to_multiple_of=` is given, also through a name: each value
        it is bound to (the accelerate examples' `pad_to_multiple_of = 8` for mixed precision,
        else None: no multiple at all)."""
        values = (self.ctx.assigned_values(multiple) if type(multiple) is cst.Name else []) or [multiple]
        return all(not is_none(value) and _few_buckets(value) for value in values)

    def _none_by_default(self, node: cst.BaseExpression) -> bool:
        """`self.pad_to_multiple_of` where the class's default is None: no multiple unless given."""
        holder = next((each for each in reversed(self.ctx.ancestors) if type(each) is cst.ClassDef), None)
        if holder is None or not flow.is_self_attribute(node):
            return False
        defaults = _class_defaults(holder, node.attr.value)  # type: ignore[attr-defined]
        return bool(defaults) and all(type(each) is cst.Name and each.value == "None" for each in defaults)

    def _bound_name(self) -> str:
        """The name the statement the walk is in binds the call to (`batch = tokenizer(...)`,
        `ids = tokenizer(...).input_ids`); empty where there is none."""
        statement = next((node for node in reversed(self.ctx.ancestors) if isinstance(node, cst.Assign)), None)
        if statement is None or len(statement.targets) != 1:
            return ""
        return patterns.target_name(statement.targets[0].target) or ""

    def _moved_to_device(self, node: cst.Call) -> bool:
        """`tokenizer(answers, padding="longest", return_tensors="pt").to(device)`: the model's input."""
        ancestors = self.ctx.ancestors
        return (
            len(ancestors) > 1
            and isinstance(ancestors[-1], cst.Attribute)
            and ancestors[-1].value is node
            and ancestors[-1].attr.value in ("to", "cuda")
        )

    def _one_item(self, node: cst.Call) -> bool:
        """`[tokenizer(text, padding="longest") for text in strings]`: each call gets one text,
        which padding leaves as it is (LLaVA's `_tokenize_fn`)."""
        first = patterns.positional(node, 0)
        if first is None or not isinstance(first.value, cst.Name):
            return False
        for ancestor in reversed(self.ctx.ancestors):
            if isinstance(ancestor, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
                comp_for: cst.CompFor | None = ancestor.for_in
                while comp_for is not None:
                    if isinstance(comp_for.target, cst.Name) and comp_for.target.value == first.value.value:
                        return True
                    comp_for = comp_for.inner_for_in
            elif isinstance(ancestor, cst.For):
                if isinstance(ancestor.target, cst.Name) and ancestor.target.value == first.value.value:
                    return True
            elif isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return False
        return False

    def _longest(self, size: cst.BaseExpression, depth: int = 0) -> cst.Call | cst.Subscript | None:
        """The `max(...)` a size is: `max(lengths)`, `max(len(c) for c in caps) + 1`, a name
        bound once to one of those (lit-llama's `n = max_len - len(x)`, in a helper of the
        function that binds `max_len = max(len(s) for s in input_ids)`), or the size of the
        longest item (`max(batch, key=...)[0].size(1)`)."""
        if isinstance(size, cst.Call):
            if isinstance(size.func, cst.Attribute) and size.func.attr.value == "size":
                return self._longest_item(size.func.value, depth)  # `longest.size(1)`
            if isinstance(size.func, cst.Attribute) and size.func.attr.value == "tolist" and not size.args:
                return self._longest(size.func.value, depth)  # `np.max([...], 0).tolist()`: the same sizes
            if resolved_call(self.ctx, size, _ARRAY_MAX):  # trl's `np.max([t.shape for t in tensors], 0)`
                first = patterns.positional(size, 0)
                listed = first.value if first is not None else None
                over = isinstance(listed, (cst.ListComp, cst.GeneratorExp)) and self._item_size(listed.elt)
                return size if over else None
            if isinstance(size.func, cst.Attribute) and size.func.attr.value in ("max", "amax") and not size.args:
                return size if self._item_lengths(size.func.value) else None  # `lengths.max()`
            if not isinstance(size.func, cst.Name) or self.ctx.qualified_names(size.func):
                return None
            if size.func.value == "max" or self._returns_longest(size.func.value):
                return size
            return None
        if (
            isinstance(size, cst.Subscript)
            and isinstance(size.value, cst.Attribute)
            and size.value.attr.value == "shape"
        ):
            return self._longest_item(size.value.value, depth)  # `longest.shape[1]`
        if isinstance(size, cst.Subscript):
            return self._first_of_descending_sort(size)
        if isinstance(size, cst.BinaryOperation):
            return self._longest(size.left, depth) or self._longest(size.right, depth)
        if isinstance(size, (cst.Tuple, cst.List)):  # `F.pad(x, (0, longest - len(x)))`
            return next(filter(None, (self._longest(element.value, depth) for element in size.elements)), None)
        if isinstance(size, cst.Name) and depth < 2:
            bound = self.ctx.assigned_value(size)
            if bound is None:  # `n = max(lens) + 1`, then `n += r - n % r`: still the longest, rounded
                before = self.ctx.values_before_updates(size)
                bound = before[0] if len(before) == 1 else _rounded_once(self.ctx.assigned_values(size), size.value)
            return self._longest(bound, depth + 1) if bound is not None else None
        return None

    def _item_lengths(self, node: cst.BaseExpression) -> bool:
        """A tensor of the items' lengths: `torch.tensor([len(x["audio"]) for x in batch])`
        (fish-speech's VQGAN collator), or a name bound once to one."""
        if isinstance(node, cst.Name):
            bound = self.ctx.assigned_value(node)
            return bound is not None and not isinstance(bound, cst.Name) and self._item_lengths(bound)
        if not isinstance(node, cst.Call) or not resolved_call(self.ctx, node, _LENGTH_TENSORS | _TYPED):
            return False
        first = patterns.positional(node, 0)
        listed = first.value if first is not None else None
        return isinstance(listed, (cst.ListComp, cst.GeneratorExp)) and self._item_length(listed.elt)

    def _item_length(self, node: cst.BaseExpression) -> bool:
        """`len(x)` (the builtin), `x.size(0)`, `x.shape[0]`: the length of one item."""
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Name) and node.func.value == "len":
                return not self.ctx.qualified_names(node.func)
            return isinstance(node.func, cst.Attribute) and node.func.attr.value == "size"
        return (
            isinstance(node, cst.Subscript)
            and isinstance(node.value, cst.Attribute)
            and node.value.attr.value == "shape"
        )

    def _item_size(self, node: cst.BaseExpression) -> bool:
        """An item's length (`_item_length`) or its whole shape (`t.shape`, `t.size()`)."""
        if isinstance(node, cst.Attribute):
            return node.attr.value == "shape"
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and not node.args:
            return node.func.attr.value == "size"
        return self._item_length(node)

    def _first_of_descending_sort(self, size: cst.Subscript) -> cst.Subscript | None:
        """`lengths[0]` after `lengths, order = torch.sort(torch.LongTensor([len(x[0]) for x in
        batch]), descending=True)` (Tacotron 2's collate): the longest length, sorted first."""
        index = size.slice[0].slice if len(size.slice) == 1 else None
        resolver = self.ctx.resolver
        if not (type(index) is cst.Index and type(index.value) is cst.Integer and index.value.value == "0"):
            return None
        if type(size.value) is not cst.Name or resolver is None:
            return None
        found = resolver.values_and_unpacking(size.value)
        sources = found[1] if found is not None and not found[0] else []
        for call, position in sources:
            descending = type(call) is cst.Call and patterns.keyword(call, "descending")
            if position == 0 and descending and patterns.is_true(descending.value):
                return size if resolved_call(self.ctx, call, _SORT) else None
        return None

    def _module_functions(self) -> dict[str, cst.FunctionDef]:
        return self.ctx.flow.module_functions() if self.ctx.flow is not None else {}

    def _returns_longest(self, name: str) -> bool:
        """Whether the module's function `name` returns what it keeps the `max(...)` of (DETR's
        `_max_by_axis`, whose `maxes[index] = max(maxes[index], item)` makes the largest size
        along each axis)."""
        function = self._module_functions().get(name)
        if function is None:
            return False
        kept = {
            _root(target.target)
            for node in descendants(function.body, (cst.FunctionDef, cst.ClassDef, cst.Lambda))
            if isinstance(node, cst.Assign) and _calls_max(node.value)
            for target in node.targets
        }
        returns = [
            node
            for node in descendants(function.body, (cst.FunctionDef, cst.ClassDef, cst.Lambda))
            if isinstance(node, cst.Return)
        ]
        return bool(returns) and all(node.value is not None and _root(node.value) in kept for node in returns)

    def _longest_item(self, item: cst.BaseExpression, depth: int) -> cst.Call | None:
        """The `max(...)` an item of a batch is, whose size is then the longest: deepspeech's
        `longest_sample = max(batch, key=func)[0]`, then `longest_sample.size(1)`."""
        while isinstance(item, cst.Subscript):
            item = item.value
        if isinstance(item, cst.Name) and depth < 2:
            bound = self.ctx.assigned_value(item)
            return self._longest_item(bound, depth + 1) if bound is not None else None
        if isinstance(item, cst.Call) and isinstance(item.func, cst.Name) and item.func.value == "max":
            return None if self.ctx.qualified_names(item.func) else item
        return None

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        """`ids + [bos] * (max_length - len(ids))`: a list padded to the longest of the batch."""
        if type(node.operator) is not cst.Multiply:
            return
        for listed, count in ((node.left, node.right), (node.right, node.left)):
            texts = type(listed) is cst.List and any(
                patterns.string_value(each.value) is not None for each in listed.elements
            )
            longest = self._longest(count) if type(listed) is cst.List and not texts else None  # not `['none'] * n`
            if longest is not None:
                self._in_collate(longest, "`max(...)` sizing a padding list")
                return

    def _in_collate(self, node: cst.Call | cst.Subscript, what: str) -> None:
        """Note a call that pads to the longest, reported at the end if it is in a collate
        function or a function that fetches a step's batch (`get_batch`), or in a function of
        the module that one of those calls (DETR's `nested_tensor_from_tensor_list`); or where
        it runs every step: in a step loop (nanochat's evaluation and RL rollouts), a model's
        forward (MiniGPT-4) or a function one of those calls."""
        flow, ancestors = self.ctx.flow, self.ctx.ancestors
        step, function = None, None
        if flow is not None and _over_items(node) and not flow.off_the_step_path(ancestors):
            step = flow.step_context(ancestors)
            function = enclosing_function(ancestors)
        self._pads.append((node, self._enclosing_names(), what, step, function))

    def _enclosing_names(self) -> list[str]:
        """The names of the functions and classes the walk is in, and `collate_fn` for a lambda
        passed as `collate_fn=`."""
        names = []
        for ancestor in self.ctx.ancestors:
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                names.append(ancestor.name.value)
            elif (
                isinstance(ancestor, cst.Arg)
                and ancestor.keyword is not None
                and ancestor.keyword.value == "collate_fn"
            ):
                names.append("collate_fn")  # a lambda passed as collate_fn=
        return names

    def _is_torch(self, node: cst.Call) -> bool:
        """torch's own `padding=` (conv layers, F.pad) is spatial padding, not batching."""
        return any(name.startswith("torch.") for name in self.ctx.qualified_names(node.func))

    def _flush(self, scope: _Scope) -> None:
        """Report a scope's pad-to-longest calls. A call with neither `max_length=` nor
        `truncation=` in a function that also encodes with one of them, bound to another name,
        is a side check, not the model's input (diffusers' `untruncated_ids = tokenizer(prompt,
        padding="longest")` truncation warning), and is left alone, unless it goes to the
        device (`.to(device)`); one bound to the same name is the other branch's input
        (SimCSE's `batch = tokenizer(..., max_length=n)` / `batch = tokenizer(..., padding=True)`)."""
        for argument, what, bound in scope.longest:
            if (bound is None or not scope.model_inputs or bound in scope.model_inputs) and id(
                argument
            ) not in self._at:
                # at the argument, where the call spans lines; once where several calls read the same choice
                self._at.add(id(argument))
                self.report(argument, what=what, advice=advice(self.ctx.targets))

    def leave_Module(self, node: cst.Module) -> None:
        self._record_padders()
        self._flush(self._scopes.pop())
        for scope, function in self._done:
            if not self._per_item(function):
                self._flush(scope)
        reported = set()
        helpers = {callee for callee, names in self._called if self._batching(names)}
        module_flow = self.ctx.flow
        for call, names, what, step, function in self._pads:
            if id(call) in reported:
                continue  # one `max(...)` sizing two factories
            reported.add(id(call))
            if self._batching(names) or (names and names[0] in helpers):
                step = "a batch function"
            elif step is None and function is not None and module_flow is not None:
                step = module_flow.called_every_step(function)
            if step is not None:
                self.report(call, what=f"{what} in {step}", advice=advice(self.ctx.targets))
        for call in self._buckets if not self._fixed_fields else ():
            self.report(call, what="torchtext's `BucketIterator`", advice=advice(self.ctx.targets))

    def _record_padders(self) -> None:
        """In the first pass, the module-level functions that pad to the longest of what they
        are given (LONGEST_PADDER), for the batch functions of other modules that call them."""
        if self.ctx.project.complete or not self.ctx.project.local_packages:
            return
        functions = self._module_functions()
        padders = {
            names[0]
            for node, names, *_ in self._pads
            if len(names) == 1 and names[0] in functions and _over_items(node)
        }
        for title in sorted(padders):
            function = functions[title]
            params = (*function.params.posonly_params, *function.params.params, *function.params.kwonly_params)
            multiple = next((param.name.value for param in params if _MULTIPLE.search(param.name.value)), "")
            for name in defined_names(self.ctx, function):
                self.record(project.LONGEST_PADDER, name, UNPLACED, multiple=multiple)
        for title, function in sorted(functions.items()):
            if title not in padders and self._returns_padder(function, padders):
                for name in defined_names(self.ctx, function):
                    self.record(project.LONGEST_PADDER_FACTORY, name, UNPLACED)

    def _returns_padder(self, function: cst.FunctionDef, padders: set[str]) -> bool:
        """Whether every `return` of a function hands back one of the module's `padders`, as it
        is or through `functools.partial` (litgpt's `get_sft_collate_fn`)."""
        returned = [node.value for node in descendants(function.body, NESTED_SCOPES) if type(node) is cst.Return]
        return bool(returned) and all(value is not None and self._handed(value) in padders for value in returned)

    def _handed(self, value: cst.BaseExpression) -> str:
        """The module function a value is, or that `functools.partial` wraps; empty otherwise."""
        value = self._wrapped(value)
        return value.value if type(value) is cst.Name else ""

    def _wrapped(self, value: cst.BaseExpression) -> cst.BaseExpression:
        """What `functools.partial(f, ...)` wraps (`f`); the value itself otherwise."""
        if type(value) is cst.Call and self.ctx.qualified_names(value.func) & _PARTIAL:
            first = patterns.positional(value, 0)
            return first.value if first is not None else value
        return value

    def _per_item(self, function: cst.FunctionDef) -> bool:
        """Whether a function is a dataset's `__getitem__` or one the module calls from there
        (LLaVA's `preprocess_v1()`): it encodes one item, which padding to the longest leaves
        as it is; the collate function pads the batch."""
        module_flow = self.ctx.flow
        callers = module_flow.callers(function) if module_flow is not None else []
        return any(each.name.value == "__getitem__" for each in (function, *callers))

    def _batching(self, names: list[str]) -> bool:
        """Whether functions of these names make a step's batch: a collate function (named
        like one, or passed as `collate_fn=`) or a batch getter."""
        return any(
            COLLATE_NAME.search(name) or BATCH_GETTER.search(name) or name in self._collate_fns for name in names
        )


def _over_items(node: cst.Call | cst.Subscript) -> bool:
    """`max(lengths)`, not `max(k - n, 0)`: in a batch function both size the batch; elsewhere a
    bound on one size is not the longest of a batch."""
    return (
        type(node) is not cst.Call
        or patterns.dotted(node.func) != "max"
        or sum(arg.keyword is None for arg in node.args) == 1
    )


def _calls_max(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "max"


def _root(node: cst.BaseExpression) -> str:
    """The name under subscripts: `maxes` for `maxes[index]`."""
    while isinstance(node, cst.Subscript):
        node = node.value
    return node.value if isinstance(node, cst.Name) else ""


@dataclass
class _Scope:
    """What one function (or the module body) does with tokenizer padding."""

    # the names bound to calls with max_length=, truncation= or padding="max_length" ("" for a call bound to none)
    model_inputs: set[str] = field(default_factory=set)
    # the `padding=` argument, its label, and the name its call is bound to where it may be a side check
    longest: list[tuple[cst.Arg, str, str | None]] = field(default_factory=list)
    # those of `longest` made outside any loop of the function: once per call of it
    before_loops: set[int] = field(default_factory=set)


def _in_loop(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether the walk is in a loop's body (or a comprehension) within its function."""
    for ancestor in reversed(ancestors):
        if type(ancestor) in (cst.For, cst.While, cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp):
            return True
        if type(ancestor) in (cst.FunctionDef, cst.Lambda, cst.ClassDef):
            return False
    return False


def _shown_longest(node: cst.Call | cst.Subscript) -> str:
    """`max(...)`, or `lengths[0]`, the first of a descending sort."""
    if type(node) is cst.Subscript:
        return f"`{_code(node)}`, the first of a descending sort,"
    return f"`{_code(node.func)}(...)`"


def _sizes(call: cst.Call) -> list[cst.BaseExpression]:
    """The sizes a factory is given: its positional arguments (or `size=`), or the tuple or list of them."""
    size = patterns.keyword(call, "size")
    given = [size.value] if size is not None else [arg.value for arg in call.args if arg.keyword is None]
    if given and isinstance(given[0], (cst.Tuple, cst.List)):
        return [element.value for element in given[0].elements]
    return given


def _pads(call: cst.Call) -> bool:
    """A call that pads by its name (`np.pad`, `F.pad`, SV2TTS's `pad1d(x, max_len)`): given the
    longest length of a batch, it pads every item to it. Not a tokenizer's `pad(...)`, whose
    `padding=` says how (`_tokenizer_call`)."""
    name = call.func.attr.value if isinstance(call.func, cst.Attribute) else getattr(call.func, "value", "")
    named = isinstance(name, str) and _PAD_NAME.search(name) is not None
    return named and patterns.keyword(call, "padding") is None


def _rounded_once(values: list[cst.BaseExpression], name: str) -> cst.BaseExpression | None:
    """The first of two values where the second passes the name to a function (Matcha's
    `y_max_length = fix_len_compatibility(y_max_length)`, rounding the longest up to a multiple
    of 4): still a length per batch."""
    if len(values) != 2 or type(values[1]) is not cst.Call:
        return None
    given = [arg.value for arg in values[1].args]
    return values[0] if any(type(value) is cst.Name and value.value == name for value in given) else None


def _bucketed(call: cst.Call) -> bool:
    """`pad_to_multiple_of=` already limits lengths to a few buckets."""
    multiple = patterns.keyword(call, "pad_to_multiple_of")
    return multiple is not None and _few_buckets(multiple.value)


def _few_buckets(multiple: cst.BaseExpression) -> bool:
    """A multiple that leaves few lengths: not a literal under `_FEW_BUCKETS`, such as the 8 that
    aligns to NVIDIA's tensor cores (alpaca-lora's `DataCollatorForSeq2Seq(tok,
    pad_to_multiple_of=8, padding=True)`: a length per 8 tokens, 32 graphs up to 256)."""
    return not (type(multiple) is cst.Integer and int(multiple.value, 0) < _FEW_BUCKETS)


def _class_defaults(holder: cst.ClassDef, name: str) -> list[cst.BaseExpression]:
    """What the class body binds `name` to (`padding: str = "longest"`, a dataclass field's default)."""
    found: list[cst.BaseExpression] = []
    for statement in holder.body.body:
        for small in statement.body if type(statement) is cst.SimpleStatementLine else ():
            if type(small) is cst.AnnAssign and small.value is not None and patterns.dotted(small.target) == name:
                found.append(small.value)
            elif type(small) is cst.Assign and any(patterns.dotted(each.target) == name for each in small.targets):
                found.append(small.value)
    return found


def _pads_to_longest(node: cst.BaseExpression) -> bool:
    """`True`, `"longest"`, `PaddingStrategy.LONGEST`."""
    if isinstance(node, cst.Name):
        return node.value == "True"
    if isinstance(node, cst.Attribute):
        return node.attr.value == "LONGEST"
    return patterns.string_value(node) == "longest"


def _builds_other_class(call: cst.Call) -> bool:
    """`WeightOnlyInt4Linear(..., padding=True)`: a class's own flag, not a tokenizer's or a
    collator's (`DataCollatorForSeq2Seq(tok, padding=True)` pads batches)."""
    name = patterns.target_name(call.func) or ""
    return name[:1].isupper() and _BATCHING_CLASS.search(name) is None


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node).strip()
