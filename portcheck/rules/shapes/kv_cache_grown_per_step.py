from __future__ import annotations

from functools import cached_property

import libcst as cst

from portcheck import patterns
from portcheck.flow import enclosing_function, in_forward, is_self_attribute
from portcheck.rule import Invalid, Valid
from portcheck.rules.shapes import RECOMPILE_SEVERITY, TensorRule, advice, innermost_loop, shape_kept
from portcheck.walk import descendants

_GROWERS = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})
# Hugging Face caches of a fixed length: fed back, they keep their shape.
_FIXED_CACHES = frozenset(
    f"transformers{module}.{name}"
    for module in ("", ".cache_utils")
    for name in ("StaticCache", "HybridCache", "SlidingWindowCache", "OffloadedStaticCache", "HybridChunkedCache")
)
# What a model's own key/value cache is passed as, where the call hands it back to be fed again.
_CACHES = frozenset({"cache", "kv_cache", "att_cache", "cnn_cache", "layer_past", "past", "past_key_value"})
_CACHE_CHOICE = "cache_implementation"
# The `cache_implementation` values whose cache grows with the sequence (transformers' GenerationConfig).
_GROWING_CACHES = frozenset({"dynamic", "offloaded", "quantized"})
_HF_LOADERS = ("transformers.", "peft.")
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_FORWARD_HOOKS = frozenset({"register_forward_hook", "register_forward_pre_hook"})


