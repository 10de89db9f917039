"""A real browser for the tests: Debian's chromium driven by playwright's sync API.

``scripts/test.sh`` installs ``chromium`` with apt when it is missing (as root); the
playwright wheel brings only its driver, never a browser (``playwright install``
downloads from outside the package registries and is not used).

Browser tests are plain (sync) ``test_*`` functions, and this package holds no async
tests: while playwright's sync API is open, its event loop counts as running in the
test thread (it waits inside ``run_until_complete`` in a greenlet), so anyio cannot
start a test there ("Cannot run the event loop while another loop is running").
That is why ``chromium`` lives for this package, not the session: pytest closes it
before a worker goes on to another package's tests. The app under test runs in
another thread, on an anyio event loop of its own (``portal``, ``serve``). Every test
that uses these fixtures is marked ``browser`` and ``slow``.

    def test_approve(serve, browser_context, screenshots):
        url = serve(app)
        page = browser_context(viewport="phone").new_page()
        page.goto(url)
        page.screenshot(path=screenshots / "approve.png")
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal, Protocol

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from playwright.sync_api import Browser, BrowserContext, ViewportSize, sync_playwright

from tests.mcp.serving import serve_asgi

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_MS = 15_000
"""Playwright's default is 30 s; a page of ours that takes this long is broken."""

DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}


class NewContext(Protocol):
    def __call__(
        self,
        viewport: Literal["desktop", "phone"] | ViewportSize = "desktop",
        **options: Any,
    ) -> BrowserContext: ...


class Serve(Protocol):
    def __call__(self, app: Any, path: str = "/") -> str: ...


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "chromium" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="package")
def chromium() -> Iterator[Browser]:
    """Headless chromium for this package's tests (see above for why not the session);
    fails, not skips, when chromium is not installed."""
    if shutil.which(CHROMIUM) is None:
        pytest.fail(
            f"{CHROMIUM} is missing: run `bash scripts/test.sh` as root (it installs it),"
            " or `apt-get install chromium`",
            pytrace=False,
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            # As root, a sandboxed chromium exits at once ("Chromium sandboxing
            # failed!"). False is playwright's default too: said here because it
            # matters. (Playwright passes --disable-dev-shm-usage itself.)
            chromium_sandbox=False,
        )
        yield browser
        browser.close()


@pytest.fixture
def browser_context(chromium: Browser) -> Iterator[NewContext]:
    """Makes isolated contexts (own cookies and storage: one per user), closed after
    the test. ``viewport`` is "desktop" (1280x800), "phone" (390x844, mobile and
    touch, so the page's meta viewport applies) or a size; ``options`` go to
    ``Browser.new_context``."""
    contexts: list[BrowserContext] = []

    def new_context(
        viewport: Literal["desktop", "phone"] | ViewportSize = "desktop", **options: Any
    ) -> BrowserContext:
        if viewport == "desktop":
            viewport = DESKTOP
        elif viewport == "phone":
            viewport = PHONE
            options = {"is_mobile": True, "has_touch": True, **options}
        context = chromium.new_context(viewport=viewport, **options)
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return context

    yield new_context
    for context in contexts:
        context.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where tests save their PNGs (under pytest's basetemp, one per test process)."""
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture
def portal() -> Iterator[BlockingPortal]:
    """An anyio event loop in a thread of its own, for the app under test and for any
    async set-up it needs (``portal.call(gate.__aenter__)``)."""
    with start_blocking_portal() as portal:
        yield portal


@pytest.fixture
def serve(portal: BlockingPortal) -> Iterator[Serve]:
    """Serves an ASGI app on a free loopback port (uvicorn, on ``portal``'s loop, its
    lifespan run); returns the URL of ``path``. Stopped after the test."""
    with ExitStack() as stack:

        def start(app: Any, path: str = "/") -> str:
            return stack.enter_context(portal.wrap_async_context_manager(serve_asgi(app, path)))

        yield start
