"""The device flow (portcheck.flow) and what it changes: a CUDA check and what it protects are
fixed together or not at all (portcheck.coherence), code reached only under such a check is
info, integer devices are followed through the module, and step loops are more than loops over
a DataLoader. Single rules are checked by their own examples; these cases need several rules,
or the engine and the fixer together."""

from __future__ import annotations

from textwrap import dedent

import libcst as cst
import pytest

from portcheck import api
from portcheck.config import Config
from portcheck.findings import FixSafety, Severity
from portcheck.flow import DeviceFlow
from portcheck.resolve import Resolver
from portcheck.rules import shapes
from portcheck.rules.shapes.boolean_mask_indexing import BooleanMaskIndexing
from portcheck.walk import Walker


def fixed(source: str, device: str, *, unsafe: bool = False) -> str:
    outcome = api.fix_source(dedent(source), device, unsafe=unsafe)
    assert not outcome.error, outcome.error
    again = api.fix_source(outcome.source, device, unsafe=unsafe)
    assert again.source == outcome.source, "a second fix must change nothing"
    return outcome.source.decode()


def findings(source: str, target: str = "tpu") -> dict[tuple[int, str], tuple[Severity, FixSafety, str]]:
    found = api.scan_source(dedent(source), config=Config(targets=(target,)))
    return {(f.line, f.code): (f.severity, f.fix_safety, f.message + " | " + f.hint) for f in found}


PROPERTIES = """\
import torch
if torch.cuda.is_available():
    props = torch.cuda.get_device_properties(0)
    print(props.name)
"""


@pytest.mark.parametrize("device", ["tpu", "neuron", "auto", "xpu"])
def test_a_check_stays_while_what_it_protects_has_no_replacement(device: str) -> None:
    assert fixed(PROPERTIES, device) == PROPERTIES
    outcome = api.fix_source(PROPERTIES, device)
    assert ("PC201", "kept: the code it guards still needs a person (PC206 on line 3)") in outcome.skipped


EARLY_RETURN = """\
import torch
class Attend:
    def __init__(self, flash=False):
        if not torch.cuda.is_available() or not flash:
            return
        props = torch.cuda.get_device_properties(torch.device("cuda"))
        self.major = props.major
"""


def test_an_early_return_unless_cuda_and_a_flag_protects_what_follows() -> None:
    """denoising-diffusion-pytorch's `Attend`: `if not torch.cuda.is_available() or not flash:
    return` leaves the rest of the function to CUDA. Opening the check alone sent the TPU to
    `torch.cuda.get_device_properties`, which raises there."""
    assert fixed(EARLY_RETURN, "tpu") == EARLY_RETURN
    outcome = api.fix_source(EARLY_RETURN, "tpu")
    assert ("PC201", "kept: the code it guards still needs a person (PC206 on line 6)") in outcome.skipped


CLOSED_CHAIN = """\
import torch
def available(device):
    if device.startswith("cuda"):
        return torch.cuda.is_available()
    elif device == "cpu":
        return True
    else:
        raise ValueError(device)
"""


def test_a_chain_of_device_checks_that_ends_raising_keeps_its_cuda_branch_whole() -> None:
    """LeRobot's `is_torch_device_available`: the `raise` the target reaches is reported, and
    the CUDA branch's check still decides its body. Rewriting the body alone made
    `available("cuda")` answer True on a TPU host."""
    assert fixed(CLOSED_CHAIN, "tpu") == CLOSED_CHAIN
    outcome = api.fix_source(CLOSED_CHAIN, "tpu")
    assert ("PC201", "left: its CUDA check (PC105 on line 3) stays, so this would never run") in outcome.skipped
    assert (8, "PC105") in findings(CLOSED_CHAIN) and (3, "PC105") in findings(CLOSED_CHAIN)


def test_a_check_left_guarding_nothing_goes_with_the_call_it_guarded() -> None:
    """mmcv's `if torch.cuda.current_device() != device: torch.cuda.set_device(device)`: where
    a process owns its one device the call goes, and so does the check, not left as `if ...:
    pass`; a check with a comment of its own stays."""
    source = """\
    import torch
    def place(points):
        if torch.cuda.current_device() != points.device.index:
            torch.cuda.set_device(points.device.index)
        # the device the points live on
        if torch.cuda.current_device() != points.device.index:
            torch.cuda.set_device(points.device.index)
        return points
    """
    assert fixed(source, "tpu") == dedent(source).replace(
        "    if torch.cuda.current_device() != points.device.index:\n        torch.cuda.set_device(points.device.index)\n    #",
        "    #",
    ).replace("torch.cuda.current_device()", "torch.accelerator.current_device_index()").replace(
        "        torch.cuda.set_device(points.device.index)\n", "        pass\n"
    )


METRIC_LOGGER = """\
import torch
MB = 1024.0 * 1024.0
def log_every(it, header):
    if torch.cuda.is_available():
        log_msg = header + " max mem: {memory:.0f}"
    else:
        log_msg = header
    for obj in it:
        yield obj
        if torch.cuda.is_available():
            print(log_msg.format(memory=torch.cuda.max_memory_allocated() / MB))
        else:
            print(log_msg)
"""


def test_checks_written_the_same_way_in_one_definition_are_fixed_together() -> None:
    """torchvision's MetricLogger chooses a format under one check and fills it under another:
    rewriting the first alone (the second guards a call with no safe fix) makes the target
    print a format that asks for `memory` without passing it: a KeyError every step."""
    assert fixed(METRIC_LOGGER, "tpu") == METRIC_LOGGER
    outcome = api.fix_source(METRIC_LOGGER, "tpu")
    assert ("PC201", "kept: the same check on line 10 stays, and the two decide together") in outcome.skipped
    assert fixed(METRIC_LOGGER, "tpu", unsafe=True) == METRIC_LOGGER.replace(
        "torch.cuda.is_available", "torch.accelerator.is_available"
    ).replace("torch.cuda.max_memory_allocated", "torch.accelerator.max_memory_allocated")
    # both checks and the memory report are the port's: on the target the report is silently lost
    found = findings(METRIC_LOGGER)
    assert [found[(line, code)][0] for line, code in ((10, "PC201"), (11, "PC204"))] == [Severity.WARNING] * 2
    assert found[(4, "PC201")][0] is Severity.ERROR