class KvCacheGrownPerStep(TensorRule):
    """## What it does
    Reports a key/value cache that grows by one step's length at every decoding step:
    - in a model, keys and values concatenated after the cache a caller passes, under
      `if <cache> is not None:` (or the module's `exists(<cache>)`) or a test of what the
      function reads from it (DALLE-pytorch's `if offset > 0:`, the offset kept in the cache)
      (GPT-2's and minGPT's `key = torch.cat((past_key, key),
      dim=-2)` where `past_key, past_value = layer_past`; StreamingLLM's and Llama-1 ports'
      `torch.cat([past_key_value[0], key_states], dim=2)`): reported at each concatenation
      after the cache (keys and values are each a line to change); also without a guard, the caches a function is given and grows
      onto themselves, then hands back (GPT-SoVITS's `k_cache = torch.cat([k_cache, k], dim=1)`
      and the same for `v_cache` in `decode_next_token`), where their names say cache;
    - in a loop, a model call given `past_key_values=` that the loop binds again (from the
      call's output, `past_key_values = outputs.past_key_values`): the dynamic cache of
      Hugging Face models, which grows the same way (also where it is fed unless something
      holds, `pkv if not interrupted else None`), unless the name holds a fixed-length cache
      (`StaticCache(...)`); and a model's own cache (`cache=`, `att_cache=`, `layer_past=`...)
      that the call's own statement binds again from what it returns (CosyVoice's `y,
      att_cache, cnn_cache = self.llm.forward_chunk(x, att_cache=att_cache, ...)`);
    - `generate(...)` of a Hugging Face model (a name or `self.` attribute bound to a
      `transformers` or `peft` `...from_pretrained(...)`), which decodes with that dynamic cache
      unless the module picks a fixed-length one (`cache_implementation="static"` in the call,
      in a `GenerationConfig`, a dict of its arguments or the model's `generation_config`, or
      `past_key_values=StaticCache(...)`); arguments passed as `**kwargs` of unknown origin
      leave it alone;
    - state kept across calls, an attribute of `self` or an entry of a dict the function does
      not bind, that `forward` or a forward hook grows onto itself (whisper's
      `cache[module] = torch.cat([cache[module], output], dim=1)` in the hook that
      `register_forward_hook` installs on each key and value projection), unless the function
      also trims it (`self.mem = self.mem[-size:]`).

    A cache holds keys and values: two concatenations after it, or one whose result the
    function returns or packs into a tuple (the cache for the next call). A prefix joined once
    (`torch.cat((embeddings, tokens), 1)` under `if embeddings is not None:`), a skip
    connection (`torch.cat([x, skip], 1)`, the new tensor first), one memory joined before
    both keys and values (x-transformers' `mem`) and a cache of fixed length
    written in place (see PC510) are left alone.

    ## Why is this bad?
    Every generated token makes the cache, the attention scores and everything after them one
    position longer: a new shape at every step. `torch.compile` with `dynamic=False`
    (TorchTPU's and TorchNeuron's default) recompiles for each length until it reaches the
    recompile limit and falls back to eager; torch_xla compiles a new graph per length, and
    Trainium's compiler needs every shape ahead of time (NCC_EMOD025).

    ## Example
    ```python
    def forward(self, x, layer_past=None):
        if layer_past is not None:
            past_key, past_value = layer_past
            k = torch.cat((past_key, k), dim=-2)
            v = torch.cat((past_value, v), dim=-2)
    ```

    ## Use instead
    ```python
    def forward(self, x, input_pos):  # a preallocated cache, written at a position tensor
        self.cache_k.index_copy_(2, input_pos, k)
        self.cache_v.index_copy_(2, input_pos, v)
        k, v = self.cache_k, self.cache_v  # always the full length, masked beyond input_pos
    ```
    With Hugging Face models, pass a `StaticCache` (or `cache_implementation="static"` to
    `generate`).

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: the cache's full length and the attention mask depend on the model.
    """

    code = "PC511"
    name = "kv-cache-grown-per-step"
    message = "{what}: each decoding step has a new length, so a compiled step recompiles per length"
    hint = (
        "use a cache of fixed length written in place (index_copy_ at a position tensor, masked beyond it;"
        " Hugging Face: StaticCache){advice}"
    )
    severity = RECOMPILE_SEVERITY
    triggers = (b"past_key_value", b"is not None", b"cat", b"generate(", b"cache=", b"past=")

    VALID = [
        # open-muse's MaskGIT sampling: the class token joined for the model, then sliced off again
        Valid(
            "import torch\nclass Transformer(torch.nn.Module):\n    def generate(self, ids, class_ids=None, steps=8):\n"
            "        for _ in range(steps):\n            if class_ids is not None:\n"
            "                ids = torch.cat([class_ids[:, None], ids], dim=1)\n            logits = self(ids)\n"
            "            if class_ids is not None:\n                ids = ids[:, 1:]\n                logits = logits[:, 1:]\n"
            "            ids = torch.where(ids < 0, logits.argmax(-1), ids)\n        return ids\n"
        ),
        # a memory extended once per call, not a cache handed back; a loop in the function starts over;
        # inputs padded to a length (torchtitan)
        Valid(
            "import torch\ndef pad(input_ids, labels, n):\n    input_ids = torch.cat([input_ids, torch.zeros(n)], 1)\n"
            "    labels = torch.cat([labels, torch.zeros(n)], 1)\n    return input_ids, labels\n"
        ),
        Valid(
            "import torch\ndef extend(memory, x):\n    memory = torch.cat([memory, x], dim=1)\n    return memory.mean(1)\n"
            "def stack_layers(layers, h_cache):\n    for layer in layers:\n"
            "        h_cache = torch.cat([h_cache, layer(h_cache)], dim=1)\n    return h_cache\n"
        ),
        # a skip connection: the new tensor first, and no cache
        Valid(
            "import torch\nclass Up(torch.nn.Module):\n    def forward(self, x, skip=None):\n"
            "        x = self.up(x)\n        if skip is not None:\n            x = torch.cat([x, skip], dim=1)\n"
            "        return self.conv(x)\n"
        ),
        # a prefix of conditioning embeddings, joined once and not handed back
        Valid(
            "import torch\ndef embed(self, idx, embeddings=None):\n    tokens = self.tok_emb(idx)\n"
            "    if embeddings is not None:\n        tokens = torch.cat((embeddings, tokens), dim=1)\n"
            "    return self.drop(tokens + self.pos)\n"
        ),
        # under a test of a parameter, something else joined first (Stable Audio's prefix)
        Valid(
            "import torch\ndef forward(self, x, prefix, enc=None):\n    if enc is not None:\n"
            "        x = torch.cat([prefix, x], dim=1)\n    return x, (x, enc)\n"
        ),
        # the past joined once, not grown under a test of the cache
        Valid("import torch\ndef forward(x, past):\n    k = torch.cat((past, x), dim=-2)\n    return k\n"),
        # x-transformers: one memory before both keys and values, a prefix of fixed length
        Valid(
            "import torch\ndef exists(val):\n    return val is not None\n"
            "def attend(x, mem=None):\n    k_input, v_input = x, x\n    if exists(mem):\n"
            "        k_input = torch.cat((mem, k_input), dim=-2)\n        v_input = torch.cat((mem, v_input), dim=-2)\n"
            "    return k_input, v_input\n"
        ),
        # a fixed-length cache fed back keeps its shape
        Valid(
            "import torch\nfrom transformers import StaticCache\npast_key_values = StaticCache(config, 1, 512)\n"
            "for _ in range(n):\n    out = model(ids, past_key_values=past_key_values, use_cache=True)\n"
            "    past_key_values = out.past_key_values\n    ids = out.logits[:, -1:].argmax(-1)\n"
        ),
        # generate with a cache of fixed length, chosen in the call, a config or on the model
        Valid(
            "import torch\nfrom transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained(p)\n"
            "out = m.generate(ids, max_new_tokens=64, cache_implementation='static')\n"
        ),
        Valid(
            "import torch\nfrom transformers import AutoModelForCausalLM, GenerationConfig\n"
            "m = AutoModelForCausalLM.from_pretrained(p)\ncfg = GenerationConfig(max_new_tokens=64, cache_implementation='static')\n"
            "out = m.generate(ids, generation_config=cfg)\n"
        ),
        Valid(
            "import torch\nimport transformers\nm = transformers.AutoModelForCausalLM.from_pretrained(p)\n"
            "m.generation_config.cache_implementation = 'static'\nout = m.generate(ids)\n"
        ),
        # arguments of unknown origin; not a Hugging Face model's generate
        Valid(
            "import torch\nfrom transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained(p)\n"
            "def run(**kwargs):\n    return m.generate(**kwargs)\n"
        ),
        Valid("import torch\nsampler = DiffusionSampler(unet)\nimages = sampler.generate(n=16)\n"),
        # MPT's loop over layers: each takes its own cache first
        Valid(
            "import torch\ndef forward(self, x, past_key_values=None):\n    for i, block in enumerate(self.blocks):\n"
            "        past_key_value = past_key_values[i] if past_key_values is not None else None\n"
            "        x, past_key_value = block(x, past_key_value=past_key_value)\n"
            "        if past_key_values is not None:\n            past_key_values[i] = past_key_value\n    return x\n"
        ),
        # a cache the model writes in place, not handed back; one handed back outside a loop
        Valid(
            "import torch\ndef decode(model, x, cache, n):\n    for i in range(n):\n"
            "        logits = model(x, cache=cache, pos=i)\n        x = logits.argmax(-1)\n"
            "    out, cache = model(x, cache=cache)\n"
        ),
        # one prefill, not fed back in a loop
        Valid("import torch\nout = model(ids, past_key_values=None, use_cache=True)\npkv = out.past_key_values\n"),
        Valid(
            "import torch\nfor batch in loader:\n    out = model(batch, past_key_values=prefix)\n    loss = out.loss\n"
        ),
        # state trimmed as it grows, a local grown in forward, a hook that only reads
        Valid(
            "import torch\nclass Memory(torch.nn.Module):\n    def forward(self, x):\n"
            "        self.mem = torch.cat([self.mem, x.detach()], dim=0)\n        self.mem = self.mem[-4096:]\n"
            "        feats = torch.cat([feats, x], 1)\n        return x @ self.mem.T\n"
            "def keep(module, _, output):\n    store[module] = torch.cat([store[module], output], 1)\n"
        ),
        # `torch` is a parameter here
        Valid(
            "import torch.nn\ndef attend(torch, k, layer_past=None):\n    if layer_past is not None:\n"
            "        k = torch.cat((layer_past[0], k), dim=-2)\n    return k\n"
        ),
        # shapes may change freely there
        Valid(
            "import torch\ndef forward(self, x, layer_past=None):\n    if layer_past is not None:\n"
            "        k = torch.cat((layer_past[0], x), dim=-2)\n    return k\n",
            options={"targets": ["cpu", "mps", "rocm"]},
        ),
    ]
    INVALID = [
        # alpaca-lora's generate.py: Transformers' generate grows its DynamicCache each token
        Invalid(
            "import torch\nfrom transformers import LlamaForCausalLM\nmodel = LlamaForCausalLM.from_pretrained(base)\n"
            "with torch.no_grad():\n    out = model.generate(input_ids=ids, max_new_tokens=128)\n",
            lines=[5],
            message="`model.generate(...)` decodes with Hugging Face's dynamic cache",
        ),
        Invalid(
            "import torch\nimport transformers as tf\nclass Chat:\n    def __init__(self, name):\n"
            "        self.lm = tf.AutoModelForCausalLM.from_pretrained(name)\n"
            "    def reply(self, ids):\n        return self.lm.generate(ids, max_new_tokens=64)\n",
            lines=[7],
            message="`self.lm.generate(...)` decodes",
        ),
        Invalid(  # the arguments in a dict the module writes, a LoRA adapter on top
            "import torch\nfrom peft import PeftModel\nmodel = PeftModel.from_pretrained(base, lora)\n"
            "params = {'max_new_tokens': 64, 'output_scores': True}\nout = model.generate(ids, **params)\n",
            lines=[5],
        ),
        # taming-transformers' minGPT attention: the past unpacked, then joined before the new keys
        Invalid(
            "import torch\nclass Attention(torch.nn.Module):\n    def forward(self, x, layer_past=None):\n"
            "        k, v = self.key(x), self.value(x)\n        present = torch.stack((k, v))\n"
            "        if layer_past is not None:\n            past_key, past_value = layer_past\n"
            "            k = torch.cat((past_key, k), dim=-2)\n            v = torch.cat((past_value, v), dim=-2)\n"
            "        return self.attend(x, k, v), present\n",
            lines=[8, 9],
            message="`k` and `v` grow by `torch.cat` after the cache `layer_past`",
        ),
        # StreamingLLM's Llama attention
        Invalid(
            "import torch as T\ndef llama_pos_shift_attention_forward(self, hidden_states, past_key_value=None, use_cache=False):\n"
            "    key_states, value_states = self.k(hidden_states), self.v(hidden_states)\n"
            "    if past_key_value is not None and use_cache:\n"
            "        key_states = T.cat([past_key_value[0], key_states], dim=2)\n"
            "        value_states = T.cat([past_key_value[1], value_states], dim=2)\n"
            "    past_key_value = (key_states, value_states) if use_cache else None\n"
            "    return key_states, past_key_value\n",
            lines=[5, 6],
            message="after the cache `past_key_value`",
        ),
        # StreamingLLM's GPT-NeoX attention: the test bound to a name first
        Invalid(
            "import torch\ndef neox_forward(self, key, value, layer_past=None):\n"
            "    has_layer_past = layer_past is not None\n    if has_layer_past:\n"
            "        key = torch.cat((layer_past[0], key), dim=-2)\n        value = torch.cat((layer_past[1], value), dim=-2)\n"
            "    return key, value\n",
            lines=[5, 6],
        ),
        # vit-pytorch's ViViT with MOSS: the cache tested by the module's own `exists()`
        Invalid(
            "import torch\ndef exists(val):\n    return val is not None\nclass Attention(torch.nn.Module):\n"
            "    def forward(self, x, cache=None):\n        q, k, v = self.to_qkv(x).chunk(3, dim=-1)\n"
            "        if exists(cache):\n            ck, cv = cache\n            k = torch.cat((ck, k), dim=-2)\n"
            "            v = torch.cat((cv, v), dim=-2)\n        return q @ k.transpose(-1, -2) @ v, (k, v)\n",
            lines=[9, 10],
        ),
        # DALLE-pytorch: the past kept in a dict the caller passes, under a test of an offset read from it
        Invalid(
            "import torch\nclass Attention(torch.nn.Module):\n"
            "    def forward(self, x, cache=None, cache_key=None):\n"
            "        offset = cache.get('offset', 0) if cache is not None else 0\n"
            "        k, v = self.to_k(x), self.to_v(x)\n        if offset > 0:\n"
            "            k_top, v_top = cache[cache_key]\n            k = torch.cat([k_top, k], dim=-2)\n"
            "            v = torch.cat([v_top, v], dim=-2)\n        if cache is not None:\n"
            "            cache[cache_key] = k, v\n        return k @ v.transpose(-1, -2)\n",
            lines=[8, 9],
            message="after the cache `cache`",
        ),
        # StreamingLLM's decoding loop: a Hugging Face model's dynamic cache fed back
        Invalid(
            "import torch\n@torch.no_grad()\ndef greedy_generate(model, input_ids, past_key_values, max_gen_len):\n"
            "    for _ in range(max_gen_len - 1):\n"
            "        outputs = model(\n            input_ids=input_ids,\n            past_key_values=past_key_values,\n"
            "            use_cache=True,\n        )\n        past_key_values = outputs.past_key_values\n"
            "        input_ids = outputs.logits[:, -1, :].argmax(dim=-1).unsqueeze(1)\n",
            lines=[7],
            message="`past_key_values`, fed back to the model, grows by one position",
        ),
        Invalid(  # GPT-SoVITS: the caches a decoding step is given, grown onto themselves and handed back
            "import torch\nimport torch.nn.functional as F\nclass Block(torch.nn.Module):\n"
            "    def decode_next_token(self, x, k_cache, v_cache):\n        q, k, v = self.qkv(x).chunk(3, dim=-1)\n"
            "        k_cache = torch.cat([k_cache, k], dim=1)\n        v_cache = torch.cat([v_cache, v], dim=1)\n"
            "        return F.scaled_dot_product_attention(q, k_cache, v_cache), k_cache, v_cache\n",
            lines=[6, 7],
            message="`k_cache` and `v_cache` grow by `torch.cat` onto the cache given, at every call",
        ),
        Invalid(  # FastChat: the dynamic cache fed back, unless a stop string interrupted the stream
            "import torch\ndef generate_stream(model, ids, n):\n    past_key_values = None\n    interrupted = False\n"
            "    for i in range(n):\n        out = model(input_ids=ids, use_cache=True,\n"
            "                    past_key_values=past_key_values if not interrupted else None)\n"
            "        past_key_values = out.past_key_values\n        ids = out.logits[:, -1:].argmax(-1)\n",
            lines=[7],
            message="`past_key_values`, fed back to the model, grows by one position",
        ),
        Invalid(  # GPT-2's attention, the past held under another name
            "from torch import cat\nfrom torch.nn import functional as F\ndef attn(q, key, value, layer_past=None):\n"
            "    if layer_past is not None:\n        pk = layer_past[0]\n        key = cat((pk, key), dim=-2)\n"
            "    return F.softmax(q @ key.transpose(-1, -2), -1), key\n",
            lines=[6],
            message="`key` grows by `torch.cat`",
        ),
        Invalid(
            "import torch\nstate = {'pkv': None}\nwhile True:\n"
            "    out = model(ids, past_key_values=state['pkv'])\n    state['pkv'] = out[1]\n"
            "    cache = None\n    for step in range(4):\n        o = model(x, past_key_values=cache)\n"
            "        cache = o.past_key_values\n",
            lines=[4, 8],
        ),
        Invalid(  # CosyVoice's decoding: the encoder's caches handed back by the call that is given them
            "import torch\ndef decode(llm, x, max_len):\n"
            "    att_cache, cnn_cache = torch.zeros((0, 0, 0, 0)), torch.zeros((0, 0, 0, 0))\n"
            "    for i in range(max_len):\n"
            "        y, att_cache, cnn_cache = llm.forward_chunk(x, att_cache=att_cache, cnn_cache=cnn_cache)\n"
            "        x = y[:, -1:]\n",
            lines=[5],
            message="`att_cache`, fed back to the model",
        ),
        # whisper: the cache a forward hook keeps for each projection
        Invalid(
            "import torch\ndef install_kv_cache_hooks(model, cache=None):\n    cache = {**cache} if cache else {}\n"
            "    def save_to_cache(module, _, output):\n        if module not in cache:\n            cache[module] = output\n"
            "        else:\n            cache[module] = torch.cat([cache[module], output], dim=1).detach()\n"
            "        return cache[module]\n    for layer in model.blocks:\n"
            "        layer.key.register_forward_hook(save_to_cache)\n    return cache\n",
            lines=[8],
            message="`cache[module]`, kept across calls, grows by `torch.cat` in a forward hook",
        ),
        Invalid(
            "from torch import nn, cat\nclass Attention(nn.Module):\n    def forward(self, x):\n"
            "        self.k_cache = cat((self.k_cache, self.key(x)), dim=1)\n        return self.k_cache\n",
            lines=[4],
            message="`self.k_cache`, kept across calls, grows by `torch.cat` in `forward`",
        ),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        kept = self._kept_state_grown(node)
        if kept is not None:
            self.report(node, what=kept, advice=advice(self.ctx.targets))
            return
        onto_itself, grows = self._grows(node, onto_itself=True), self._grows(node)
        function = enclosing_function(self.ctx.ancestors) if onto_itself or grows else None
        if function is None:
            return
        if onto_itself:
            self._parameters_grown(node, function)
        if not grows:
            return
        guard = self._cache_guard(function)
        if guard is None:
            return
        test, cache = guard
        growths = self._growths(test.body, cache)
        grown = [target for assign in growths for target in self._targets(assign)]
        if not any(each is node for each in growths):
            return  # not after the cache (`torch.cat([prefix, x])` under `if enc is not None:`)
        if len(growths) < 2 and not _handed_back(function, grown):
            return  # one prefix joined (`torch.cat((embeddings, tokens), 1)`), not keys and values kept
        if all(_trimmed_again(function, name) for name in grown):
            return  # open-muse's class token: prepended for the model, sliced off again (`ids[:, 1:]`)
        if len(growths) > 1 and len({_code(_joined_first(each)) for each in growths}) == 1:
            return  # one memory before both keys and values (x-transformers' `mem`): a prefix, not their cache
        names = " and ".join(f"`{name}`" for name in dict.fromkeys(grown))
        function_name = min(self.ctx.qualified_names(node.value.func) & _GROWERS)  # type: ignore[attr-defined]
        what = f"{names} {'grows' if len(grown) == 1 else 'grow'} by `{function_name}` after the cache `{cache}` at every call"
        self.report(node, what=what, advice=advice(self.ctx.targets))

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "generate":
            if self._generates_with_dynamic_cache(node):
                what = f"`{_code(node.func)}(...)` decodes with Hugging Face's dynamic cache, which grows by one position at every step"
                self.report(node, what=what, advice=advice(self.ctx.targets))
            return
        fed = patterns.keyword(node, "past_key_values")
        # else a model's own cache, handed back by the call that is given it (CosyVoice's `att_cache`)
        own = (
            None if fed is not None else next((a for a in node.args if a.keyword and a.keyword.value in _CACHES), None)
        )
        if fed is None and own is None:
            return
        loop = innermost_loop(self.ctx.ancestors)
        if loop is None:
            return
        if fed is not None:
            path = _path(_unless_none(fed.value))
            grows = bool(path) and _binds(loop.body, path) and not self._fixed_length(path)
        else:
            assert own is not None
            path = _path(own.value)
            grows = bool(path) and self._rebound_by(node, path) and self._carried(loop, path)
            grows = grows and not self._fixed_length(path)
        if grows:
            what = f"`{path}`, fed back to the model, grows by one position at every step"
            # Hugging Face's cache at the argument, which a StaticCache replaces; a model's own at its call
            self.report(fed or node, what=what, advice=advice(self.ctx.targets))

    def _carried(self, loop: cst.For | cst.While, path: str) -> bool:
        """Whether the loop gives the call what its last pass bound to `path`: nothing in its
        body binds it before the statement of the call (MPT's loop over layers takes each
        layer's own `past_key_value = past_key_values[i]` first)."""
        ancestors = self.ctx.ancestors
        index = next(i for i, node in enumerate(ancestors) if node is loop)
        holder = ancestors[index + 2] if len(ancestors) > index + 2 else None  # loop, its body, the statement
        for statement in loop.body.body:  # type: ignore[union-attr]
            if statement is holder:
                return True
            if _binds(statement, path):
                return False
        return True

    def _rebound_by(self, call: cst.Call, path: str) -> bool:
        """Whether the statement of the call binds `path` to (a part of) what the call returns:
        `y, att_cache, cnn_cache = self.llm.forward_chunk(x, att_cache=att_cache, ...)`."""
        statement = next((node for node in reversed(self.ctx.ancestors) if isinstance(node, cst.Assign)), None)
        if statement is None or statement.value is not call:
            return False
        bound: list[cst.BaseExpression] = []
        for target in statement.targets:
            unpacked = isinstance(target.target, (cst.Tuple, cst.List))
            bound += [element.value for element in target.target.elements] if unpacked else [target.target]  # type: ignore[attr-defined]
        return any(_path(each) == path for each in bound)

    def _kept_state_grown(self, node: cst.Assign) -> str | None:
        """For state kept across calls (an attribute of `self`, an entry of a dict the function
        does not bind) that `forward` or a forward hook grows onto itself (whisper's
        `cache[module] = torch.cat([cache[module], output], dim=1)` in a hook that
        `register_forward_hook` installs): what grows and where; else None. State the function
        also trims or binds otherwise is left alone."""
        value = shape_kept(node.value)
        if len(node.targets) != 1 or type(value) is not cst.Call:
            return None
        target = node.targets[0].target
        arg = patterns.argument(value, 0, "tensors")
        if arg is None or type(arg.value) not in (cst.List, cst.Tuple) or len(arg.value.elements) < 2:
            return None
        if not self.ctx.qualified_names(value.func) & _GROWERS:
            return None
        shown = _code(target)
        if _code(arg.value.elements[0].value) != shown:
            return None
        function = enclosing_function(self.ctx.ancestors)
        if function is None or not self._kept_across_calls(target, function):
            return None
        where = "`forward`" if in_forward(self.ctx.ancestors) else "a forward hook" if self._hook(function) else None
        others = (
            each
            for each in descendants(function.body, _SCOPES)
            if type(each) is cst.Assign and each is not node and any(_code(t.target) == shown for t in each.targets)
        )
        if where is None or any(_trims(each.value, shown) for each in others):
            return None
        return f"`{shown}`, kept across calls, grows by `torch.cat` in {where} at every call"

    def _kept_across_calls(self, target: cst.BaseExpression, function: cst.FunctionDef) -> bool:
        if type(target) is cst.Subscript:
            root = _root(target)
            return root == "self" or (
                bool(root)
                and root not in {param.name.value for param in function.params.params}
                and not _binds(function.body, root)
            )
        return type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == "self"

    def _hook(self, function: cst.FunctionDef) -> bool:
        """Whether the module installs `function` as a forward hook."""
        return any(
            type(each) is cst.Call
            and type(each.func) is cst.Attribute
            and each.func.attr.value in _FORWARD_HOOKS
            and (first := patterns.positional(each, 0)) is not None
            and type(first.value) is cst.Name
            and first.value.value == function.name.value
            for each in descendants(self.ctx.ancestors[0])
        )

    def _parameters_grown(self, node: cst.Assign, function: cst.FunctionDef) -> None:
        """Without a guard: the caches a function is given, each grown onto itself and handed
        back (GPT-SoVITS's `decode_next_token(x, k_cache, v_cache)`: `k_cache = torch.cat([k_cache,
        k], dim=1)`, the same for `v_cache`, both returned), where their names say they are caches
        (not `input_ids` padded to a length); reported at each, a line to change. Not in a loop of
        the function, which may start over."""
        parameters = {param.name.value for param in (*function.params.params, *function.params.kwonly_params)}
        grown = [
            (each, name)
            for each in descendants(function.body, _SCOPES)
            if type(each) is cst.Assign
            and self._grows(each, onto_itself=True)
            and (name := _path(_joined_first(each))) in parameters
            and name in self._targets(each)
        ]
        names = list(dict.fromkeys(name for _, name in grown))
        if (
            not grown
            or not any(each is node for each, _ in grown)
            or innermost_loop(self.ctx.ancestors) is not None
            or not _handed_back(function, names)
            or not all(name in _CACHES or "cache" in name for name in names)
        ):
            return
        shown = " and ".join(f"`{name}`" for name in names)
        function_name = min(self.ctx.qualified_names(node.value.func) & _GROWERS)  # type: ignore[attr-defined]
        what = (
            f"{shown} {'grows' if len(names) == 1 else 'grow'} by `{function_name}` onto the cache given, at every call"
        )
        self.report(node, what=what, advice=advice(self.ctx.targets))

    def _grows(self, node: cst.Assign, *, onto_itself: bool = False) -> bool:
        """`k = torch.cat((<something>, k), ...)`: a concatenation that puts the target last,
        or (`onto_itself`) first, where the target is the cache (`k_cache = torch.cat([k_cache,
        k])`)."""
        value = node.value
        if not isinstance(value, cst.Call):
            return False
        joined = _joined(value)  # the shape first: most assignments are no concatenation
        grown = joined[0] if onto_itself and joined else joined[-1] if joined else ""
        if len(joined) < 2 or not grown or grown not in self._targets(node):
            return False
        return bool(self.ctx.qualified_names(value.func) & _GROWERS)

    def _cache_guard(self, function: cst.FunctionDef) -> tuple[cst.If, str] | None:
        """The innermost `if <parameter> is not None:` around the node (also through a name
        bound to the test), and the parameter."""
        parameters = {param.name.value for param in (*function.params.params, *function.params.kwonly_params)}
        ancestors = self.ctx.ancestors
        for parent, child in zip(reversed(ancestors[:-1]), reversed(ancestors[1:])):
            if parent is function:
                return None
            if isinstance(parent, cst.If) and child is parent.body:
                test = parent.test
                if isinstance(test, cst.Name):  # `has_layer_past = layer_past is not None`
                    test = self.ctx.assigned_value(test) or test
                tested = (_tested_not_none(test, self._presence_tests) & parameters) or self._read_from(
                    test, parameters
                )
                if tested:
                    return parent, min(tested)
        return None

    @cached_property
    def _presence_tests(self) -> frozenset[str]:
        """The module's functions that say whether a value is there: lucidrains' `def
        exists(val): return val is not None`."""
        module_flow = self.ctx.flow
        functions = module_flow.module_functions() if module_flow is not None else {}
        return frozenset(name for name, function in functions.items() if _says_not_none(function))

    def _read_from(self, test: cst.BaseExpression, parameters: set[str]) -> set[str]:
        """The parameters a test reads through a name bound from one (DALLE-pytorch's `if offset
        > 0:` where `offset = cache.get('offset', 0) if exists(cache) else 0`)."""
        read = set()
        for name in (each for each in (test, *descendants(test)) if type(each) is cst.Name):
            bound = self.ctx.assigned_value(name)
            if bound is not None:
                read |= {each.value for each in (bound, *descendants(bound)) if type(each) is cst.Name} & parameters
        return read

    def _growths(self, block: cst.CSTNode, cache: str) -> list[cst.Assign]:
        """The concatenations under `block` that put what the cache holds before what they grow."""
        held = {cache} | _unpacked(block, cache)
        return [
            node
            for node in descendants(block, _SCOPES)
            if isinstance(node, cst.Assign) and self._grows(node) and _root(_joined_first(node)) in held
        ]

    def _targets(self, node: cst.Assign) -> list[str]:
        return [name for target in node.targets if (name := _path(target.target))]

    def _generates_with_dynamic_cache(self, call: cst.Call) -> bool:
        """`generate(...)` of a Hugging Face model (a name or `self.` attribute bound to
        `transformers`' or `peft`'s `...from_pretrained(...)`) that picks no cache of fixed
        length: no `cache_implementation=` naming one (in the call, a `GenerationConfig` or a dict
        of its arguments the module builds, or set on the model's `generation_config`) and no
        `past_key_values=` bound to a `StaticCache`. Arguments passed as `**kwargs` of unknown
        origin leave it unknown."""
        assert isinstance(call.func, cst.Attribute)
        if not self._hf_model(call.func.value) or self._picks_cache_anywhere:
            return False
        fed = patterns.keyword(call, "past_key_values")
        if fed is not None:
            return not self._fixed_length(_path(fed.value))
        for arg in call.args:
            if arg.star == "**" and not self._dict_without_cache_choice(arg.value):
                return False
        return True

    def _hf_model(self, node: cst.BaseExpression) -> bool:
        if self.ctx.flow is None:
            return False
        if type(node) is cst.Name:
            values = self.ctx.flow.resolver.explicit_values(node)
        elif is_self_attribute(node):
            assert isinstance(node, cst.Attribute)
            values = [value for value, _ in self.ctx.flow.self_attribute_values(node.attr.value)]
        else:
            return False
        return any(
            type(value) is cst.Call and _loads_hf_model(self.ctx.qualified_names(value.func)) for value in values
        )

    def _dict_without_cache_choice(self, node: cst.BaseExpression) -> bool:
        """A name bound only to dict literals the module writes (a `cache_implementation` key in
        one is `_picks_cache_anywhere`'s)."""
        values = self.ctx.assigned_values(node) if type(node) is cst.Name else []
        return bool(values) and all(type(value) is cst.Dict for value in values)

    @cached_property
    def _picks_cache_anywhere(self) -> bool:
        """Whether the module names a fixed-length `cache_implementation` anywhere: as a keyword
        (`GenerationConfig(cache_implementation="static")`), a dict key or an attribute set."""
        for node in descendants(self.ctx.ancestors[0]):
            value = None
            if type(node) is cst.Arg and node.keyword is not None and node.keyword.value == _CACHE_CHOICE:
                value = node.value
            elif type(node) is cst.DictElement and patterns.string_value(node.key) == _CACHE_CHOICE:
                value = node.value
            elif type(node) is cst.Assign and any(
                type(target.target) is cst.Attribute and target.target.attr.value == _CACHE_CHOICE
                for target in node.targets
            ):
                value = node.value
            if value is not None and patterns.string_value(value) not in _GROWING_CACHES:
                return True
        return False

    def _fixed_length(self, path: str) -> bool:
        """Whether the fed-back name is ever bound to a cache of fixed length in the module."""
        for node in descendants(self.ctx.ancestors[0]):
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
                if any(_path(target.target) == path for target in node.targets):
                    if self.ctx.qualified_names(node.value.func) & _FIXED_CACHES:
                        return True
        return False


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _trims(value: cst.BaseExpression, shown: str) -> bool:
    """`cache[k][:, -window:]`, any slice or index of the state: it drops what it adds."""
    return type(value) is cst.Subscript and _code(value.value) == shown


def _unless_none(value: cst.BaseExpression) -> cst.BaseExpression:
    """`pkv` for `pkv if not interrupted else None` (or the other way around): what is fed
    where anything is."""
    if type(value) is cst.IfExp:
        for kept, other in ((value.body, value.orelse), (value.orelse, value.body)):
            if type(other) is cst.Name and other.value == "None":
                return kept
    return value


def _path(node: cst.BaseExpression) -> str:
    """`a.b` for names and attributes, `state['pkv']` for a subscript of one by a string."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        key = patterns.string_value(node.slice[0].slice.value)
        base = _path(node.value)
        return f"{base}[{key!r}]" if base and key is not None else ""
    return patterns.dotted(node)


def _joined(call: cst.Call) -> list[str]:
    """What a concatenation lists, as paths ('' for anything else)."""
    arg = patterns.argument(call, 0, "tensors")
    if arg is None or not isinstance(arg.value, (cst.List, cst.Tuple)):
        return []
    return [_path(item.value) if isinstance(item, cst.Element) else "" for item in arg.value.elements]


def _joined_first(node: cst.Assign) -> cst.BaseExpression:
    arg = patterns.argument(node.value, 0, "tensors")  # type: ignore[arg-type]
    assert arg is not None and isinstance(arg.value, (cst.List, cst.Tuple))
    return arg.value.elements[0].value


def _root(node: cst.BaseExpression) -> str:
    """The name under subscripts and attributes: `past` for `past[0]` or `past.key`."""
    while isinstance(node, (cst.Subscript, cst.Attribute)):
        node = node.value
    return node.value if isinstance(node, cst.Name) else ""


def _unpacked(block: cst.CSTNode, cache: str) -> set[str]:
    """Names bound from the cache under `block`: `past_key, past_value = layer_past`,
    `pk = layer_past[0]`."""
    found = set()
    for node in descendants(block, _SCOPES):
        if isinstance(node, cst.Assign) and _root(node.value) == cache:
            for target in node.targets:
                elements = target.target.elements if isinstance(target.target, (cst.Tuple, cst.List)) else ()
                for value in (*(element.value for element in elements), target.target):
                    if isinstance(value, cst.Name):
                        found.add(value.value)
    return found


def _says_not_none(function: cst.FunctionDef) -> bool:
    """`def exists(val): return val is not None`."""
    params = function.params.params
    body = function.body.body
    if len(params) != 1 or len(body) != 1 or type(body[0]) is not cst.SimpleStatementLine:
        return False
    returned = body[0].body[0]
    return (
        type(returned) is cst.Return
        and returned.value is not None
        and (_tested_not_none(returned.value) == {params[0].name.value})
    )


def _tested_not_none(test: cst.BaseExpression, presence_tests: frozenset[str] = frozenset()) -> set[str]:
    """The names a condition requires to be something: `x is not None`, or `exists(x)` for one of
    `presence_tests`, also among `and`s."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _tested_not_none(test.left, presence_tests) | _tested_not_none(test.right, presence_tests)
    if isinstance(test, cst.Call) and patterns.dotted(test.func) in presence_tests and len(test.args) == 1:
        argument = test.args[0].value
        return {argument.value} if isinstance(argument, cst.Name) else set()
    if (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.IsNot)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    ):
        return {test.left.value}
    return set()


