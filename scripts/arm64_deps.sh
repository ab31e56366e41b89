#!/bin/sh
# Unpacks libevent's arm64 development files and libraries into DIR (default build-arm64-deps) for the
# cross build (cmake/aarch64-linux-gnu.cmake). libevent-dev is not a multiarch package: installing
# libevent-dev:arm64 with apt would remove the host's libevent-dev. The other arm64 libraries are multiarch
# packages that `make apt-arm64` installs. Does nothing when DIR already holds them.
set -eu
dir=$(realpath -m "${1:-build-arm64-deps}")
pc="$dir/usr/lib/aarch64-linux-gnu/pkgconfig"
[ -f "$pc/libevent_pthreads.pc" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp" # apt-get download writes as the _apt user when it can
(cd "$tmp" && apt-get download -qq libevent-dev:arm64 libevent-2.1-7:arm64 libevent-core-2.1-7:arm64 \
    libevent-extra-2.1-7:arm64 libevent-pthreads-2.1-7:arm64 libevent-openssl-2.1-7:arm64 2>&1 |
    grep -v "unsandboxed" || true)
for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$dir"; done
# The .pc files say prefix=/usr; point them at DIR so that the headers (event-config.h is per architecture)
# and libraries come from there.
sed -i "s|^prefix=/usr\$|prefix=$dir/usr|" "$pc"/libevent*.pc
echo "arm64 libevent unpacked into $dir"
