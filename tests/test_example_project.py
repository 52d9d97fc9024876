"""The bundled example project produces exactly the findings a reviewer signed off."""

from __future__ import annotations

from pathlib import Path

from portcheck.api import scan_paths
from portcheck.config import Config

ROOT = Path(__file__).resolve().parent.parent

EXPECTED = [
    ("examples/cuda_app/model.py", 11, "PC103"),  # if x.is_cuda:
    ("examples/cuda_app/model.py", 18, "PC104"),  # torch.load(path, map_location="cuda:0")
    ("examples/cuda_app/train.py", 10, "PC301"),  # from torch.cuda.amp import GradScaler, autocast
    ("examples/cuda_app/train.py", 19, "PC101"),  # add_argument("--device", default="cuda")
    ("examples/cuda_app/train.py", 27, "PC404"),  # os.environ["CUDA_VISIBLE_DEVICES"] = ...
    ("examples/cuda_app/train.py", 28, "PC401"),  # init_process_group(backend="nccl")
    ("examples/cuda_app/train.py", 29, "PC202"),  # torch.cuda.set_device(...)
    ("examples/cuda_app/train.py", 37, "PC306"),  # torch.backends.cudnn.benchmark = True
    ("examples/cuda_app/train.py", 38, "PC305"),  # torch.backends.cuda.matmul.allow_tf32 = True
    ("examples/cuda_app/train.py", 40, "PC102"),  # TinyNet().cuda()
    ("examples/cuda_app/train.py", 42, "PC403"),  # DistributedDataParallel(model, device_ids=[rank])
    ("examples/cuda_app/train.py", 44, "PC301"),  # GradScaler() from torch.cuda.amp
    ("examples/cuda_app/train.py", 44, "PC304"),  # ... on bfloat16-native targets
    ("examples/cuda_app/train.py", 50, "PC102"),  # y.cuda(non_blocking=True)
    ("examples/cuda_app/train.py", 51, "PC301"),  # with autocast(): from torch.cuda.amp
    ("examples/cuda_app/train.py", 54, "PC304"),  # scaler.scale(loss).backward(): the scaler's steps go with it
    ("examples/cuda_app/train.py", 55, "PC304"),  # scaler.step(optimizer)
    ("examples/cuda_app/train.py", 56, "PC304"),  # scaler.update()
    ("examples/cuda_app/train.py", 57, "PC203"),  # torch.cuda.synchronize()
    ("examples/cuda_app/utils.py", 9, "PC205"),  # torch.cuda.manual_seed_all(seed)
    ("examples/cuda_app/utils.py", 13, "PC201"),  # torch.cuda.is_available()
    ("examples/cuda_app/utils.py", 14, "PC204"),  # torch.cuda.max_memory_allocated()
    ("examples/cuda_app/utils.py", 15, "PC206"),  # torch.cuda.get_device_name()
    ("examples/cuda_app/utils.py", 16, "PC204"),  # torch.cuda.empty_cache()
]


def test_example_project_findings_are_exactly_the_expected_ones() -> None:
    report = scan_paths([ROOT / "examples" / "cuda_app"], Config(root=ROOT), jobs=1)
    assert [(f.path, f.line, f.code) for f in report.findings] == EXPECTED
    assert (report.files, report.errors) == (4, ())


def test_example_project_is_clean_for_rocm_where_hip_answers_every_cuda_spelling_it_uses() -> None:
    report = scan_paths([ROOT / "examples" / "cuda_app"], Config(root=ROOT, targets=("rocm",)), jobs=1)
    assert {f.code for f in report.findings} == set()
