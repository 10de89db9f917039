"""The HTML report of ``callgate eval run --html`` in a real browser: it opens from
the file alone, its plots show and fit a desktop and a phone, and a failed run
stands out with the check it failed."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from playwright.sync_api import Page
from typer.testing import CliRunner

from callgate.cli.app import app
from tests.eval.test_cli import TINY
from tests.eval.test_reports import DEMO_SUITE

from .conftest import NewContext


def _report(tmp_path: Path, suite: Path, *args: str) -> Path:
    """Runs ``callgate eval run SUITE --html`` and returns the page. In a thread of
    its own: the command runs an event loop, and playwright's counts as running in
    this one."""
    page = tmp_path / f"{suite.stem}.html"

    def run() -> None:
        result = CliRunner().invoke(
            app, ["eval", "run", str(suite), "--html", str(page), *args], catch_exceptions=False
        )
        assert result.exit_code == 0, result.output

    with ThreadPoolExecutor(1) as pool:
        pool.submit(run).result()
    return page


def _open(page: Page, report: Path) -> list[str]:
    """Opens ``report`` and returns what went wrong on the way: console errors and
    any request for something other than the file itself."""
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("request", lambda r: problems.append(r.url) if r.url != report.as_uri() else None)
    page.goto(report.as_uri())
    return problems


def test_the_report_opens_offline_and_its_plots_fit_a_desktop_and_a_phone(
    tmp_path: Path, browser_context: NewContext, screenshots: Path
) -> None:
    report = _report(tmp_path, DEMO_SUITE, "--repeat", "2")

    for viewport in ("desktop", "phone"):
        page = browser_context(viewport).new_page()
        assert _open(page, report) == []
        width = page.viewport_size["width"] if page.viewport_size else 0

        plots = page.locator(".plots svg")
        assert plots.count() == 4  # success by task, pass^k, rates, errors by kind
        for i in range(plots.count()):
            box = plots.nth(i).bounding_box()
            assert box is not None and box["width"] > 200 and box["height"] > 100, (viewport, i)
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (viewport, i, box)
        # The page never scrolls sideways; the wide table scrolls in its own box.
        assert page.evaluate("document.scrollingElement.scrollWidth") <= width, viewport
        assert page.locator(".card", has_text="success").inner_text().split() == [
            "success",
            "100%",
            "58/58",
            "runs",
        ]
        assert page.locator("tr", has_text="email-external-needs-approval").is_visible()
        page.screenshot(path=screenshots / f"eval-report-{viewport}.png", full_page=True)


def test_a_failed_run_is_red_and_names_its_failed_check(
    tmp_path: Path, browser_context: NewContext
) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY, encoding="utf-8")
    report = _report(tmp_path, suite)

    page = browser_context().new_page()
    assert _open(page, report) == []

    held = page.locator("tr", has_text="held")
    assert held.locator("td.bad").inner_text() == "0/1"
    assert held.locator("td.bad").evaluate("e => getComputedStyle(e).color") == "rgb(207, 34, 46)"
    assert "the answer does not contain 'failed'" in held.inner_text()
    # Its bar in the plot is red (a task that always fails is no empty row).
    widest = page.locator(".plots svg").first.evaluate(
        """svg => Math.max(0, ...[...svg.querySelectorAll("path")]
            .filter(p => (p.getAttribute("style") || "").includes("#cf222e"))
            .map(p => p.getBoundingClientRect().width))"""
    )
    assert widest > 100
    passed = page.locator("tr", has_text="status")
    assert passed.locator("td.ok").inner_text() == "1/1"
    assert page.locator(".card", has_text="success").inner_text().split()[:2] == ["success", "50%"]