def _handed_back(function: cst.FunctionDef, names: list[str]) -> bool:
    """Whether the function returns one of `names`, or packs it in a tuple (the new cache)."""
    for node in descendants(function.body, _SCOPES):
        if not isinstance(node, (cst.Return, cst.Assign)) or node.value is None:
            continue
        choices = (node.value.body, node.value.orelse) if isinstance(node.value, cst.IfExp) else (node.value,)
        for value in choices:
            if isinstance(value, cst.Tuple):
                packed = [_path(element.value) for element in value.elements]
            else:
                packed = [_path(value)] if isinstance(node, cst.Return) else []
            if set(packed) & set(names):
                return True
    return False


def _trimmed_again(function: cst.FunctionDef, name: str) -> bool:
    """Whether the function also binds `name` to itself less a fixed prefix (`ids = ids[:, 1:]`):
    what was joined before it comes off again, and the length stays."""
    for node in descendants(function.body, _SCOPES):
        if type(node) is not cst.Assign or len(node.targets) != 1 or _path(node.targets[0].target) != name:
            continue
        value = node.value
        if type(value) is cst.Subscript and _path(value.value) == name:
            bounds = [each.slice for each in value.slice if type(each.slice) is cst.Slice]
            if any(type(bound.lower) is cst.Integer and bound.upper is None for bound in bounds):
                return True
    return False


def _binds(block: cst.CSTNode, path: str) -> bool:
    """Whether an assignment under `block` (not in nested scopes) binds `path`."""
    return any(
        isinstance(node, cst.Assign) and any(_path(target.target) == path for target in node.targets)
        for node in descendants(block, _SCOPES)
    )


def _loads_hf_model(names: frozenset[str]) -> bool:
    """`AutoModelForCausalLM.from_pretrained`, `peft.PeftModel.from_pretrained`..."""
    return any(name.startswith(_HF_LOADERS) and name.endswith(".from_pretrained") for name in names)
