"""Suppression comments (`# portcheck: ignore[...]`, bare, file-wide, and `# noqa: PC...`):
which findings they hide, narrow or leave alone, and which lines they cover."""

from __future__ import annotations

from pathlib import Path

from portcheck.api import scan_paths, scan_source
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


# --- bare directives -------------------------------------------------------------------------


def test_a_bare_ignore_suppresses_every_rule_on_its_line() -> None:
    source = "import torch\nx = torch.ones(1).cuda().double()  # portcheck: ignore\ny = x.cuda()\n"
    assert codes(source) == [(3, "PC102")]


def test_a_bare_ignore_on_its_own_line_covers_the_next_statement() -> None:
    source = "import torch\n# portcheck: ignore\nx = torch.ones(1).cuda().double()\ny = x.cuda()\n"
    assert codes(source) == [(4, "PC102")]


def test_an_unused_bare_ignore_is_reported() -> None:
    [finding] = scan_source("import torch\nx = 1  # portcheck: ignore\n", config=TWO_TARGETS)
    assert (finding.line, finding.code) == (2, "PC004")
    assert "`# portcheck: ignore` suppresses nothing here" in finding.message


def test_a_bare_ignore_file_suppresses_the_whole_file() -> None:
    assert codes("# portcheck: ignore-file\nimport torch\ntorch.cuda.synchronize()\nx.cuda()\n") == []
    assert codes("# portcheck: ignore-file\nimport os\n") == [(1, "PC004")]


def test_a_bare_ignore_covers_findings_only_the_whole_project_reveals() -> None:
    # PC605 comes from the second pass (the registration could be in another file): the first
    # pass's "suppresses nothing" is withdrawn once the second pass uses the comment.
    source = (
        "import torch\nlib = torch.library.Library('mylib', 'IMPL')\nlib.impl('g', g_cuda, 'CUDA')\n"
        "y = torch.ops.mylib.g(x)  # portcheck: ignore\n"
    )
    assert codes(source) == [(3, "PC604")]  # the registration, on a line of its own


def test_the_withdrawal_survives_the_cache(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(
        "import torch\nlib = torch.library.Library('mylib', 'IMPL')\nlib.impl('g', g_cuda, 'CUDA')\n"
    )
    (tmp_path / "use.py").write_text("import torch\ny = torch.ops.mylib.g(x)  # portcheck: ignore\n")
    for _ in range(2):  # cold, then from the cache
        report = scan_paths([tmp_path], Config(root=tmp_path), jobs=1, cache=tmp_path / ".cache")
        assert [(f.path, f.code) for f in report.findings] == [("ops.py", "PC604")]


def test_words_after_the_marker_are_not_a_bare_directive() -> None:
    source = "import torch\nx.cuda()  # portcheck: ignored here on purpose\n"
    assert codes(source) == [(2, "PC102")]
    assert codes("import torch\nx.cuda()  # portcheck: ignore [PC102]\n") == []  # a space before the list


def test_an_entry_needed_on_a_target_not_selected_is_not_reported() -> None:
    source = "import torch\nx = torch.ones(1).double()  # portcheck: ignore[PC307]\n"
    assert codes(source, Config(targets=("cpu",))) == []  # float64 is fine on the CPU, not on tpu
    assert codes(source.replace("[PC307]", ""), Config(targets=("cpu",))) == []


# --- noqa ------------------------------------------------------------------------------------


def test_noqa_with_portcheck_codes_suppresses_them() -> None:
    source = "import torch\nx = torch.ones(1).cuda().double()  # noqa: PC102, E501\n"
    assert codes(source) == [(2, "PC307")]
    assert codes("import torch\nx.cuda()  #NOQA:PC102\n") == []
    assert codes("import torch\nx.cuda()  # noqa: E501 PC102 some explanation\n") == []


def test_a_bare_noqa_or_one_for_other_tools_hides_no_portability_finding_and_is_not_reported() -> None:
    assert codes("import torch\nx.cuda()  # noqa\n") == [(2, "PC102")]
    assert codes("import torch\nx.cuda()  # noqa: E501\n") == [(2, "PC102")]


def test_an_unused_noqa_code_is_reported() -> None:
    [finding] = scan_source("import torch\nx = 1  # noqa: E501, PC102\n", config=TWO_TARGETS)
    assert (finding.line, finding.code) == (2, "PC004")
    assert "`PC102` suppresses nothing here" in finding.message


def test_a_noqa_on_its_own_line_covers_only_that_line() -> None:
    source = "import torch\n# noqa: PC203\ntorch.cuda.synchronize()\n"
    assert codes(source) == [(2, "PC004"), (3, "PC203")]


def test_both_kinds_in_one_comment() -> None:
    source = "import torch\nx = torch.ones(1).cuda().double()  # noqa: PC102  # portcheck: ignore[PC307]\n"
    assert codes(source) == []


# --- multi-line statements -------------------------------------------------------------------

SUMMARY = "import torch\ns = torch.cuda.memory_summary(\n    device,\n    abbreviated=True,\n)\n"  # PC204 on line 2


def test_an_own_line_comment_covers_every_line_of_the_next_statement() -> None:
    assert codes(SUMMARY) == [(2, "PC204")]
    assert codes(SUMMARY.replace("s = ", "# portcheck: ignore[PC204]\ns = ")) == []
    later = 'import torch\n# portcheck: ignore[PC101]\nx = torch.zeros(\n    3, device="cuda",\n)\n'
    assert codes(later) == [], "a finding on a later line of the statement"
    inside = SUMMARY.replace("    abbreviated", "    # portcheck: ignore[PC204]\n    abbreviated")
    assert codes(inside) == [(2, "PC204"), (4, "PC004")], "inside a statement: the next line only"


def test_stacked_comments_cover_the_statement_after_them_but_a_blank_line_ends_them() -> None:
    stacked = "import torch\n# portcheck: ignore[PC203]\n# we really mean it\ntorch.cuda.synchronize()\n"
    assert codes(stacked) == []
    apart = "import torch\n# portcheck: ignore[PC203]\n\ntorch.cuda.synchronize()\n"
    assert codes(apart) == [(2, "PC004"), (4, "PC203")]


def test_a_comment_ending_a_multi_line_statement_covers_only_its_line_and_says_where_to_go() -> None:
    source = SUMMARY.replace("\n)\n", "\n)  # portcheck: ignore[PC204]\n")
    findings = scan_source(source, config=TWO_TARGETS)
    assert [(f.line, f.code) for f in findings] == [(2, "PC204"), (5, "PC004")]
    assert "starts on line 2" in findings[1].message and "above the statement" in findings[1].message


def test_a_comment_ending_a_backslash_continuation_covers_the_continued_lines() -> None:
    source = "import torch\ntorch.cuda.synchronize(\\\n)  # portcheck: ignore[PC203]\n"
    assert codes(source) == []
    assert codes(source.replace("# portcheck: ignore[PC203]", "# noqa: PC203")) == []


def test_a_comment_after_a_multi_line_string_covers_the_lines_of_the_string() -> None:
    source = 'import torch\ntorch.cuda.synchronize("""\n""")  # portcheck: ignore[PC203]\n'
    assert codes(source.replace("  # portcheck: ignore[PC203]", "")) == [(2, "PC203")]
    assert codes(source) == []
