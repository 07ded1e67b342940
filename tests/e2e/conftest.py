"""The browser fixtures of test_browser.py (one server for the session, Debian's Chromium per module, fresh pages) for
the other e2e modules too."""
from tests.e2e.test_browser import app_url, browser, new_page, screenshot_dir  # noqa: F401
