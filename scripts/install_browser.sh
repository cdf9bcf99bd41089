#!/bin/sh
# Install Debian's headless Chromium for the browser tests (tests/serve), once.
# A no-op when the packages are installed; otherwise needs root (apt-get).
# Playwright drives it with executable_path=/usr/bin/chromium-headless-shell;
# `playwright install` (a CDN download) is never used.
set -eu
PACKAGES="chromium-headless-shell fonts-liberation libatomic1"
missing=""
for package in $PACKAGES; do
    if ! dpkg -s "$package" >/dev/null 2>&1; then
        missing="$missing $package"
    fi
done
if [ -z "$missing" ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install_browser.sh: missing$missing; run as root: sudo $0" >&2
    exit 1
fi
echo "install_browser.sh: installing$missing"
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $PACKAGES
