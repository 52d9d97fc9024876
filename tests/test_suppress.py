"""`# portcheck: ignore[...]` comments: which findings they hide, narrow or leave alone."""

from __future__ import annotations

from portcheck.api import scan_source
from portcheck.config import Config
from portcheck.suppress import parse

TWO_TARGETS = Config(targets=("tpu", "cpu"))


def codes(source: str, config: Config = TWO_TARGETS) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in scan_source(source, config=config)]


def test_same_line_suppression_hides_only_that_rule() -> None:
    source = "import torch\nx = torch.ones(1).cuda().double()  # portcheck: ignore[PC102]\n"
    assert codes(source) == [(2, "PC307")]


def test_own_line_comment_covers_the_next_line_only() -> None:
    source = "import torch\n# portcheck: ignore[PC203]\ntorch.cuda.synchronize()\ntorch.cuda.synchronize()\n"
    assert codes(source) == [(4, "PC203")]


def test_prefixes_and_lists() -> None:
    source = "import torch\ntorch.cuda.synchronize(); x.cuda()  # portcheck: ignore[PC2, PC102]\n"
    assert codes(source) == []


def test_file_level_suppression() -> None:
    source = "# portcheck: ignore-file[PC2]\nimport torch\ntorch.cuda.synchronize()\nx.cuda()\n"
    assert codes(source) == [(4, "PC102")]


def test_target_scoped_suppression_narrows_the_finding() -> None:
    source = "import torch\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=[0])  # portcheck: ignore[PC403@cpu]\n"
    (finding,) = scan_source(source, config=TWO_TARGETS)
    assert finding.target_names == ("tpu",) and finding.severity.label == "warning"
    all_gone = source.replace("PC403@cpu", "PC403@cpu, PC403@tpu")
    assert codes(all_gone) == []


def test_unused_entries_are_reported_but_not_for_rules_or_targets_out_of_the_run() -> None:
    source = "x = 1  # portcheck: ignore[PC102, PC203@tpu]\n"
    assert codes(source) == [(1, "PC004"), (1, "PC004")]
    assert codes(source, Config(targets=("cpu",))) == [(1, "PC004")]  # PC203@tpu: tpu is not checked
    assert codes(source, Config().with_overrides(select=["PC004"])) == []  # neither rule is enabled


def test_directives_inside_strings_are_not_directives() -> None:
    assert parse('s = "# portcheck: ignore[PC102]"\n') == []
    assert codes('import torch\ns = "# portcheck: ignore[PC102]"; x.cuda()\n') == [(2, "PC102")]


def test_case_and_spacing_are_forgiving() -> None:
    source = "import torch\nx.cuda()  #portcheck:ignore[ pc102 ]\n"
    assert codes(source) == []


def test_suppressions_apply_to_tool_findings_too() -> None:
    source = "# portcheck: ignore-file[PC001]\nimport torch\ndef f(:\n    torch.cuda.synchronize()\n"
    assert codes(source) == []