def test_checks_written_the_same_way_that_share_nothing_are_fixed_apart() -> None:
    """nanoGPT: the dtype chosen under one check and a GPU's name printed under another."""
    source = """\
    import torch
    def setup():
        dtype = "float16"
        if torch.cuda.is_available():
            dtype = "bfloat16"
        if torch.cuda.is_available():
            print(torch.cuda.get_device_name(0))
        return dtype
    """
    assert fixed(source, "tpu") == dedent(source).replace(
        "torch.cuda.is_available():\n        dtype", "torch.accelerator.is_available():\n        dtype"
    )


def test_a_scan_does_not_offer_a_fix_the_fixer_would_hold_back() -> None:
    severity, safety, text = findings(PROPERTIES)[(2, "PC201")]
    assert safety is FixSafety.NONE and "not fixed: kept: the code it guards still needs a person" in text
    severity, _, text = findings(PROPERTIES)[(3, "PC206")]  # a port gives the target an equivalent or drops it
    assert severity is Severity.WARNING and "runs only where CUDA is present" in text


def test_a_check_of_a_rewritten_device_is_rewritten_with_it_and_its_body() -> None:
    source = """\
    import torch
    device = "cuda"
    if device == "cuda":
        torch.cuda.synchronize()
    """
    assert fixed(source, "tpu") == dedent(
        """\
        import torch
        device = "tpu"
        if device == "tpu":
            torch.accelerator.synchronize()
        """
    )


def test_the_body_stays_while_its_check_stays() -> None:
    source = """\
    import torch
    def step(x):
        if x.is_cuda:
            torch.cuda.synchronize()
    """
    assert fixed(source, "tpu") == dedent(source)  # `x.is_cuda` needs --unsafe-fixes
    assert 'x.device.type == "tpu":\n        torch.accelerator.synchronize()' in fixed(source, "tpu", unsafe=True)


@pytest.mark.parametrize(
    "source",
    [
        'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n',
        "import torch\nif torch.cuda.is_available():\n    torch.cuda.manual_seed_all(0)\n",
        "import torch\ndef f(x):\n    if x.device.type == 'cuda':\n        torch.cuda.synchronize()\n    return x\n",
    ],
)
def test_the_cpu_target_leaves_the_cuda_path_for_gpus(source: str) -> None:
    assert fixed(source, "cpu") == source


def test_an_assert_is_no_path_the_cpu_target_can_leave() -> None:
    source = "import torch\nassert torch.cuda.is_available(), 'needs a GPU'\ntorch.cuda.synchronize()\n"
    severity, _, text = findings(source, "cpu")[(2, "PC201")]
    assert severity is Severity.ERROR and "this assert stops the program" in text
    # a port removes the assert: what follows then runs there, and is no CUDA branch to keep
    severity, _, text = findings(source, "cpu")[(3, "PC203")]
    assert severity is Severity.ERROR and "reached only under a CUDA check" not in text


def test_an_early_exit_protects_what_follows() -> None:
    source = """\
    import torch
    def report():
        if not torch.cuda.is_available():
            return
        print(torch.cuda.get_device_name(0))
    """
    found = findings(source)
    assert found[(5, "PC206")][0] is Severity.WARNING
    assert found[(3, "PC201")][0] is Severity.ERROR


def test_what_an_and_runs_after_cudas_own_check_is_rewritten_with_it() -> None:
    """A test led by CUDA's API (`torch.cuda.is_available() and ...`) is one a port rewrites
    whole: once the check becomes `torch.accelerator.is_available()`, what follows it in the
    test runs on the target, so it is a line to change too (a warning, not info). Led by a
    comparison of the device, the test fails on the target as written: what follows it is info."""
    source = """\
    import torch
    if torch.cuda.is_available() and torch.cuda.memory_allocated() > 0:
        model = model.cuda()
    FLASH = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)
    def pick(device, dtype):
        if device.type == "cuda" and torch.cuda.get_device_capability()[0] < 8:
            dtype = torch.float16
        return dtype
    """
    found = findings(source)
    assert found[(2, "PC204")][0] is Severity.WARNING
    assert found[(4, "PC206")][0] is Severity.WARNING
    assert "a port that rewrites the check rewrites this too" in found[(4, "PC206")][2]
    assert found[(2, "PC201")][0] is Severity.ERROR
    assert found[(6, "PC206")][0] is Severity.INFO


def test_a_build_of_torch_for_cuda_or_rocm_is_a_check() -> None:
    source = """\
    import torch
    if torch.version.hip:
        props = torch.cuda.get_device_properties(0)
    if torch.version.cuda is not None:
        torch.cuda.synchronize()
    if torch.version.hip is None:
        print("no rocm")
    else:
        torch.cuda.synchronize()
    """
    found = findings(source)
    # reading CUDA's own facts is kept from the target, a synchronization is the program's: both a port's
    assert {line: found[(line, code)][0] for line, code in ((3, "PC206"), (5, "PC203"), (9, "PC203"))} == {
        3: Severity.WARNING,
        5: Severity.WARNING,
        9: Severity.WARNING,
    }


def test_the_nccl_backend_is_a_check_for_cuda() -> None:
    """sam2's all-gather helper moves a tensor to CUDA only where NCCL communicates, which is
    only between CUDA devices."""
    source = """\
    import torch
    import torch.distributed as dist
    def to_comm(tensor):
        if dist.get_backend() == dist.Backend.NCCL and not tensor.is_cuda:
            tensor = tensor.cuda()
        if dist.get_backend() != "nccl":
            return tensor
        return tensor.cuda()
    """
    found = findings(source)
    assert found[(5, "PC102")][0] is Severity.INFO
    assert found[(8, "PC102")][0] is Severity.INFO


@pytest.mark.parametrize(
    "guard",
    [
        "@unittest.skipUnless(torch.cuda.is_available(), 'GPU')\nclass TestOps(unittest.TestCase):\n    def test_op(self):",
        "@pytest.mark.skipif(not torch.cuda.is_available(), reason='GPU')\ndef test_op():\n    if True:",
        "def test_op():\n    if not torch.cuda.is_available():\n        pytest.skip('GPU')\n    if True:",
        "class TestOps(unittest.TestCase):\n    def test_op(self):\n        if not torch.cuda.is_available():\n"
        "            self.skipTest('GPU')",
    ],
)
def test_a_test_skipped_without_cuda_runs_only_on_cuda(guard: str) -> None:
    source = f"import unittest\nimport pytest\nimport torch\n{guard}\n        torch.cuda.synchronize()\n"
    found = {code: severity for (_, code), (severity, _, _) in findings(source).items()}
    assert found == {"PC201": Severity.WARNING, "PC203": Severity.INFO}


