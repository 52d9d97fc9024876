"""Every `portcheck scan --format` on one small tree with findings of every severity:
text, concise, json, github and sarif (validated against the OASIS SARIF 2.1.0 schema)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlsplit

import jsonschema
import pytest
from click.testing import CliRunner

from portcheck.cli import app

APP_SOURCE = """\
import torch


def step(model, x):
    x = x.cuda()
    torch.cuda.synchronize()
    if x.is_cuda:
        torch.backends.cudnn.benchmark = True
    return model(x)
"""

UTIL_SOURCE = """\
import torch

torch.cuda.set_device(0)
y = torch.zeros(3, dtype=torch.float64)
"""

# (path, line, column, code, severity) of every finding in the tree, in report order.
EXPECTED = [
    ("src/app.py", 5, 9, "PC102", "error"),
    ("src/app.py", 6, 5, "PC203", "error"),
    ("src/app.py", 7, 8, "PC103", "warning"),
    ("src/app.py", 8, 9, "PC306", "info"),
    ("src/util.py", 3, 1, "PC202", "error"),
    ("src/util.py", 4, 26, "PC307", "error"),  # error on mps, warning elsewhere
]

ANSI = re.compile(r"\x1b\[")
SEVERITY_ORDER = {"info": 1, "warning": 2, "error": 3}


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A two-file project in tmp_path, which is also the current directory (and so the root)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(APP_SOURCE, encoding="utf-8")
    (tmp_path / "src" / "util.py").write_text(UTIL_SOURCE, encoding="utf-8")
    (tmp_path / "src" / "clean.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return tmp_path


def run(output_format: str, *args: str, expect: int = 1) -> str:
    result = CliRunner().invoke(app, ["scan", "src", "--format", output_format, *args])
    assert result.exit_code == expect, result.output
    return result.stdout


def findings_json(*args: str) -> list[dict]:
    return json.loads(run("json", *args))["findings"]


# --------------------------------------------------------------------------- text


def test_text_shows_each_finding_with_location_code_and_message(tree: Path) -> None:
    out = run("text")
    for path, line, column, code, _ in EXPECTED:
        assert f"{path}:{line}:{column}: {code} " in out
    assert "src/app.py:6:5: PC203 error `torch.cuda.synchronize` is CUDA-only" in out
    assert "src/util.py:4:26: PC307 error[mps] warning[tpu,neuron,xla,xpu,npu,hpu]" in out


def test_text_shows_the_source_line_with_a_caret_marker_under_the_finding(tree: Path) -> None:
    lines = run("text").splitlines()
    index = lines.index("6 |     torch.cuda.synchronize()")
    assert lines[index - 1] == "  |"
    assert lines[index + 1] == "  |     " + "^" * len("torch.cuda.synchronize")
    assert lines[index + 2].startswith("  = help: ")
    assert "torch.accelerator.synchronize()" in lines[index + 2]

    marker = lines[lines.index("4 | y = torch.zeros(3, dtype=torch.float64)") + 1]
    assert marker == "  | " + " " * 25 + "^" * len("torch.float64")


def test_text_has_a_help_line_for_every_finding_with_a_hint(tree: Path) -> None:
    out = run("text")
    hints = [f["hint"] for f in findings_json() if f["hint"]]
    assert out.count("= help: ") == len(hints) > 0


def test_text_ends_with_the_summary_tables(tree: Path) -> None:
    out = run("text")
    # Errors per target, not one total: PC307 is an error on mps only.
    assert "Found 6 findings in 2 of 3 files (errors: tpu 3, neuron 3, xla 3, mps 4, " in out
    by_rule = out.index("By rule")
    by_target = out.index("By target")
    assert out.rindex("= help: ") < by_rule < by_target
    rule_table = out[by_rule:by_target]
    for _, _, _, code, _ in EXPECTED:
        assert code in rule_table
    assert "cuda-synchronize" in rule_table
    target_rows = {
        line.split()[0]: line for line in out[by_target:].splitlines()[1:] if line.split() and line.split()[0].isalpha()
    }
    for target in ("tpu", "neuron", "xla", "mps", "xpu", "npu", "hpu", "cpu"):
        assert target in target_rows, out[by_target:]
    assert "rocm" not in target_rows


def test_text_target_table_counts_match_the_findings(tree: Path) -> None:
    out = run("text")
    table = out[out.index("By target") :]
    rows = {}
    for line in table.splitlines():
        cells = [cell for cell in re.split(r"[\s\u2502\u2503]+", line) if cell]
        if len(cells) == 4 and cells[1].isdigit():
            rows[cells[0]] = tuple(int(c) for c in cells[1:])
    assert rows["mps"] == (4, 1, 1)  # float64 is an error on mps...
    assert rows["tpu"] == (3, 2, 1)  # ...and a warning on tpu
    expected_tpu = Counter(f["targets"]["tpu"] for f in findings_json() if "tpu" in f["targets"])
    assert rows["tpu"] == (expected_tpu["error"], expected_tpu["warning"], expected_tpu["info"])


def test_text_has_no_ansi_escape_codes_when_not_a_tty(tree: Path) -> None:
    out = run("text")
    assert not ANSI.search(out), repr(out[:300])
    assert "\x1b" not in out


def test_text_for_a_clean_tree_says_no_findings(tree: Path) -> None:
    out = CliRunner().invoke(app, ["scan", "src/clean.py"]).stdout
    assert out.startswith("No findings in 1 file")


# --------------------------------------------------------------------------- concise


def test_concise_prints_one_line_per_finding_and_a_count(tree: Path) -> None:
    lines = run("concise").splitlines()
    assert len(lines) == len(EXPECTED) + 1
    for line, (path, row, column, code, severity) in zip(lines, EXPECTED):
        assert line.startswith(f"{path}:{row}:{column}: {code} {severity}"), line
    assert lines[-1] == "Found 6 findings."


def test_concise_lines_match_the_pattern_editors_parse(tree: Path) -> None:
    pattern = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>PC\d{3}) \S+ .+$")
    lines = run("concise").splitlines()[:-1]
    matches = [pattern.match(line) for line in lines]
    assert all(matches), lines
    messages = [f["message"] for f in findings_json()]
    assert [line.endswith(message) for line, message in zip(lines, messages)] == [True] * len(messages)


def test_concise_count_line_is_singular_for_one_finding(tree: Path) -> None:
    out = run("concise", "--select", "PC203")
    assert out.splitlines() == [
        "src/app.py:6:5: PC203 error `torch.cuda.synchronize` is CUDA-only: without CUDA it raises "
        "AssertionError: Torch not compiled with CUDA enabled",
        "Found 1 finding.",
    ]


# --------------------------------------------------------------------------- json

FINDING_KEYS = {
    "code", "name", "message", "hint", "severity", "targets", "path", "line", "column",
    "end_line", "end_column", "fix", "fingerprint",
}  # fmt: skip


def test_json_document_has_schema_version_tool_and_selection(tree: Path) -> None:
    document = json.loads(run("json"))
    assert document["schema_version"] == 1
    assert document["tool"]["name"] == "portcheck"
    assert isinstance(document["tool"]["version"], str)
    assert document["targets"] == ["tpu", "neuron", "xla", "mps", "xpu", "npu", "hpu", "cpu"]
    assert "PC203" in document["rules"]
    assert document["errors"] == []


def test_json_findings_have_every_field(tree: Path) -> None:
    findings = findings_json()
    assert [(f["path"], f["line"], f["column"], f["code"], f["severity"]) for f in findings] == EXPECTED
    for f in findings:
        assert FINDING_KEYS <= set(f), FINDING_KEYS - set(f)
        assert re.fullmatch(r"PC\d{3}", f["code"])
        assert isinstance(f["name"], str) and f["name"]
        assert isinstance(f["message"], str) and f["message"]
        assert isinstance(f["hint"], str)
        assert all(isinstance(f[k], int) and f[k] >= 1 for k in ("line", "column", "end_line", "end_column"))
        assert (f["end_line"], f["end_column"]) > (f["line"], f["column"])
        assert set(f["fix"]) == {"available", "safety"}
        assert isinstance(f["fix"]["available"], bool)
        assert f["fix"]["safety"] in {"none", "safe", "unsafe"}
        assert f["fix"]["available"] == (f["fix"]["safety"] != "none")
        assert re.fullmatch(r"[0-9a-f]{16,}", f["fingerprint"])
    assert len({f["fingerprint"] for f in findings}) == len(findings)


def test_json_targets_mapping_gives_a_severity_per_target_and_the_worst_is_the_severity(tree: Path) -> None:
    document = json.loads(run("json"))
    for f in document["findings"]:
        assert f["targets"], f
        assert set(f["targets"]) <= set(document["targets"])
        assert set(f["targets"].values()) <= set(SEVERITY_ORDER)
        assert f["severity"] == max(f["targets"].values(), key=SEVERITY_ORDER.__getitem__)
    float64 = next(f for f in document["findings"] if f["code"] == "PC307")
    assert float64["targets"]["mps"] == "error"
    assert float64["targets"]["tpu"] == "warning"
    assert "cpu" not in float64["targets"]


def test_json_end_positions_span_the_flagged_text(tree: Path) -> None:
    sync = next(f for f in findings_json() if f["code"] == "PC203")
    line = APP_SOURCE.splitlines()[sync["line"] - 1]
    assert line[sync["column"] - 1 : sync["end_column"] - 1] == "torch.cuda.synchronize"


def test_json_summary_counts_are_consistent_with_the_findings(tree: Path) -> None:
    document = json.loads(run("json"))
    findings, summary = document["findings"], document["summary"]
    assert summary["findings"] == len(findings) == 6
    assert summary["files"] == 3
    assert summary["baselined"] == 0
    assert summary["by_severity"] == dict(Counter(f["severity"] for f in findings))
    assert sum(summary["by_severity"].values()) == len(findings)
    assert summary["by_rule"] == dict(Counter(f["code"] for f in findings))
    by_target: dict[str, Counter] = {}
    for f in findings:
        for target, level in f["targets"].items():
            by_target.setdefault(target, Counter())[level] += 1
    assert summary["by_target"] == {target: dict(counts) for target, counts in by_target.items()}


# --------------------------------------------------------------------------- github

GITHUB_LINE = re.compile(r"^::(?P<command>error|warning|notice) (?P<properties>[^:]*)::(?P<data>.*)$")


def parse_github(out: str) -> list[tuple[str, dict[str, str], str]]:
    parsed = []
    for line in out.splitlines():
        match = GITHUB_LINE.match(line)
        assert match, f"not a workflow command: {line!r}"
        properties = dict(item.split("=", 1) for item in match["properties"].split(","))
        parsed.append((match["command"], properties, match["data"]))
    return parsed


def unescape_property(value: str) -> str:
    return value.replace("%2C", ",").replace("%3A", ":").replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")


def test_github_emits_one_annotation_per_finding_with_the_right_command(tree: Path) -> None:
    out = run("github")
    annotations = parse_github(out)
    assert [command for command, _, _ in annotations] == ["error", "error", "warning", "notice", "error", "error"]
    for line in out.splitlines():
        assert line.startswith(("::error ", "::warning ", "::notice "))


def test_github_properties_locate_the_finding(tree: Path) -> None:
    annotations = parse_github(run("github"))
    for (_, properties, _), f in zip(annotations, findings_json()):
        assert set(properties) >= {"file", "line", "col", "endLine", "endColumn", "title"}
        assert properties["file"] == f["path"]
        assert (properties["line"], properties["col"]) == (str(f["line"]), str(f["column"]))
        assert (properties["endLine"], properties["endColumn"]) == (str(f["end_line"]), str(f["end_column"]))
        assert f["code"] in unescape_property(properties["title"])


def test_github_escapes_comma_and_colon_in_property_values(tree: Path) -> None:
    odd = tree / "src" / "odd:name,v2.py"
    odd.write_text("import torch\ntorch.cuda.synchronize()\n", encoding="utf-8")
    out = run("github", "--select", "PC203")
    line = next(line for line in out.splitlines() if "odd" in line)
    assert "file=src/odd%3Aname%2Cv2.py," in line
    assert "odd:name" not in line and "name,v2" not in line
    _, properties, _ = parse_github(line)[0]
    assert unescape_property(properties["file"]) == "src/odd:name,v2.py"


def test_github_data_escapes_newlines_and_keeps_colons(tree: Path) -> None:
    out = run("github")
    assert len(out.splitlines()) == 6  # no raw newline inside any annotation
    _, _, data = parse_github(out)[1]
    message, hint = data.split("%0A", 1)
    assert message.startswith("`torch.cuda.synchronize` is CUDA-only: without CUDA it raises")
    assert message.endswith("[error]")
    assert hint.startswith("instead: ")
    assert "%3A" not in data  # only property values escape ':'


# --------------------------------------------------------------------------- sarif


def sarif_run(*args: str, expect: int = 1) -> dict:
    document = json.loads(run("sarif", *args, expect=expect))
    assert len(document["runs"]) == 1
    return document


def test_sarif_validates_against_the_sarif_2_1_0_schema(
    tree: Path, sarif_validator: jsonschema.Draft7Validator
) -> None:
    document = sarif_run()
    errors = sorted(sarif_validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])


def test_sarif_for_a_clean_tree_validates_too(tree: Path, sarif_validator: jsonschema.Draft7Validator) -> None:
    result = CliRunner().invoke(app, ["scan", "src/clean.py", "--format", "sarif"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["runs"][0]["results"] == []
    errors = list(sarif_validator.iter_errors(document))
    assert not errors, [e.message for e in errors[:5]]


def test_sarif_validation_is_not_vacuous(tree: Path, sarif_validator: jsonschema.Draft7Validator) -> None:
    """The validator must reject broken logs, or the validation tests above prove nothing."""
    assert list(sarif_validator.iter_errors({}))
    document = sarif_run()
    del document["version"]
    assert list(sarif_validator.iter_errors(document))
    document = sarif_run()
    document["runs"][0]["results"][0]["level"] = "fatal"
    assert list(sarif_validator.iter_errors(document))
    document = sarif_run()
    document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert list(sarif_validator.iter_errors(document))


def test_sarif_version_and_schema(tree: Path) -> None:
    document = sarif_run()
    assert document["version"] == "2.1.0"
    assert "sarif" in document["$schema"] and "2.1.0" in document["$schema"]
    driver = document["runs"][0]["tool"]["driver"]
    assert driver["name"] == "portcheck"


def test_sarif_uris_are_relative_to_srcroot(tree: Path) -> None:
    run_ = sarif_run()["runs"][0]
    root_uri = run_["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert root_uri == tree.resolve().as_uri() + "/"
    uris = []
    for result in run_["results"]:
        location = result["locations"][0]["physicalLocation"]["artifactLocation"]
        assert location["uriBaseId"] == "%SRCROOT%"
        uri = location["uri"]
        assert not uri.startswith("/") and not urlsplit(uri).scheme, uri
        assert (tree / unquote(uri)).is_file()
        uris.append(uri)
    assert uris == [path for path, *_ in EXPECTED]


def test_sarif_artifact_uri_is_percent_encoded(tree: Path) -> None:
    """SARIF §3.4.3: `uri` must be a valid URI reference, so a space in a path is %20."""
    spaced = tree / "src" / "my model.py"
    spaced.write_text("import torch\ntorch.cuda.synchronize()\n", encoding="utf-8")
    results = sarif_run("--select", "PC203")["runs"][0]["results"]
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results]
    assert "src/my%20model.py" in uris, uris
    assert all(" " not in uri for uri in uris), uris


def test_sarif_results_match_the_json_findings(tree: Path) -> None:
    results = sarif_run()["runs"][0]["results"]
    findings = findings_json()
    level = {"error": "error", "warning": "warning", "info": "note"}
    assert len(results) == len(findings)
    for result, f in zip(results, findings):
        assert result["ruleId"] == f["code"]
        assert result["level"] == level[f["severity"]]
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region == {
            "startLine": f["line"],
            "startColumn": f["column"],
            "endLine": f["end_line"],
            "endColumn": f["end_column"],
        }
        assert result["message"]["text"].startswith(f["message"])


def test_sarif_every_result_has_partial_fingerprints(tree: Path) -> None:
    results = sarif_run()["runs"][0]["results"]
    fingerprints = [f["fingerprint"] for f in findings_json()]
    assert results
    for result, fingerprint in zip(results, fingerprints):
        assert result["partialFingerprints"], result
        assert fingerprint in result["partialFingerprints"].values()


def test_sarif_rule_index_points_at_the_rule_with_the_same_id(tree: Path) -> None:
    run_ = sarif_run()["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    ids = [rule["id"] for rule in rules]
    assert len(set(ids)) == len(ids)
    for result in run_["results"]:
        assert 0 <= result["ruleIndex"] < len(rules)
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


def test_sarif_rules_carry_descriptions_and_help(tree: Path) -> None:
    rules = sarif_run()["runs"][0]["tool"]["driver"]["rules"]
    assert {"PC102", "PC203", "PC103", "PC306", "PC202", "PC307"} <= {rule["id"] for rule in rules}
    for rule in rules:
        assert rule["name"], rule["id"]
        assert rule["shortDescription"]["text"].strip(), rule["id"]
        assert rule["fullDescription"]["text"].strip(), rule["id"]
        assert rule["help"]["text"].strip(), rule["id"]
    sync = next(rule for rule in rules if rule["id"] == "PC203")
    assert "torch.cuda.synchronize" in sync["shortDescription"]["text"]
    assert "torch.accelerator.synchronize()" in sync["help"]["text"]


# --------------------------------------------------------------------------- determinism and order


@pytest.mark.parametrize("output_format", ["json", "sarif"])
def test_two_runs_produce_byte_identical_output(tree: Path, output_format: str) -> None:
    first = run(output_format)
    second = run(output_format)
    assert first == second
    assert first.encode("utf-8") == second.encode("utf-8")


@pytest.mark.parametrize("output_format", ["json", "sarif"])
def test_output_file_is_byte_identical_across_runs(tree: Path, output_format: str) -> None:
    run(output_format, "-o", "first.out")
    run(output_format, "-o", "second.out")
    assert (tree / "first.out").read_bytes() == (tree / "second.out").read_bytes()


def test_findings_are_sorted_by_path_line_column_and_code(tree: Path) -> None:
    # "a.py" < "a/b.py" as strings but not as path parts: the order must be the string one.
    (tree / "src" / "a").mkdir()
    (tree / "src" / "a" / "b.py").write_text("import torch\ntorch.cuda.synchronize()\n", encoding="utf-8")
    (tree / "src" / "a.py").write_text(
        "import torch\nx = 1\nif x.is_cuda: torch.cuda.synchronize()\n"
        "from torch.cuda.amp import GradScaler\nscaler = GradScaler()\n",
        encoding="utf-8",
    )
    findings = findings_json()
    keys = [(f["path"], f["line"], f["column"], f["code"]) for f in findings]
    assert keys == sorted(keys)
    assert [path for path, *_ in keys].index("src/a.py") < [path for path, *_ in keys].index("src/a/b.py")
    same_line = [(line, column, code) for path, line, column, code in keys if path == "src/a.py" and line == 3]
    assert same_line == sorted(same_line) and len(same_line) == 2
    same_place = [code for path, line, column, code in keys if path == "src/a.py" and line == 5]
    assert same_place == sorted(same_place) and len(same_place) >= 2

    sarif_keys = [
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
            r["locations"][0]["physicalLocation"]["region"]["startColumn"],
            r["ruleId"],
        )
        for r in sarif_run()["runs"][0]["results"]
    ]
    assert sarif_keys == keys
    concise = run("concise").splitlines()[:-1]
    assert [line.split(": ", 1)[0] for line in concise] == [f"{p}:{l}:{c}" for p, l, c, _ in keys]


# --------------------------------------------------------------------------- paths from the repository root


@pytest.fixture
def repository(tree: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tree as a git repository without [tool.portcheck], scanned from its src folder."""
    (tree / ".git").mkdir()
    monkeypatch.chdir(tree / "src")
    return tree


