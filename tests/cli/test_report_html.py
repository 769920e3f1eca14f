"""report.html in a real browser: headless Chromium loads it without console errors and
displays every plot.

Uses Debian's `chromium` and `chromium-driver` packages (installed by .ci/run) through
selenium, with both executables named explicitly so nothing is downloaded. Skipped, with the
reason, where either the browser, its driver or selenium is missing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from trainscale.reporting.build import build_report

from tests.helpers.report_store import build_store, cpu_parallel_configs

webdriver = pytest.importorskip(
    "selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')"
)

CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",  # CI containers run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # small /dev/shm in containers
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,1024",
)
IMAGES_SCRIPT = """
return Array.from(document.images).map(img => ({
    complete: img.complete, width: img.naturalWidth, height: img.naturalHeight, alt: img.alt,
    shown: img.getBoundingClientRect().width > 0
}));
"""


def _executable(env_var: str, *names: str) -> str | None:
    explicit = os.environ.get(env_var)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return next((path for name in names if (path := shutil.which(name))), None)


CHROMIUM = _executable("TRAINSCALE_CHROMIUM", "chromium", "chromium-browser")
CHROMEDRIVER = _executable("TRAINSCALE_CHROMEDRIVER", "chromedriver")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="headless browser test needs chromium and chromedriver "
    "(apt-get install chromium chromium-driver)",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    # A fresh profile: nothing from a developer's own browser can leak into the result.
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    with pytest.MonkeyPatch.context() as patch:
        # Both executables are named, so selenium has nothing to look up; offline makes sure
        # it never tries to fetch a driver anyway.
        patch.setenv("SE_OFFLINE", "true")
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("html-report")
    store = build_store(root / "runs.db", cpu_parallel_configs())
    return build_report(store, sweep_id="5eed0000", out_dir=root / "out")


def _load(browser, page: Path) -> tuple[list[dict], list[dict]]:
    """Open a page; return its images' state and the console errors it logged."""
    browser.get_log("browser")  # drop anything left from an earlier page
    browser.get(page.as_uri())
    images = browser.execute_script(IMAGES_SCRIPT)
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    return images, errors


def test_report_page_loads_and_shows_every_plot(browser, report) -> None:
    images, errors = _load(browser, report.html)
    assert errors == []
    assert browser.title.startswith("trainscale report")
    assert len(images) == len(report.plots) >= 6
    for image in images:
        assert image["complete"] and image["width"] > 0, image["alt"]
        assert image["height"] > 0 and image["shown"], image["alt"]


def test_the_check_sees_a_broken_page(browser, report, tmp_path: Path) -> None:
    # The same page with one plot pointing outside: the policy blocks it (no request is made),
    # the console reports it, and the image stays empty. So the test above can fail.
    page = report.html.read_text(encoding="utf-8")
    first = page.index('<img src="data:')
    end = page.index('"', first + len('<img src="'))
    broken = page[: first + len('<img src="')] + "https://example.invalid/plot.png" + page[end:]
    doctored = tmp_path / "broken.html"
    doctored.write_text(broken, encoding="utf-8")
    images, errors = _load(browser, doctored)
    assert errors, "a blocked image should be reported in the console"
    assert images[0]["width"] == 0
    assert all(image["width"] > 0 for image in images[1:])