@pytest.mark.parametrize(
    "gate",
    [
        "@pytest.mark.gpu",
        "@_RunIf(min_cuda_gpus=2)",
        "@require_torch_gpu",
        "@requires_cuda",
        "@testing_utils.require_torch_multi_gpu",
    ],
)
def test_a_test_suite_gate_for_gpus_runs_its_test_only_on_cuda(gate: str) -> None:
    source = f"import pytest\nimport torch\n{gate}\ndef test_op():\n    x = torch.ones(2, device='cuda')\n"
    source += "    assert x.device.type == 'cuda'\n"
    found = {code: severity for (_, code), (severity, _, _) in findings(source).items()}
    assert found == {"PC101": Severity.INFO, "PC105": Severity.INFO}


def test_a_parameter_set_marked_for_gpus_holds_cuda_only_values() -> None:
    source = """\
    import pytest
    import torch
    @pytest.mark.parametrize("device", [torch.device("cpu"), pytest.param(torch.device("cuda"), marks=[_RunIf(min_cuda_gpus=1)])])
    def test_op(device):
        pass
    @_RunIf(min_cuda_gpus=0)
    def test_cpu():
        x = torch.ones(2, device="cuda")
    """
    found = findings(source)
    assert found[(3, "PC101")][0] is Severity.INFO
    assert found[(8, "PC101")][0] is Severity.ERROR


def test_a_device_string_with_a_cuda_index_prefix_is_a_check() -> None:
    source = """\
    import torch
    def set_device(device):
        if device.startswith("cuda:"):
            torch.cuda.set_device(device)
        elif device.startswith("npu:"):
            torch.npu.set_device(device)
    """
    assert findings(source)[(4, "PC202")][0] is Severity.INFO


def test_a_device_choice_without_a_branch_for_the_target_is_its_device_path() -> None:
    """llm.c: cuda, else mps, else the CPU. On a TPU host the chain picks the CPU, so the CUDA
    branch is the one a port opens, with its check (which the fixer rewrites together)."""
    source = """\
    import torch
    device = "cpu"
    if torch.cuda.is_available():
        device = "cuda"
    elif hasattr(torch.backends, "mps") and torch.backends.mps.is_available():
        device = "mps"
    """
    found = findings(source)
    assert found[(3, "PC201")][0] is Severity.ERROR
    assert found[(4, "PC101")][0] is Severity.WARNING
    assert fixed(source, "tpu") == dedent(source).replace(
        "torch.cuda.is_available", "torch.accelerator.is_available"
    ).replace('"cuda"', '"tpu"')


def test_a_checked_name_is_a_check_where_it_is_bound() -> None:
    source = """\
    import torch
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        print(torch.cuda.get_device_name(0))
    """
    assert fixed(source, "tpu") == dedent(source)  # get_device_name has no replacement: both stay
    assert findings(source)[(4, "PC206")][0] is Severity.WARNING


def test_a_parameter_rebound_to_a_check_is_one_in_the_rest_of_its_function() -> None:
    """I-JEPA's gpu_timer: `log_timings = log_timings and torch.cuda.is_available()` first thing;
    the CUDA events under `if log_timings:` run only on CUDA (a warning: the timing a port
    opens to the target with the check). A rebinding in a branch may not happen: what the
    parameter guards there is reported in full."""
    source = """\
    import torch
    def gpu_timer(closure, log_timings=True):
        log_timings = log_timings and torch.cuda.is_available()
        if log_timings:
            start = torch.cuda.Event(enable_timing=True)
        return closure()
    def maybe(closure, log_timings=True):
        if closure is None:
            log_timings = log_timings and torch.cuda.is_available()
        if log_timings:
            torch.cuda.synchronize()
    """
    found = findings(source)
    assert found[(5, "PC207")][0] is Severity.WARNING
    assert found[(11, "PC203")][0] is Severity.ERROR


def test_the_nanogpt_device_type_mapping_keeps_autocast_on_the_target() -> None:
    source = """\
    import torch
    device = 'cuda'
    device_type = 'cuda' if 'cuda' in device else 'cpu'
    ctx = torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)
    """
    result = fixed(source, "neuron")
    assert "device = 'neuron'" in result
    assert "device_type = 'neuron' if 'neuron' in device else 'cpu'" in result


INDEXES = """\
import os
import torch
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, gpu_id):
        self.gpu_id = gpu_id
        self.model = DDP(model.to(gpu_id), device_ids=[gpu_id])

    def step(self, batch):
        return self.model(batch.to(self.gpu_id))


def worker(rank, world_size):
    torch.cuda.set_device(rank)
    Trainer(torch.nn.Linear(2, 2), rank).step(torch.ones(2, 2))


def local():
    device = int(os.environ["LOCAL_RANK"])
    return torch.zeros(3, device=device)


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(worker, args=(world_size,), nprocs=world_size)
"""


def test_integer_devices_are_followed_through_parameters_attributes_and_spawn() -> None:
    found = {line for line, code in findings(INDEXES) if code == "PC107"}
    assert found == {10, 13, 23}


def test_integer_devices_are_fixed_for_cpu_and_auto_alike() -> None:
    cpu, auto = fixed(INDEXES, "cpu"), fixed(INDEXES, "auto")
    assert 'model.to("cpu")' in cpu and 'batch.to("cpu")' in cpu and 'device="cpu"' in cpu
    assert "set_device" not in cpu and "max(torch.accelerator.device_count(), 1)" in cpu
    assert (
        'model.to(f"{DEVICE.type}:{gpu_id}")' in auto
        and 'device_ids=[gpu_id] if DEVICE.type != "cpu" else None' in auto
    )
    assert "if torch.accelerator.is_available():\n        torch.accelerator.set_device_index(rank)" in auto


def test_a_parameter_of_a_function_called_with_devices_holds_no_index() -> None:
    source = """\
    import torch
    def place(x, where):
        return x.to(where)
    place(torch.ones(1), torch.device("cpu"))
    place(torch.ones(1), 0)
    """
    assert (3, "PC107") not in findings(source)  # one caller passes a device: not always an index


