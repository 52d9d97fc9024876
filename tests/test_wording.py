"""The shared pieces of English in messages (portcheck.wording), and the messages that use them:
verbs that agree with how many targets they name, counted nouns, a message and its help joined
as two sentences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from portcheck import api
from portcheck.cli import app
from portcheck.config import Config
from portcheck.wording import counted, sentences, verb


def test_the_verb_agrees_with_how_many_targets_there_are() -> None:
    assert verb(["tpu"], "emulates", "emulate") == "emulates"
    assert verb(["tpu", "neuron"], "emulates", "emulate") == "emulate"
    assert verb([], "lacks", "lack") == "lack"  # "the selected targets"


@pytest.mark.parametrize(("count", "text"), [(0, "0 lines"), (1, "1 line"), (2, "2 lines")])
def test_counted_nouns(count: int, text: str) -> None:
    assert counted(count, "line") == text


def test_counted_nouns_with_an_irregular_plural() -> None:
    assert counted(3, "kernel of its own", "kernels of their own") == "3 kernels of their own"


@pytest.mark.parametrize(
    ("first", "second", "joined"),
    [
        (
            "`.is_cuda` is False elsewhere",
            "compare the device type",
            "`.is_cuda` is False elsewhere. Compare the device type",
        ),
        ("it raises.", "`x.to(d)` instead", "it raises. `x.to(d)` instead"),
        ("no help", "", "no help"),
    ],
)
def test_two_texts_become_two_sentences(first: str, second: str, joined: str) -> None:
    assert sentences(first, second) == joined


# --------------------------------------------------------------------------- in the messages


FLOAT64 = "import torch\nx = torch.zeros(2, dtype=torch.float64)\n"
HALF = 'import torch as T\np = StableDiffusionPipeline.from_single_file("x.ckpt", dtype=T.half)\n'


@pytest.mark.parametrize(
    ("source", "targets", "phrase"),
    [
        (FLOAT64, ("tpu",), "which tpu emulates slowly"),
        (FLOAT64, ("tpu", "neuron"), "which tpu/neuron emulate slowly"),
        (HALF, ("tpu",), "but tpu computes natively"),
        (HALF, ("tpu", "neuron"), "but tpu/neuron compute natively"),
        ('import torch\nm = torch.compile(m, backend="cudagraphs")\n', ("cpu",), "which cpu does not have"),
        (
            'from transformers import AutoModel\nm = AutoModel.from_pretrained("x", device_map=0)\n',
            ("cpu",),
            "which cpu lacks",
        ),
    ],
)
def test_verbs_agree_with_how_many_targets_a_message_names(source: str, targets: tuple[str, ...], phrase: str) -> None:
    messages = [f.message for f in api.scan_source(source, config=Config(targets=targets))]
    assert any(phrase in message for message in messages), messages


def test_a_sarif_message_joins_the_message_and_its_help_as_two_sentences(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.py").write_text("def f(x):\n    return x.is_cuda\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["scan", "w.py", "-f", "sarif", "--no-cache"])
    (text,) = [r["message"]["text"] for r in json.loads(result.stdout)["runs"][0]["results"]]
    assert "on every other device. Compare the device type instead" in text


def test_counts_in_messages_agree_with_their_nouns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cuh").write_text("__device__ inline float sq(float v) { return v * v; }\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["scan", "k.cuh", "-f", "concise", "--no-cache"])
    assert "CUDA C++ source of 1 line of code with 0 __global__ kernels" in result.stdout
