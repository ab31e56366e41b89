#!/usr/bin/env bash
# Fetch the English text that docs/QUALITY.md measures perplexity on: the body of the Jargon File 4.4.7
# (Eric S. Raymond et al., public domain), as shipped in Debian's `jargon-text` package (version 4.4.7-4.1,
# file /usr/share/doc/jargon-text/jargon.txt.gz). We keep lines 121-12120 (from "Welcome to the Jargon
# File" on, skipping the table of contents): 393,883 bytes, 94k SmolLM2 tokens. Nothing large is committed;
# both the .deb and the extracted text are checked by sha256.
#   scripts/fetch_quality_text.sh [OUT]     (default OUT: build/quality/jargon.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/quality/jargon.txt}
DEB_SHA=17d05997e30eb3d5d6713929b8e2f81b63a5f50073858ad2a06701c71f54dcdb
TXT_SHA=96c4088c70d29225b84ace1b5a9442f812c7fe679867c6b2a8763f3592f8c37a
if [ -f "$OUT" ] && echo "$TXT_SHA  $OUT" | sha256sum -c --status; then exit 0; fi
mkdir -p "$(dirname "$OUT")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -q jargon-text=4.4.7-4.1 >/dev/null 2>&1) ||
    { echo "fetch_quality_text: apt-get download jargon-text=4.4.7-4.1 failed (run apt-get update?)" >&2; exit 1; }
echo "$DEB_SHA  $(ls "$tmp"/jargon-text_*.deb)" | sha256sum -c --status ||
    { echo "fetch_quality_text: sha256 mismatch of the jargon-text .deb" >&2; exit 1; }
dpkg-deb -x "$tmp"/jargon-text_*.deb "$tmp/x"
zcat "$tmp/x/usr/share/doc/jargon-text/jargon.txt.gz" | sed -n '121,12120p' > "$OUT.part"
echo "$TXT_SHA  $OUT.part" | sha256sum -c --status ||
    { echo "fetch_quality_text: sha256 mismatch of the extracted text" >&2; rm -f "$OUT.part"; exit 1; }
mv "$OUT.part" "$OUT"
echo "$OUT"