def scan_here(output_format: str, *paths: str) -> str:
    result = CliRunner().invoke(app, ["scan", *(paths or (".",)), "--format", output_format])
    assert result.exit_code == 1, result.output
    return result.stdout


def artifact_locations(document: dict) -> list[dict]:
    return [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in document["runs"][0]["results"]]


def test_sarif_from_a_subfolder_names_files_from_the_repository_root(
    repository: Path, sarif_validator: jsonschema.Draft7Validator
) -> None:
    document = json.loads(scan_here("sarif"))
    assert not list(sarif_validator.iter_errors(document))
    run_ = document["runs"][0]
    base = run_["originalUriBaseIds"]["%SRCROOT%"]
    assert base["uri"] == repository.resolve().as_uri() + "/"
    assert base["description"]["text"] == "the git repository root"
    assert run_["properties"]["anchor"] == "git"
    assert [(a["uri"], a["uriBaseId"]) for a in artifact_locations(document)] == [
        (path, "%SRCROOT%") for path, *_ in EXPECTED
    ]


def test_json_and_github_from_a_subfolder_name_files_from_the_repository_root(repository: Path) -> None:
    document = json.loads(scan_here("json"))
    assert document["anchor"] == {"kind": "git", "root": repository.resolve().as_posix()}
    assert [f["path"] for f in document["findings"]] == [path for path, *_ in EXPECTED]
    files = [unescape_property(properties["file"]) for _, properties, _ in parse_github(scan_here("github"))]
    assert files == [path for path, *_ in EXPECTED]
    text = scan_here("concise")
    assert "app.py:5:9: PC102" in text and "src/app.py" not in text, "text output stays relative to the shell"


