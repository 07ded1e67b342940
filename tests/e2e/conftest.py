"""The browser fixtures of test_browser.py (a server per module, Debian's Chromium, fresh pages) for the other e2e
modules too."""
from tests.e2e.test_browser import app_url, browser, new_page, screenshot_dir  # noqa: F401
