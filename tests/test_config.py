"""[tool.portcheck] discovery, validation, selection by prefix and command-line overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from portcheck import catalog, registry
from portcheck.config import DEFAULT_EXCLUDE, Config, ConfigError, find_pyproject, load
from portcheck.findings import Severity
from portcheck.targets import DEFAULT_TARGETS


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_every_rule_and_every_target_but_rocm() -> None:
    config = Config()
    assert config.rules == tuple(registry.all_rules())
    assert config.targets == DEFAULT_TARGETS and "rocm" not in config.targets
    assert config.fail_on is Severity.ERROR and config.exclude == DEFAULT_EXCLUDE


def test_the_nearest_pyproject_with_a_portcheck_table_wins(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.portcheck]\ntargets = ["tpu"]\n')
    write(tmp_path / "pkg" / "pyproject.toml", "[project]\nname = 'pkg'\n")  # no [tool.portcheck]
    nested = tmp_path / "pkg" / "src"
    nested.mkdir()
    assert find_pyproject(nested) == tmp_path / "pyproject.toml"
    config = load(nested)
    assert config.targets == ("tpu",) and config.root == tmp_path.resolve()


def test_without_any_config_the_root_is_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load(tmp_path).root == Path.cwd()


def test_every_documented_key(tmp_path: Path) -> None:
    pyproject = write(
        tmp_path / "pyproject.toml",
        """
[tool.portcheck]
targets = ["neuron", "tpu"]
select = ["PC1", "PC2"]
extend-select = ["PC401"]
ignore = ["PC203"]
per-file-ignores = { "tests/**" = ["PC1"] }
exclude = ["vendor/"]
extend-exclude = ["generated/"]
respect-gitignore = false
fail-on = "warning"
torch-version = "2.13"
max-file-size = 1000
max-expression-chain = 50
max-findings-per-file = 7
""",
    )
    config = load(tmp_path, pyproject)
    assert config.targets == ("tpu", "neuron"), "targets are kept in canonical order"
    assert "PC203" not in config.rules and "PC401" in config.rules and "PC301" not in config.rules
    assert all(code.startswith(("PC1", "PC2", "PC401")) for code in config.rules)
    assert config.per_file_ignores == (("tests/**", tuple(sorted(catalog.expand(["PC1"])))),)
    assert config.exclude == ("vendor/",) and config.extend_exclude == ("generated/",)
    assert (config.respect_gitignore, config.fail_on, config.torch_version, config.max_file_size) == (
        False,
        Severity.WARNING,
        (2, 13),
        1000,
    )
    assert (config.max_expression_chain, config.max_findings_per_file) == (50, 7)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("unknown-key = 1", "unknown setting(s) unknown-key"),
        ('targets = ["gpu"]', "unknown target 'gpu'"),
        ('select = ["PC999"]', "valid codes: PC001"),
        ('fail-on = "fatal"', "unknown severity"),
        ('torch-version = "two"', "torch-version must look like 2.13"),
        ("max-file-size = -1", "positive number"),
        ('max-file-size = "ten MB"', "a size such as 512KB"),
        ('select = [""]', "select: empty rule selector"),
        ('ignore = ["PC"]', "the rule selection enables no rule"),
        ("max-expression-chain = 0", "max-expression-chain must be a positive number"),
        ('max-findings-per-file = "many"', "max-findings-per-file must be a positive number"),
        ("respect-gitignore = 1", "true or false"),
        ('per-file-ignores = { "a.py" = ["XX1"] }', "unknown rule selector"),
        ("targets = 3", "list of strings"),
    ],
)
def test_invalid_settings_are_rejected_with_the_file_named(tmp_path: Path, body: str, message: str) -> None:
    pyproject = write(tmp_path / "pyproject.toml", f"[tool.portcheck]\n{body}\n")
    with pytest.raises(ConfigError, match="pyproject.toml") as raised:
        load(tmp_path, pyproject)
    assert message in str(raised.value)


def test_broken_toml_is_a_config_error(tmp_path: Path) -> None:
    pyproject = write(tmp_path / "pyproject.toml", "[tool.portcheck\n")
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path, pyproject)


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ("2_000_000", 2_000_000),
        ('"512KB"', 512_000),
        ('"10MB"', 10_000_000),
        ('"1.5 MiB"', 1_572_864),
        ('"64kb"', 64_000),
    ],
)
def test_max_file_size_reads_bytes_or_units(tmp_path: Path, value: str, size: int) -> None:
    pyproject = write(tmp_path / "pyproject.toml", f"[tool.portcheck]\nmax-file-size = {value}\n")
    assert load(tmp_path, pyproject).max_file_size == size


def test_an_empty_selector_is_refused_not_dropped() -> None:
    with pytest.raises(ValueError, match="empty rule selector ''"):
        catalog.expand(["PC2", ""])


def test_selection_by_prefix_like_ruff() -> None:
    assert catalog.expand(["PC2"]) == {c for c in registry.all_rules() if c.startswith("PC2")}
    assert catalog.select(["PC"], ignore=["PC2"]) == tuple(c for c in registry.all_rules() if not c.startswith("PC2"))
    assert catalog.select(["PC203"], extend_select=["pc101"]) == ("PC101", "PC203")
    with pytest.raises(ValueError, match="PC001, PC002"):
        catalog.expand(["PC9"])


def test_command_line_overrides_beat_the_file(tmp_path: Path) -> None:
    pyproject = write(tmp_path / "pyproject.toml", '[tool.portcheck]\ntargets = ["tpu"]\nignore = ["PC1"]\n')
    config = load(tmp_path, pyproject).with_overrides(targets=["cpu"], extend_select=["PC101"], fail_on="info")
    assert config.targets == ("cpu",) and "PC101" in config.rules and "PC102" not in config.rules
    assert config.fail_on is Severity.INFO


def test_targets_all_selects_every_target_including_rocm() -> None:
    assert "rocm" in Config().with_overrides(targets=["all"]).targets


def test_other_tools_sub_tables_are_ignored(tmp_path: Path) -> None:
    pyproject = write(
        tmp_path / "pyproject.toml", '[tool.portcheck]\ntargets = ["tpu"]\n[tool.portcheck.smoke]\nx = 1\n'
    )
    assert load(tmp_path, pyproject).targets == ("tpu",)