def test_without_git_the_folder_of_the_configuration_anchors(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tree / "pyproject.toml").write_text("[tool.portcheck]\n", encoding="utf-8")
    monkeypatch.chdir(tree / "src")
    document = json.loads(scan_here("json"))
    assert document["anchor"]["kind"] == "config"
    assert [f["path"] for f in document["findings"]] == [path for path, *_ in EXPECTED]


def test_a_file_outside_the_anchor_gets_an_absolute_uri(
    tree: Path, tmp_path_factory: pytest.TempPathFactory, sarif_validator: jsonschema.Draft7Validator
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "loose.py"
    elsewhere.write_text(UTIL_SOURCE, encoding="utf-8")
    document = json.loads(scan_here("sarif", "src", str(elsewhere)))
    assert not list(sarif_validator.iter_errors(document))
    assert document["runs"][0]["properties"]["anchor"] == "cwd"
    outside = [a for a in artifact_locations(document) if "uriBaseId" not in a]
    assert [a["uri"] for a in outside] == [elsewhere.resolve().as_uri()] * 2


def test_the_report_is_the_same_whatever_the_hash_seed(tmp_path: Path) -> None:
    """A name bound by either of two imports (Megatron's `MemPool`, from `torch.cuda.memory` or
    from `torch.cuda`) resolves to a set of names; each run names the same one."""
    import os
    import subprocess
    import sys

    source = (
        "import torch\ntry:\n    from torch.cuda.memory import MemPool\nexcept ImportError:\n"
        "    from torch.cuda import MemPool\npool = MemPool()\n"
    )
    (tmp_path / "pools.py").write_text(source)
    reports = set()
    for seed in ("1", "2", "3", "4"):
        ran = subprocess.run(
            [sys.executable, "-m", "portcheck", "scan", "pools.py", "-f", "json", "--no-cache", "--exit-zero"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        reports.add(json.dumps([(f["line"], f["message"]) for f in json.loads(ran.stdout)["findings"]]))
    assert len(reports) == 1, reports