@pytest.mark.parametrize(
    ("loop", "where"),
    [
        ("while True:\n    loss = model(get_batch())\n    loss.backward()\n    optimizer.step()\n", "a training loop"),
        ("for _ in range(n):\n    tok = torch.multinomial(probs, 1)\n", "a decoding loop"),
        ("for k in range(n):\n    X, Y = get_batch('val')\n", "a step loop"),
    ],
)
def test_step_loops_are_found_by_what_they_run(loop: str, where: str) -> None:
    source = f"import torch\n{loop}    print(loss.item())\n"
    assert any(where in text for (_, code), (_, _, text) in findings(source).items() if code == "PC503")


def test_a_loader_wrapped_one_way_or_another_by_a_choice_is_still_a_loader() -> None:
    source = """\
    import torch
    from tqdm import tqdm
    class Trainer:
        def raise_if_nan(self, losses):
            for key, value in losses.items():
                if torch.isnan(value):
                    raise ValueError(key)
        def train(self, rank0):
            pbar = tqdm(enumerate(self.train_loader)) if rank0 else enumerate(self.train_loader)
            for i, batch in pbar:
                self.raise_if_nan(self.train_on_batch(batch, i))
    """
    found = findings(source)
    assert "called from a loop over a DataLoader" in found[(6, "PC504")][2]  # ZoeDepth's trainer


def test_an_epoch_loop_around_a_step_loop_is_no_step_loop() -> None:
    source = """\
    import torch
    for epoch in range(3):
        for x in data:
            loss = model(x)
            loss.backward()
        print(loss.item())
    """
    assert not [key for key in findings(source) if key[1] == "PC503"]


def test_numpy_where_outputs_leave_torch_is_info_but_not_in_training_or_decoding() -> None:
    source = """\
    import torch
    from PIL import Image

    def to_image(x):
        return Image.fromarray(x[0].cpu().numpy())

    class Backend(torch.nn.Module):
        def forward(self, im):
            return self.session.run(None, {"images": im.cpu().numpy()})

    for prompt in prompts:
        sample = model.decode(sampler.sample(prompt))
        to_image(sample).save(f"{prompt}.png")
        grid.append(sample.numpy())
    for x, y in loader:
        loss = model(x, y)
        loss.backward()
        quartiles.append(loss.detach().numpy())
    while len(tokens) < n:
        tokens.append(torch.multinomial(model(tokens).softmax(-1), 1).numpy())
    """
    found = {
        line: (severity, text) for (line, code), (severity, _, text) in findings(source).items() if code == "PC503"
    }
    assert {line: severity for line, (severity, _) in found.items()} == {
        5: Severity.INFO,  # called from a sampling loop
        9: Severity.INFO,  # forward() handing the input to another runtime
        14: Severity.INFO,
        18: Severity.WARNING,
        20: Severity.WARNING,
    }
    assert "leaves torch here" in found[14][1]


def test_a_round_trip_through_numpy_in_the_step_is_no_hand_off() -> None:
    """vits' monotonic alignment: forward() reads the scores out with `.numpy()`, searches them
    in Cython and makes the result a device tensor again: a host sync every step, not an
    output. A branch that runs only on the CPU (`self.device == _CPU_DEVICE`, a constant for
    `torch.device("cpu")`) is left to the CPU."""
    source = """\
    import torch
    _CPU_DEVICE = torch.device("cpu")

    def maximum_path(neg_cent):
        path = search(neg_cent.data.cpu().numpy())
        return torch.from_numpy(path).to(device=neg_cent.device)

    class Synthesizer(torch.nn.Module):
        def forward(self, x):
            return maximum_path(x)

    class Classifier(torch.nn.Module):
        def forward(self, samples):
            if self.device == _CPU_DEVICE:
                samples = samples.numpy()
            return torch.from_numpy(self.estimator.predict_proba(samples)).to(samples.device)
    """
    found = {line: severity for (line, code), (severity, _, _) in findings(source).items() if code == "PC503"}
    assert found == {5: Severity.WARNING}


def test_features_kept_on_the_host_to_go_back_to_the_device_are_no_hand_off() -> None:
    """BLIP's retrieval evaluation copies each batch's image features to the host, then sends
    the ones it ranks back to the device: a sync per batch, not an output. Features only
    returned (an extraction) leave torch: info."""
    source = """\
    import torch

    @torch.no_grad()
    def evaluation(model, data_loader, text_ids, device):
        image_feats = []
        for image, img_id in data_loader:
            image_feat = model.visual_encoder(image.to(device))
            image_feats.append(image_feat.cpu())
        image_feats = torch.cat(image_feats, dim=0)
        for i in range(len(text_ids)):
            encoder_output = image_feats[i].repeat(4, 1, 1).to(device)
            model.text_encoder(text_ids[i], encoder_hidden_states=encoder_output)

    @torch.no_grad()
    def extract(model, data_loader, device):
        feats = []
        for image, _ in data_loader:
            feats.append(model(image.to(device)).cpu())
        return torch.cat(feats)
    """
    found = {line: severity for (line, code), (severity, _, _) in findings(source).items() if code == "PC503"}
    assert found == {8: Severity.WARNING, 18: Severity.INFO}


def test_a_host_copy_written_out_is_its_outputs_cost() -> None:
    """A copy given to a writer, directly or through the name it is bound to, is an output: info
    in any step loop. A copy the loop keeps computing with is not."""
    source = """    import numpy as np
    import torch
    from PIL import Image

    def save(x, path):
        img = x.detach().cpu().numpy().transpose(1, 2, 0)
        Image.fromarray(img).save(path)

    for i, (x, y) in enumerate(loader):
        loss = model(x, y)
        loss.backward()
        np.save(f"{i}.npy", loss.detach().cpu().numpy())
        save(model.sample(), f"{i}.png")
        kept = loss.detach().cpu()
        history.append(kept)
    """
    found = {line: severity for (line, code), (severity, _, _) in findings(source).items() if code == "PC503"}
    assert found == {6: Severity.INFO, 12: Severity.INFO, 14: Severity.WARNING}


def test_a_whole_tensor_copied_out_without_training_is_an_output() -> None:
    """An evaluation over a DataLoader (no training step) keeps its predictions on the host, and
    so does a function that runs the model under `torch.no_grad()` (taming-transformers'
    `run_model`): info. The same copy in a training loop, under `no_grad` or not, and a scalar
    read every step are warnings."""
    source = """    import torch

    def run_model(img, model):
        with torch.no_grad():
            seg = model(img)
        return seg.argmax(1).cpu()

    def evaluate(model, loader):
        for x, y in loader:
            preds.append(model(x).argmax(-1).cpu())
            seen = run_model(x, model)

    def train(model, loader, opt):
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            opt.step()
            with torch.no_grad():
                kept = model(x).argmax(-1).cpu()
            total = loss.item()
    """
    found = {line: severity for (line, code), (severity, _, _) in findings(source).items() if code == "PC503"}
    assert found == {6: Severity.INFO, 10: Severity.INFO, 19: Severity.WARNING, 20: Severity.WARNING}


