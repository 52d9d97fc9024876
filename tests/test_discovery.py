"""Which files `portcheck.discovery.discover` hands to the engine, and which it leaves out."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from portcheck.config import Config
from portcheck.discovery import Prefilter, discover
from portcheck.filekinds import CONFIG, given_kind

SOURCE = "import torch\n"


def write(root: Path, *relative: str, text: str = SOURCE) -> None:
    for name in relative:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def found(paths: list[Path], config: Config) -> list[str]:
    """The discovered files as POSIX paths relative to the config root, in discovery order."""
    discovery = discover(paths, config)
    assert discovery.errors == ()
    return [path.resolve().relative_to(config.root).as_posix() for path in discovery.files]


# --- default excludes, exclude and extend-exclude --------------------------------------------


def test_default_excludes_skip_vcs_virtualenv_build_vendored_and_cache_directories(tmp_path: Path) -> None:
    write(
        tmp_path,
        "src/app.py",
        ".git/hooks/x.py",
        ".venv/lib/x.py",
        "build/lib/x.py",
        "lib/python3.11/site-packages/pkg/x.py",
        "src/__pycache__/x.py",
        "node_modules/pkg/x.py",
    )
    assert found([tmp_path], Config(root=tmp_path)) == ["src/app.py"]


def test_default_excludes_also_apply_to_nested_directories_of_the_same_name(tmp_path: Path) -> None:
    write(tmp_path, "pkg/app.py", "pkg/build/x.py", "pkg/sub/node_modules/x.py", "pkg/sub/.venv/x.py")
    assert found([tmp_path], Config(root=tmp_path)) == ["pkg/app.py"]


def test_exclude_replaces_the_default_excludes(tmp_path: Path) -> None:
    write(tmp_path, "app.py", "build/x.py", "generated/x.py")
    config = Config(root=tmp_path).with_overrides(exclude=["generated/"])
    assert found([tmp_path], config) == ["app.py", "build/x.py"]


def test_extend_exclude_adds_to_the_default_excludes(tmp_path: Path) -> None:
    write(tmp_path, "app.py", "build/x.py", "third_party/x.py", "src/vendored_pb2.py")
    config = Config(root=tmp_path).with_overrides(extend_exclude=["third_party/", "*_pb2.py"])
    assert found([tmp_path], config) == ["app.py"]


def test_extend_exclude_accepts_the_pyproject_spelling_of_the_key(tmp_path: Path) -> None:
    write(tmp_path, "app.py", "third_party/x.py")
    config = Config(root=tmp_path).with_overrides(**{"extend-exclude": ["third_party/"]})
    assert found([tmp_path], config) == ["app.py"]


def test_anchored_exclude_patterns_are_relative_to_the_config_root(tmp_path: Path) -> None:
    write(tmp_path, "settings.py", "pkg/settings.py", "pkg/legacy/old.py", "other/pkg/legacy/old.py")
    config = Config(root=tmp_path).with_overrides(extend_exclude=["/settings.py", "pkg/legacy/"])
    assert found([tmp_path], config) == ["other/pkg/legacy/old.py", "pkg/settings.py"]


def test_exclude_patterns_stay_relative_to_the_root_when_a_subdirectory_is_scanned(tmp_path: Path) -> None:
    write(tmp_path, "pkg/legacy/old.py", "pkg/new.py")
    config = Config(root=tmp_path).with_overrides(extend_exclude=["/pkg/legacy/"])
    assert found([tmp_path / "pkg"], config) == ["pkg/new.py"]


# --- .gitignore ----------------------------------------------------------------------------


def test_root_gitignore_is_respected(tmp_path: Path) -> None:
    write(tmp_path, "app.py", "scratch.py", "out/gen.py", "pkg/scratch.py")
    (tmp_path / ".gitignore").write_text("scratch.py\nout/\n", encoding="utf-8")
    assert found([tmp_path], Config(root=tmp_path)) == ["app.py"]


def test_nested_gitignore_applies_only_below_its_directory(tmp_path: Path) -> None:
    write(tmp_path, "local.py", "pkg/local.py", "pkg/keep.py", "pkg/deeper/local.py")
    (tmp_path / "pkg" / ".gitignore").write_text("local.py\n", encoding="utf-8")
    assert found([tmp_path], Config(root=tmp_path)) == ["local.py", "pkg/keep.py"]


def test_gitignore_negation_re_includes_a_file(tmp_path: Path) -> None:
    write(tmp_path, "gen/a.py", "gen/b.py", "gen/keep.py")
    (tmp_path / "gen" / ".gitignore").write_text("*.py\n!keep.py\n", encoding="utf-8")
    assert found([tmp_path], Config(root=tmp_path)) == ["gen/keep.py"]


def test_nested_gitignore_negation_overrides_a_parent_gitignore(tmp_path: Path) -> None:
    write(tmp_path, "a_gen.py", "pkg/b_gen.py", "pkg/keep_gen.py")
    (tmp_path / ".gitignore").write_text("*_gen.py\n", encoding="utf-8")
    (tmp_path / "pkg" / ".gitignore").write_text("!keep_gen.py\n", encoding="utf-8")
    assert found([tmp_path], Config(root=tmp_path)) == ["pkg/keep_gen.py"]


def test_gitignore_of_a_parent_directory_applies_when_the_parent_holds_the_git_repository(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("secret.py\n", encoding="utf-8")
    write(tmp_path, "project/app.py", "project/secret.py")
    assert found([tmp_path / "project"], Config(root=tmp_path)) == ["project/app.py"]


def test_gitignore_of_a_parent_directory_outside_any_git_repository_is_not_applied(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("secret.py\n", encoding="utf-8")
    write(tmp_path, "project/app.py", "project/secret.py")
    assert found([tmp_path / "project"], Config(root=tmp_path)) == ["project/app.py", "project/secret.py"]


def test_git_info_exclude_of_the_enclosing_repository_is_respected(tmp_path: Path) -> None:
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("private.py\n", encoding="utf-8")
    write(tmp_path, "app.py", "private.py")
    assert found([tmp_path], Config(root=tmp_path)) == ["app.py"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_file_git_tracks_is_scanned_though_a_gitignore_pattern_matches_it(tmp_path: Path) -> None:
    """VAR: `*.txt` in .gitignore, and `requirements.txt` tracked all the same (git ignores only
    untracked files); also a tracked file in an ignored folder. Untracked matches stay hidden."""
    write(tmp_path, "app.py", "requirements.txt", "notes.txt", "log/keep.py", "log/run.py")
    (tmp_path / "requirements.txt").write_text("torch==2.1.0\n", encoding="utf-8")
    (tmp_path / ".gitignore").write_text("*.txt\nlog/\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "-f", "app.py", "requirements.txt", "log/keep.py"], check=True)
    assert found([tmp_path], Config(root=tmp_path)) == ["app.py", "log/keep.py", "requirements.txt"]


def test_respect_gitignore_false_scans_gitignored_files(tmp_path: Path) -> None:
    write(tmp_path, "app.py", "scratch.py", "pkg/local.py")
    (tmp_path / ".gitignore").write_text("scratch.py\n", encoding="utf-8")
    (tmp_path / "pkg" / ".gitignore").write_text("local.py\n", encoding="utf-8")
    config = Config(root=tmp_path).with_overrides(respect_gitignore=False)
    assert found([tmp_path], config) == ["app.py", "pkg/local.py", "scratch.py"]


def test_respect_gitignore_false_still_applies_the_default_excludes(tmp_path: Path) -> None:
    write(tmp_path, "app.py", "build/x.py")
    config = Config(root=tmp_path).with_overrides(respect_gitignore=False)
    assert found([tmp_path], config) == ["app.py"]


# --- explicit files, force-exclude ---------------------------------------------------------


def test_an_explicitly_passed_file_is_scanned_even_if_excluded(tmp_path: Path) -> None:
    write(tmp_path, "build/x.py", "third_party/y.py")
    config = Config(root=tmp_path).with_overrides(extend_exclude=["third_party/"])
    given = [tmp_path / "build" / "x.py", tmp_path / "third_party" / "y.py"]
    assert found(given, config) == ["build/x.py", "third_party/y.py"]


def test_force_exclude_applies_excludes_to_explicitly_passed_files(tmp_path: Path) -> None:
    write(tmp_path, "app.py", "build/x.py", "third_party/y.py")
    config = Config(root=tmp_path).with_overrides(extend_exclude=["third_party/"], force_exclude=True)
    given = [tmp_path / "app.py", tmp_path / "build" / "x.py", tmp_path / "third_party" / "y.py"]
    assert found(given, config) == ["app.py"]


def test_an_explicitly_passed_excluded_directory_is_scanned_without_force_exclude(tmp_path: Path) -> None:
    write(tmp_path, "build/x.py", "build/sub/y.py", "build/.venv/z.py")
    assert found([tmp_path / "build"], Config(root=tmp_path)) == ["build/sub/y.py", "build/x.py"]


def test_force_exclude_skips_an_explicitly_passed_excluded_directory(tmp_path: Path) -> None:
    write(tmp_path, "build/x.py")
    config = Config(root=tmp_path).with_overrides(force_exclude=True)
    assert found([tmp_path / "build"], config) == []


def test_force_exclude_does_not_exclude_the_root_itself(tmp_path: Path) -> None:
    write(tmp_path, "app.py")
    config = Config(root=tmp_path).with_overrides(force_exclude=True)
    assert found([tmp_path], config) == ["app.py"]


# --- which files, in which order -----------------------------------------------------------


def test_only_the_kinds_portcheck_reads_are_collected_from_directories(tmp_path: Path) -> None:
    write(
        tmp_path,
        "module.py",
        "stubs.pyi",
        "README.md",
        "script",
        "ext.pyx",
        "compiled.pyc",
        "module.py.bak",
        "setup.cfg",
        "pyproject.toml",
        "requirements-dev.txt",
        "requirements/base.txt",
        "examples/requirement.txt",
        "notes.txt",
        "environment.yml",
        "csrc/kernel.cu",
        "csrc/kernel.cuh",
        "csrc/ops.cpp",
        "csrc/ops.h",
        "config.yml",
        ".pre-commit-config.yaml",
        ".github/workflows/ci.yml",
        "mkdocs.yml",
    )
    assert found([tmp_path], Config(root=tmp_path)) == [
        "config.yml",  # a training or launcher config; not the tools' own YAML
        "csrc/kernel.cu",
        "csrc/kernel.cuh",
        "csrc/ops.cpp",
        "csrc/ops.h",
        "environment.yml",
        "examples/requirement.txt",
        "module.py",
        "pyproject.toml",
        "requirements/base.txt",  # paths sort by component, so the folder comes first
        "requirements-dev.txt",
        "setup.cfg",
        "stubs.pyi",
    ]


def test_a_tools_yaml_named_on_the_command_line_is_read_as_a_config(tmp_path: Path) -> None:
    """What a pre-commit hook hands over is read, not refused: a config has only settings."""
    write(tmp_path, ".pre-commit-config.yaml", "mkdocs.yml")
    given = [tmp_path / ".pre-commit-config.yaml", tmp_path / "mkdocs.yml"]
    assert found(given, Config(root=tmp_path)) == [".pre-commit-config.yaml", "mkdocs.yml"]
    assert given_kind(".pre-commit-config.yaml") == CONFIG


def test_output_is_sorted_whatever_the_order_of_the_given_paths(tmp_path: Path) -> None:
    write(tmp_path, "b.py", "a.py", "c/z.py", "c/y.py")
    given = [tmp_path / "c", tmp_path / "b.py", tmp_path / "a.py"]
    files = discover(given, Config(root=tmp_path)).files
    assert list(files) == sorted(files)
    assert found(given, Config(root=tmp_path)) == ["a.py", "b.py", "c/y.py", "c/z.py"]


def test_the_same_file_given_twice_is_listed_once(tmp_path: Path) -> None:
    write(tmp_path, "a.py")
    assert found([tmp_path / "a.py", tmp_path / "a.py"], Config(root=tmp_path)) == ["a.py"]


def test_a_file_given_both_directly_and_through_its_directory_is_listed_once(tmp_path: Path) -> None:
    write(tmp_path, "a.py", "b.py")
    given = [tmp_path / "a.py", tmp_path, tmp_path / "b.py"]
    assert found(given, Config(root=tmp_path)) == ["a.py", "b.py"]


def test_the_prefilter_says_which_trigger_words_a_file_holds() -> None:
    """Each rule walks only a file that holds one of its words (or learns facts from all):
    a word of identifier characters is found inside a longer identifier too, the others
    anywhere in the bytes."""
    prefilter = Prefilter([b"cuda", b"Collat", b".item", b"for ", b"nccl", b"'cpu'"])
    data = b"if x.is_cuda:\n    for i in range(3):\n        y = x.item()\nclass TextCollate:\n    pass\n"
    assert prefilter.present(data) == {b"cuda", b"Collat", b".item", b"for "}
    assert Prefilter([]).present(data) == frozenset()
