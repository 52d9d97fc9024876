"""The rule pages under docs/rules/ and the rule catalog are generated from the rules and
committed (`python -m portcheck.rule_docs`); SARIF links every rule to its page."""

from __future__ import annotations

from pathlib import Path

from portcheck import __version__, catalog, registry, rule_docs
from portcheck.api import ScanReport
from portcheck.config import Config
from portcheck.report import sarif
from portcheck.rule import headline

DOCS = Path(__file__).resolve().parents[1] / "docs" / "rules"


def test_the_committed_rule_pages_are_up_to_date() -> None:
    committed = {page.name: page.read_text(encoding="utf-8") for page in DOCS.glob("*.md")}
    expected = rule_docs.pages()
    stale = sorted(name for name in committed.keys() | expected.keys() if committed.get(name) != expected.get(name))
    assert not stale, f"run `python -m portcheck.rule_docs` (make docs) and commit: {stale}"


def test_the_committed_catalog_describes_every_rule_as_it_is() -> None:
    assert catalog.FILE.read_text(encoding="utf-8") == rule_docs.catalog_text(), "run `make docs` and commit"
    assert tuple(catalog.entries()) == tuple(registry.all_rules())
    assert catalog.select(None) == tuple(registry.all_rules())


def test_the_catalog_writer_writes_only_what_changed(tmp_path: Path) -> None:
    file = tmp_path / "catalog.json"
    assert rule_docs.write_catalog(file) and file.read_text(encoding="utf-8") == rule_docs.catalog_text()
    assert not rule_docs.write_catalog(file)


def test_every_sarif_rule_links_to_its_page_and_has_a_one_sentence_title() -> None:
    report = ScanReport(config=Config(), findings=(), files=0, skipped=0)
    rules = sarif.document(report)["runs"][0]["tool"]["driver"]["rules"]
    assert {rule["id"] for rule in rules} == set(registry.all_rules())
    for rule in rules:
        assert (
            rule["helpUri"] == f"https://github.com/portcheck/portcheck/blob/v{__version__}/docs/rules/{rule['id']}.md"
        )
        assert (DOCS / f"{rule['id']}.md").is_file()
        short = rule["shortDescription"]["text"]
        assert short == headline(short) and short.endswith((".", "!", "?")), short
    by_id = {rule["id"]: rule for rule in rules}
    assert by_id["PC107"]["shortDescription"]["text"] == "Reports an integer given where a device goes."


def test_the_writer_removes_pages_of_rules_that_are_gone(tmp_path: Path) -> None:
    (tmp_path / "PC999.md").write_text("# a retired rule\n", encoding="utf-8")
    changed = rule_docs.write(tmp_path)
    assert "PC999.md" in changed and not (tmp_path / "PC999.md").exists()
    assert rule_docs.write(tmp_path) == [], "a second run changes nothing"


def test_headline_keeps_code_and_drops_brackets_and_lists() -> None:
    assert headline("Reports `a.b()` calls (and c.d). Then more.") == "Reports `a.b()` calls."
    assert headline("Reports checks of `x: int`: `a == b`, `c`.") == "Reports checks of `x: int`."
    assert headline("No full stop") == "No full stop"