def test_a_helper_only_evaluation_loops_call_copies_out_their_outputs() -> None:
    """BasicSR's `get_current_visuals()`: called only in the validation loop, its copies are the
    evaluation's outputs (info). A helper the training loop calls too, or a scalar read, syncs
    every step."""
    source = """    import torch

    class SRModel:
        def get_current_visuals(self):
            return {"result": self.output.detach().cpu()}

        def log_images(self, images):
            return images.detach().cpu()

        def validation(self, loader):
            for data in loader:
                self.test(data)
                visuals = self.get_current_visuals()
                kept = self.log_images(self.output)

        def train(self, loader, opt):
            for data in loader:
                self.net(data).mean().backward()
                opt.step()
                self.log_images(self.net(data))
    """
    found = {line: severity for (line, code), (severity, _, _) in findings(source).items() if code == "PC503"}
    assert found == {5: Severity.INFO, 8: Severity.WARNING}


def test_a_periodic_block_that_steps_the_optimizer_is_the_step() -> None:
    """LoRA's PTI: `if global_step % accum_iter == 0:` around `optimizer.step()` is gradient
    accumulation, the training step itself, so what it prints is read back every step, also
    where the step is taken in a branch (MiniGPT-4's `if use_amp:` scaler or plain optimizer);
    a logging block every 100 steps is not."""
    source = """    import torch
    import wandb

    def train(model, loader, optimizer, scaler, use_amp):
        for step, (x, y) in enumerate(loader):
            loss = model(x, y)
            loss.backward()
            if step % accum_iter == 0:
                print(model.weight.grad.norm(dim=-1).mean())
                optimizer.step()
                optimizer.zero_grad()
            if (step + 1) % accum_iter == 0:
                if use_amp:
                    scaler.step(optimizer)
                else:
                    optimizer.step()
                wandb.log({"loss": loss})
            if step % 100 == 0:
                print(loss.item(), loss)
    """
    found = {line: severity for (line, code), (severity, _, _) in findings(source).items() if code == "PC503"}
    assert found == {9: Severity.WARNING, 17: Severity.WARNING}


def test_torch_arithmetic_makes_tensors() -> None:
    """tortoise-tts' `set_mel_padding`, run by forward(): `torch.div(...)` makes a tensor, so
    an element of it plus one, tested and sliced by, is read on the host."""
    source = """    import torch

    class Model(torch.nn.Module):
        def forward(self, codes, wav_lengths):
            mel_lengths = torch.div(wav_lengths, 4, rounding_mode="trunc")
            for b in range(len(mel_lengths)):
                actual_end = mel_lengths[b] + 1
                if actual_end < codes.shape[-1]:
                    codes[b, actual_end:] = 0
            return codes
    """
    assert {key for key in findings(source) if key[1].startswith("PC5")} == {(8, "PC504"), (9, "PC505")}


def test_a_check_that_only_seeds_cuda_again_is_info() -> None:
    """A seed_everything helper: after `torch.manual_seed(seed)`, which seeds every device, the
    check and the CUDA seeding it guards lose nothing on the target; alone, they do."""
    source = """    import random
    import torch

    def seed_everything(seed):
        random.seed(seed)
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)

    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(1)
    """
    found = {key: severity for key, (severity, _, _) in findings(source).items()}
    assert found == {
        (7, "PC201"): Severity.INFO,
        (8, "PC205"): Severity.INFO,
        (10, "PC201"): Severity.WARNING,
        (11, "PC205"): Severity.WARNING,
    }


def test_a_tokenizers_tensors_and_a_comparison_with_none_read_nothing_on_the_device() -> None:
    """AnimateDiff's pipeline: what a tokenizer returns with `return_tensors="pt"` (and its
    `.input_ids`) is made on the CPU, and `images != None` answers True or False without
    reading a value (checked on torch 2.13); a test of the values themselves is a sync."""
    source = """    import torch

    class Pipe(torch.nn.Module):
        def forward(self, prompt, images=None):
            ids = self.tokenizer(prompt, padding="max_length", return_tensors="pt").input_ids
            longest = self.tokenizer(prompt, padding="longest", return_tensors="pt").input_ids
            if not torch.equal(ids, longest):
                print("truncated")
            x = self.encoder(ids.to("tpu"))
            if images != None:
                x = x + images
            if (x > 0).any():
                x = x - 1
            return x
    """
    assert {key for key in findings(source) if key[1] == "PC504"} == {(12, "PC504")}


def test_what_runs_before_a_sampling_loop_runs_once_per_sampling() -> None:
    """A DDIM sampler (AudioLDM's, latent diffusion's): `sample()` makes its schedule, then
    calls `ddim_sampling()`, which loops over the timesteps; what the schedule copies to the
    host runs once per sampling, not every step of the loop that samples, nor of the sampler's
    own loop. A loop over microbatches that trains is part of the step that calls it."""
    source = """    import numpy as np
    import torch

    class Sampler:
        def make_schedule(self, n):
            self.sqrt = torch.tensor(np.sqrt(self.model.alphas_cumprod.cpu())).to(self.model.device)

        def sample(self, n, shape):
            self.make_schedule(n)
            return self.ddim_sampling(shape)

        def ddim_sampling(self, shape):
            img = torch.randn(shape, device=self.model.device)
            for i in range(self.steps):
                img = self.model(img, i)
            return img

        def log_images(self, loader):
            for batch in loader:
                samples = self.sample(50, self.model(batch).shape)

    class Trainer:
        def run_loop(self, data):
            while True:
                self.run_step(next(data))

        def run_step(self, batch):
            self.forward_backward(batch)
            norm = sum(p.grad.norm() for p in self.params).item()
            self.opt.step()

        def forward_backward(self, batch):
            for i in range(0, batch.shape[0], self.micro):
                self.model(batch[i : i + self.micro]).mean().backward()
    """
    found = {line for line, code in findings(source) if code == "PC503"}
    assert found == {29}


