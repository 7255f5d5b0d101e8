"""Fixtures for browser tests: one headless Chromium, the real server, a page per test.

* ``browser``: Debian's ``/usr/bin/chromium`` driven by Playwright (which cannot download its
  own browsers here), started once for this package. Without Chromium the tests are skipped
  with the reason, unless ``CLUBWIRE_REQUIRE_BROWSER=1`` (as in CI) makes that a failure.
* ``live_server``: the base URL of ``clubwire serve`` on the test's database, so browser tests
  run on SQLite and PostgreSQL like the rest; ``start_server(ca_bundle=…, **env)`` starts one
  with more ``CLUBWIRE_*`` variables, e.g. trusting the ``receiver`` fixture's CA (``tls``).
  ``@pytest.mark.sqlite_only`` drops the PostgreSQL run of a slow test.
* ``page`` (1280x900) and ``phone_page`` (390x844, a phone): a fresh context each. When a test
  fails, a screenshot of each of its pages goes to its ``tmp_path`` and the failure report
  names it, followed by the end of each server's output.

Mark browser test modules ``pytestmark = pytest.mark.browser``.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Error, Page, ViewportSize, sync_playwright

from clubwire.settings import Settings
from tests.browser import live_server as live
from tests.receiver import Authority, Receiver, authority, serving

CHROMIUM = Path("/usr/bin/chromium")
# As root in this sandbox Chromium needs --no-sandbox; the rest keep it off the closed network
# (without them it tries Google's hosts at every start) and away from a GPU there isn't.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REQUIRE_BROWSER = os.environ.get("CLUBWIRE_REQUIRE_BROWSER") == "1"
DESKTOP = ViewportSize(width=1280, height=900)
PHONE = ViewportSize(width=390, height=844)
LOG_TAIL_LINES = 40

PAGES = pytest.StashKey[list[tuple[Page, Path]]]()
SERVERS = pytest.StashKey[list[live.LiveServer]]()
STOPS = pytest.StashKey[list[ExitStack]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the PostgreSQL run of tests marked ``sqlite_only``."""
    dropped = [item for item in items if _postgres_run_of_sqlite_only(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]


def _postgres_run_of_sqlite_only(item: pytest.Item) -> bool:
    if not isinstance(item, pytest.Function) or item.get_closest_marker("sqlite_only") is None:
        return False
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("database_url") == "postgresql"


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One Chromium for all browser tests, closed when the last of them has run."""
    if not CHROMIUM.exists():
        reason = f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)"
        if REQUIRE_BROWSER:
            pytest.fail(f"{reason} (CLUBWIRE_REQUIRE_BROWSER=1)")
        pytest.skip(reason)
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield chromium
        chromium.close()
    finally:
        playwright.stop()


@pytest.fixture
def start_server(
    settings: Settings, tmp_path: Path, request: pytest.FixtureRequest
) -> live.StartServer:
    """Start ``clubwire serve`` on the test's database; it trusts ``ca_bundle`` if given.

    Each server is stopped when the test ends, before any fixture is torn down
    (``pytest_runtest_teardown``), so a ``receiver`` (or anything else the server talks to)
    outlives it, whichever fixture was set up first.
    """

    def start(*, ca_bundle: Path | None = None, **env: str) -> str:
        stack = ExitStack()
        server = stack.enter_context(live.serve(settings, tmp_path, ca_bundle, env))
        request.node.addfinalizer(stack.close)  # if teardown never gets that far
        request.node.stash.setdefault(STOPS, []).append(stack)
        request.node.stash.setdefault(SERVERS, []).append(server)
        return server.url

    return start


@pytest.fixture
def tls(tmp_path: Path) -> Authority:
    """A test CA: receivers' certificates, and the bundle a server trusts them by."""
    return authority(tmp_path)


@pytest.fixture
def receiver(tls: Authority) -> Iterator[Receiver]:
    """A real HTTPS receiver on 127.0.0.1 (``tests.receiver``); start the server with
    ``start_server(ca_bundle=tls.bundle)``."""
    with serving(tls) as running:
        yield running


@pytest.fixture
def live_server(start_server: live.StartServer) -> str:
    """The base URL of a running ``clubwire serve`` on the test's database."""
    return start_server()


@pytest.fixture
def page(browser: Browser, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page in a fresh context, as on a laptop."""
    yield from _page(browser, tmp_path / "failure-page.png", request, viewport=DESKTOP)


@pytest.fixture
def phone_page(browser: Browser, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page in a fresh context, as on a phone: narrow, touch, and honouring meta viewport."""
    yield from _page(
        browser,
        tmp_path / "failure-phone-page.png",
        request,
        viewport=PHONE,
        is_mobile=True,
        has_touch=True,
        device_scale_factor=2,
    )


def _page(
    browser: Browser,
    on_failure: Path,
    request: pytest.FixtureRequest,
    *,
    viewport: ViewportSize,
    is_mobile: bool = False,
    has_touch: bool = False,
    device_scale_factor: float = 1,
) -> Iterator[Page]:
    context = browser.new_context(
        viewport=viewport,
        is_mobile=is_mobile,
        has_touch=has_touch,
        device_scale_factor=device_scale_factor,
        locale="en-GB",
        timezone_id="UTC",
    )
    try:
        page = context.new_page()
        request.node.stash.setdefault(PAGES, []).append((page, on_failure))
        yield page
    finally:
        context.close()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Stop the test's servers before its fixtures go (closing twice does nothing)."""
    stacks: list[ExitStack] = item.stash.get(STOPS, [])
    for stack in reversed(stacks):
        stack.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On a failure, a screenshot of each page, then the end of each server's output."""
    report = yield
    if report.failed and report.when in ("setup", "call"):
        for page, path in item.stash.get(PAGES, []):
            report.sections.append(("browser screenshot", _screenshot(page, path)))
        for server in item.stash.get(SERVERS, []):
            tail = "\n".join(server.output().splitlines()[-LOG_TAIL_LINES:])
            report.sections.append((f"clubwire serve at {server.url} ({server.log})", tail))
    return report


def _screenshot(page: Page, path: Path) -> str:
    try:
        page.screenshot(path=path, full_page=True)
    except Error as exc:
        return f"no screenshot of {page.url}: {exc.message}"
    return f"{page.url}: {path}"
