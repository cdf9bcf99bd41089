#!/bin/sh
# Install Debian's headless Chromium for the browser tests (tests/serve), once.
# A no-op when the packages are installed; otherwise needs root (apt-get).
# Playwright drives it with executable_path=/usr/bin/chromium-headless-shell;
# `playwright install` (a CDN download) is never used.
set -eu
exec sh "$(dirname "$0")/install_debian_packages.sh" install_browser.sh chromium-headless-shell fonts-liberation libatomic1