def test_a_callable_given_a_tensor_method_of_device_data_runs_the_model() -> None:
    """tortoise-tts: `clvp(text_tokens.repeat(n, 1), batch)` after `text_tokens = ....to(device)`
    runs a model on device data, so its loop is a step loop, and the helper it calls for each
    candidate reads back every step."""
    source = """    import torch

    def fix(codes, stop_token):
        stm = (codes == stop_token).nonzero().min().item()
        return codes

    def rank(clvp, tokenizer, text, samples, device):
        text_tokens = torch.IntTensor(tokenizer.encode(text)).unsqueeze(0).to(device)
        for batch in samples:
            batch = fix(batch, 8193)
            clvp_out = clvp(text_tokens.repeat(batch.shape[0], 1), batch, return_loss=False)
    """
    assert {line for line, code in findings(source) if code == "PC503"} == {4}


def test_an_interval_counted_from_the_last_pass_is_periodic() -> None:
    """LoRA saves when `global_step - last_save >= args.save_steps` and then sets `last_save =
    global_step`: once per interval, the remedy for a per-step sync, as under `step % N == 0`;
    a difference whose body resets nothing is no interval."""
    source = """    import torch

    def save_weights(model, path):
        torch.save({k: v.to("cpu") for k, v in model.state_dict().items()}, path)

    last_save = 0
    for step, batch in enumerate(loader):
        loss = model(batch)
        loss.backward()
        if args.save_steps and step - last_save >= args.save_steps:
            save_weights(model, "w.pt")
            print(loss.item())
            last_save = step
        if step - warmup >= 0:
            print(loss.item())
    """
    found = {line: severity for (line, code), (severity, _, _) in findings(source).items() if code == "PC503"}
    assert found == {15: Severity.WARNING}


def test_an_integer_device_is_reported_once_per_function_and_fixed_at_every_use() -> None:
    source = """\
    import torch

    def main(rank):
        device = rank % torch.cuda.device_count()
        model = Net().to(device)
        ema = Net().to(device)
        return torch.zeros(2, device=device)

    def other(rank):
        return torch.ones(2).to(rank)
    """
    severities = {line: severity for (line, code), (severity, _, _) in findings(source).items() if code == "PC107"}
    assert severities == {5: Severity.WARNING, 6: Severity.INFO, 7: Severity.INFO, 10: Severity.WARNING}
    assert fixed(source, "tpu").count('"tpu"') == 4


def test_checks_that_change_no_result_on_the_target_are_info_or_a_warning() -> None:
    source = """\
    import torch

    class Trainer:
        def __init__(self):
            self.sync_cuda = torch.cuda.is_available()

        def configure(self, params, device_type):
            use_fused = device_type == "cuda"
            print(f"fused AdamW: {use_fused}")
            return torch.optim.AdamW(params, fused=use_fused)

        def scaled(self, device_type):
            use_amp = device_type == "cuda"
            return torch.autocast(device_type, enabled=use_amp)
    """
    found = findings(source)
    assert found[(5, "PC201")][0] is Severity.INFO and "read nowhere" in found[(5, "PC201")][2]
    # the target silently takes the unfused optimizer: a port's to decide
    assert found[(8, "PC105")][0] is Severity.WARNING and "fused kernel" in found[(8, "PC105")][2]
    assert found[(13, "PC105")][0] is Severity.WARNING  # autocast silently off: not only a kernel choice


def test_methods_run_on_objects_of_the_module_classes_are_followed_from_a_step_loop() -> None:
    source = """\
    import torch

    class Inference:
        def __init__(self, model):
            self.model = model
        def logits(self, tokens):
            return self.model.decoder(tokens)

    class Decoder:
        def update(self, tokens, logits):
            return tokens, bool(tokens[0, -1].item() == 0)

    class Greedy(Decoder):
        pass

    class Beam(Decoder):
        def update(self, tokens, logits):
            return tokens, logits.max().item() > 0

    class Blank:
        def apply(self, logits, tokens):
            return tokens.tolist()

    class Unused:
        def update(self, tokens, logits):
            return tokens.tolist()

    class Task:
        def __init__(self, model, beam):
            self.inference = Inference(model)
            self.decoder = Beam() if beam else Greedy()
            self.filters = []
            self.filters.append(Blank())

        def run(self, tokens):
            for i in range(100):
                logits = self.inference.logits(tokens)
                for f in self.filters:
                    f.apply(logits, tokens)
                tokens, done = self.decoder.update(tokens, logits)
                if i == 0:
                    first = logits.tolist()
    """
    lines = {line for line, code in findings(source) if code == "PC503"}
    assert lines == {11, 18, 22}  # Decoder's (run by Greedy), Beam's, Blank's; not Unused's, not the first step


def test_a_branch_reaches_the_targets_whose_device_type_takes_it() -> None:
    source = """\
    import torch
    if device.type == "cuda":
        model.half()
    elif device.type == "mps":
        model.half()
    elif device.type in ("xla", "cpu"):
        model.half()
    else:
        model.half()
    """
    found = api.scan_source(dedent(source), config=Config(targets=("tpu", "xla", "hpu", "cpu", "mps", "rocm")))
    reached = {f.line: [target for target, _ in f.targets] for f in found if f.code == "PC308"}
    assert reached == {7: ["xla", "cpu"], 9: ["tpu", "hpu"]}


def test_a_loader_whose_iter_a_training_loop_draws_from_runs_every_step() -> None:
    (source,) = [each.code for each in BooleanMaskIndexing.INVALID if "class GpuLoader" in str(each.code)]  # airbench
    assert findings(source, "neuron")[(6, "PC502")][0] is Severity.ERROR
    alone = source.replace("for x in train:\n    model(x).sum().backward()\n", "")
    assert findings(alone, "tpu")[(6, "PC502")][0] is Severity.INFO  # nothing draws from it
    # the images are on the device, where Trainium's compiler takes no dynamic shape, however seldom
    assert findings(alone, "neuron")[(6, "PC502")][0] is Severity.WARNING


@pytest.mark.parametrize(("first", "found"), [("torch.zeros(3)", True), ("unknown(b)", False)])
def test_tensor_typing_follows_each_value_once_however_often_it_is_read(
    monkeypatch: pytest.MonkeyPatch, first: str, found: bool
) -> None:
    """Each read of `a1` leads to the same values: followed again per read, five lines that
    read the previous name six times ask 6**5 questions (12**8 took minutes on one file)."""
    asked: list[object] = []
    answer = shapes._tensor_valued
    monkeypatch.setattr(shapes, "_tensor_valued", lambda *question: asked.append(question) or answer(*question))
    sums = "".join(f"    a{i} = {' + '.join([f'a{i - 1}'] * 6)}\n" for i in range(1, 6))
    source = f"import torch\nfor b in loader:\n    a0 = {first}\n{sums}    if a5 > 0:\n        break\n"
    assert ((9, "PC504") in findings(source)) is found
    assert len(asked) < 300


