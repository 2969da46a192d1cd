"""Browser tests (Playwright + headless Chromium); a package so its conftest does not shadow tests/conftest.py."""