def test_asking_whether_code_runs_in_a_data_worker_leaves_other_functions_names_resolved() -> None:
    """`in_data_worker` reads the whole module for transforms; doing so from one function must
    not fix what a name imported inside another function resolves to (consistency_models'
    `from flash_attn.flash_attention import FlashAttention` in `__init__`)."""
    source = (
        "import torch\nclass Attention(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
        "    def __init__(self):\n        from flash_attn.flash_attention import FlashAttention\n"
        "        self.inner = FlashAttention()\n"
    )
    module = cst.parse_module(source)
    resolver = Resolver(module)
    module_flow = DeviceFlow(resolver)
    resolved: dict[str, frozenset[str]] = {}

    class Probe:
        watched_names = ()

        def visit_Return(self, node: cst.Return) -> None:
            assert not module_flow.in_data_worker(walker.ancestors)

        def visit_Call(self, node: cst.Call) -> None:
            resolved[cst.Module([]).code_for_node(node.func)] = resolver.qualified_names(node.func)

    walker = Walker([module_flow, Probe()], resolver)
    module_flow.ancestors = walker.ancestors
    walker.walk(module)
    assert resolved["FlashAttention"] == {"flash_attn.flash_attention.FlashAttention"}


def test_what_a_check_for_non_finite_values_guards_runs_only_when_they_appear() -> None:
    """GroundingDINO's decoder: the check reads the tensor every layer (PC504), but what it
    guards (counting the NaNs with `.item()`) runs only once values have gone NaN or infinite."""
    source = """\
    import torch
    class Decoder(torch.nn.Module):
        def forward(self, output):
            for layer in self.layers:
                output = layer(output)
                if output.isnan().any() | output.isinf().any():
                    print(output.isnan().sum().item())
                if not torch.isfinite(output).all():
                    print(output.abs().max().item())
                print(output.mean().item())
            return output
    """
    found = findings(source)
    assert found[(6, "PC504")][0] is Severity.WARNING
    assert (7, "PC503") not in found and (9, "PC503") not in found
    assert found[(10, "PC503")][0] is Severity.WARNING


def test_judging_module_functions_for_extension_calls_leaves_their_names_resolved() -> None:
    """cpu-check-cuda-path (PC103) reads every module function for calls of a loaded
    extension before the walk enters them; the answer for a name a function imports itself
    must stay that function's (here `torch.cuda.synchronize`, reported by PC203)."""
    source = (
        "import torch\nfrom torch.utils.cpp_extension import load\nfused = load('fused', sources=['fused.cu'])\n"
        "def f(x):\n    import torch.cuda as fused\n    return fused.synchronize()\n"
    )
    assert findings(source)[(6, "PC203")][0] is Severity.ERROR


def test_float16_an_option_chooses_beside_bfloat16_is_info() -> None:
    """open_clip's precision choices: where the option offers bfloat16 too, the user picks it on
    a bfloat16 target (info); float16 against float32 is the port's to change (a warning)."""
    found = findings(
        """\
        import torch
        def load(model, precision):
            dtype = torch.float16 if 'fp16' in precision else torch.bfloat16
            model.to(dtype=dtype)
            input_dtype = torch.float16 if precision == 'fp16' else torch.float32
            model.to(dtype=input_dtype)
        """
    )
    assert found[(3, "PC308")][0] is Severity.INFO
    assert found[(5, "PC308")][0] is Severity.WARNING


def test_a_new_shape_every_n_steps_still_compiles_each_time_where_a_read_back_does_not() -> None:
    """gaussian-splatting densifies under `if iteration % interval == 0:`: reading a loss back
    every N steps is the remedy for a host sync, but a mask that resizes the parameters every
    N steps compiles a new graph each time, and every step after runs the new shapes."""
    source = """\
    import torch
    def train(model, opt, params, iterations):
        for iteration in range(iterations):
            loss = model(params).sum()
            loss.backward()
            opt.step()
            if iteration % 100 == 0:
                print(loss.item())
                params = params[params.grad.norm(dim=-1) > 0.5]
    """
    found = findings(source, "neuron")
    assert found[(9, "PC502")][0] is Severity.ERROR
    assert (8, "PC503") not in found


def test_what_a_framework_step_reaches_four_method_calls_down_runs_every_step() -> None:
    """mdlm: the SEDD loss sits four calls below Lightning's training_step."""
    source = """\
        import torch
        import lightning as L
        class Diffusion(L.LightningModule):
            def training_step(self, batch, batch_idx):
                return self._compute_loss(batch)
            def _compute_loss(self, batch):
                return self._loss(batch["input_ids"])
            def _loss(self, x0):
                return self._forward_pass(x0)
            def _forward_pass(self, x0):
                return self._score_entropy(self.q_xt(x0), x0)
            def _score_entropy(self, xt, x0):
                masked = xt == self.mask_index
                return x0[masked]
        """
    severity, _, message = findings(source, "neuron")[(14, "PC502")]
    assert severity == Severity.ERROR, message


def test_a_method_run_through_a_table_of_methods_runs_with_the_step_that_makes_the_table() -> None:
    """HRNet's OHEM loss: forward() lists its methods (`[self._ce_forward] * (n - 1) +
    [self._ohem_forward]`) and calls each; what they do runs every step. A debugging view runs
    only with `--debug`."""
    source = """\
    import torch
    class OhemCrossEntropy(torch.nn.Module):
        def _ohem_forward(self, score, target):
            mask = target.view(-1) != 255
            return score.view(-1)[mask].mean()
        def _unused(self, score, target):
            mask = target.view(-1) != 255
            return score.view(-1)[mask].mean()
        def forward(self, scores, target):
            functions = [self._ohem_forward] * len(scores)
            return sum(func(x, target) for x, func in zip(scores, functions))
    def run_epoch(model, loader, opt, optimizer):
        for iter_id, batch in enumerate(loader):
            output = model(batch["input"].cuda())
            output.sum().backward()
            optimizer.step()
            if opt.debug > 0:
                print(output[output > 0].tolist())
    """
    found = findings(source)
    assert found[(5, "PC502")][0] is Severity.WARNING
    assert found[(8, "PC502")][0] is Severity.INFO
    assert (18, "PC503") not in found


def test_what_runs_once_the_loop_ends_is_off_the_step_path() -> None:
    """lit-llama's generate: `return idx[:input_pos]` under the end-of-sequence test runs once,
    after the last step (the test itself is read back every step). A `break` out of an inner
    loop, or a `return` from a helper called every step, ends no step loop."""
    found = findings(
        """\
        import torch
        def generate(model, idx, n, eos_id):
            input_pos = torch.arange(0, 4)
            for _ in range(n):
                idx_next = torch.multinomial(model(idx).softmax(-1), 1)
                input_pos = input_pos[-1:] + 1
                if idx_next == eos_id:
                    return idx[:input_pos]
                for k in range(3):
                    if idx_next == k:
                        print(idx[:input_pos])
                        break
            return idx
        """
    )
    severities = {line: found[(line, code)][0] for line, code in found if code in ("PC504", "PC505")}
    assert severities == {7: Severity.WARNING, 8: Severity.INFO, 10: Severity.WARNING, 11: Severity.WARNING}
    found = findings(
        """\
        import torch
        def head(seq):
            for row in seq:
                n = row.sum()
                if n > 0:
                    return row[:n]
            return seq
        for batch in loader:
            loss = head(batch.cuda()).sum()
            loss.backward()
        """
    )
    assert found[(6, "PC505")][0] is Severity.WARNING


def test_a_host_copy_given_back_to_torch_is_no_output_of_forward() -> None:
    """Tacotron 2's encoder reads its lengths back for `pack_padded_sequence`: a sync in the
    step, not the model's output leaving torch (as `.numpy()` in forward() alone would be)."""
    source = """\
        import torch
        from torch import nn
        class Encoder(nn.Module):
            def forward(self, x, input_lengths):
                input_lengths = input_lengths.cpu().numpy()
                x = nn.utils.rnn.pack_padded_sequence(x, input_lengths, batch_first=True)
                return self.lstm(x)
        class Head(nn.Module):
            def forward(self, x):
                scores = x.cpu().numpy()
                return scores
        """
    found = findings(source)
    assert found[(5, "PC503")][0] is Severity.WARNING
    assert found[(10, "PC503")][0] is Severity.INFO


def test_a_method_called_on_another_object_is_no_call_of_the_class_own() -> None:
    """RWKV's `wkv_cuda.forward(B, T, C, w, y)` inside `WKV.forward`: a method of the same name
    on an extension module passes nothing for the autograd Function's parameters."""
    source = (
        "import torch\nclass WKV(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, B, T, C, w):\n        y = torch.empty((B, T, C), device=w.device)\n"
        "        wkv_cuda.forward(B, T, C, w, y)\n        return y\n"
        "class Mix(torch.nn.Module):\n    def forward(self, x):\n        return self.inner.forward(x)\n"
        "    def run(self, x):\n        return self.forward(x)\n"
    )
    module = cst.parse_module(source)
    resolver = Resolver(module)
    module_flow = DeviceFlow(resolver)
    walker = Walker([module_flow], resolver)
    module_flow.ancestors = walker.ancestors
    walker.walk(module)
    wkv, mix = (node for node in module.body if type(node) is cst.ClassDef)
    function = wkv.body.body[0]
    assert module_flow.passed_arguments(function, "B") == []
    mix_forward = mix.body.body[0]
    passed = module_flow.passed_arguments(mix_forward, "x")
    assert passed is not None and [cst.Module([]).code_for_node(arg) for arg, _ in passed] == ["x"]


def test_a_self_call_runs_what_the_class_of_the_instance_defines() -> None:
    """generative-models' samplers: a base's loop calls `self.sampler_step()`, which the base only
    declares (`raise NotImplementedError`) and each subclass defines; a quantizer subclass's
    `forward()` calls its base's `self.remap_to_used()`. Both run every step."""
    source = """\
    import torch
    class Sampler:
        def sampler_step(self, sigma, denoiser, x):
            raise NotImplementedError
        def __call__(self, denoiser, x, sigmas):
            for i in range(len(sigmas) - 1):
                x = self.sampler_step(sigmas[i], denoiser, x)
            return x
    class Ancestral(Sampler):
        def sampler_step(self, sigma, denoiser, x):
            x = denoiser(x, sigma)
            if torch.sum(sigma) < 1e-14:
                return x
            return x + sigma
    class Quantizer(torch.nn.Module):
        def remap(self, inds):
            unknown = inds.sum(1) < 1
            inds[unknown] = 0
            return inds
    class Gumbel(Quantizer):
        def forward(self, z):
            return self.remap(z.argmax(1))
    class Other(torch.nn.Module):
        def remap(self, inds):
            unknown = inds.sum(1) < 1
            inds[unknown] = 0
            return inds
    """
    found = findings(source)
    assert found[(12, "PC504")][0] is Severity.WARNING, found
    assert found[(18, "PC502")][0] is Severity.WARNING
    assert found[(26, "PC502")][0] is Severity.INFO  # nothing that runs every step calls it


def test_an_object_annotated_with_a_base_class_may_be_any_of_its_subclasses() -> None:
    """OLMo's beam search: `self.sampler = sampler or DeterministicSampler()` with `sampler:
    Optional[Sampler]`; the decoding loop's `self.sampler.sample_nodes(...)` may run top-p's."""
    source = """\
    from typing import Optional
    import torch
    class Sampler:
        def sample_nodes(self, log_probs):
            raise NotImplementedError
    class Greedy(Sampler):
        def sample_nodes(self, log_probs):
            return log_probs.topk(1)
    class TopP(Sampler):
        def sample_nodes(self, log_probs):
            excluded = log_probs.exp().cumsum(-1) >= 0.9
            log_probs[excluded] = -1e9
            return torch.multinomial(log_probs.softmax(-1), 1)
    class Unrelated:
        def sample_nodes(self, log_probs):
            excluded = log_probs.exp().cumsum(-1) >= 0.9
            log_probs[excluded] = -1e9
            return log_probs
    class BeamSearch:
        def __init__(self, step, sampler: Optional[Sampler] = None):
            self.step = step
            self.sampler = sampler or Greedy()
        def search(self, state, steps):
            for _ in range(steps):
                log_probs = self.step(state)
                state = self.sampler.sample_nodes(log_probs)
            return state
    """
    found = findings(source)
    assert found[(12, "PC502")][0] is Severity.WARNING, found
    assert found[(17, "PC502")][0] is Severity.INFO  # no sampler: nothing that runs every step calls it
