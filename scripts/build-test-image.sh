#!/usr/bin/env bash
# Builds crashpoint's Debian test image, which owes nothing to the host: a minimal Debian
# root made by debootstrap, with Node.js from Debian's own packages, `docker import`ed as
# crashpoint-debian-node:$RECIPE (and :$RECIPE-<suite>). The Node example's Dockerfile
# builds on it (examples/node-worker/Dockerfile).
#
# The mirror and the suite are the machine's own, read from its apt sources at run time
# (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list and *.sources), so the script
# fetches from wherever this machine already fetches its packages.
#
# Cached outside the repository: the root's tarball in $CRASHPOINT_CACHE (default
# ~/.cache/crashpoint), the image in the engine. Idempotent: an existing image is kept, an
# existing tarball is imported without a new debootstrap. Prints the image reference on
# stdout; progress and timings go to stderr.
# Usage: scripts/build-test-image.sh [--force]
set -euo pipefail

# Bump when the recipe (packages, layout) changes: the tag names the recipe, not the date.
RECIPE=1
PACKAGES=nodejs
REPO=crashpoint-debian-node
cache=${CRASHPOINT_CACHE:-$HOME/.cache/crashpoint}
force=0
[ "${1:-}" = "--force" ] && force=1

log() { printf '[build-test-image] %s\n' "$*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
t0=$(now)
ref="$REPO:$RECIPE"

command -v docker >/dev/null && docker info >/dev/null 2>&1 ||
  { log "no Docker engine answers; run scripts/install-infra.sh docker first"; exit 1; }

if [ $force -eq 0 ] && docker image inspect "$ref" >/dev/null 2>&1; then
  log "$ref exists; nothing to do ($(since "$t0") s)"
  echo "$ref"
  exit 0
fi

# The host's Debian archive: the first "deb" source whose suite is the host's codename and
# that has the main component, in one-line (.list) or deb822 (.sources) form.
. /etc/os-release
suite=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release; this needs a Debian host}
sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [options] URI SUITE COMPONENTS...
    sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" { print $2, $3, substr($0, index($0, $4)) }'
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # Stanzas separated by blank lines; print one "URI SUITES... | COMPONENTS..." per URI.
    awk '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && enabled != "no")
          for (i = 1; i <= nu; i++) print uri[i], "|" suites "|", comps
        types = ""; nu = 0; suites = ""; comps = ""; enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      {
        key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
        if (key == "types") types = $0
        else if (key == "uris") nu = split($0, uri, " ")
        else if (key == "suites") suites = " " $0 " "
        else if (key == "components") comps = $0
        else if (key == "enabled") enabled = tolower($0)
      }
      END { flush() }' "$f" |
      awk -F'|' -v s="$suite" 'index($2, " " s " ") { split($1, u, " "); print u[1], s, $3 }'
  done
}
mirror=$(sources | awk -v s="$suite" '$2 == s && / main( |$)/ { print $1; exit }')
[ -n "$mirror" ] ||
  { log "no 'deb' source for suite $suite with component main in the apt sources"; exit 1; }

tarball="$cache/debian-node-$suite-r$RECIPE.tar"
mkdir -p "$cache"
if [ $force -eq 1 ] || [ ! -s "$tarball" ]; then
  command -v debootstrap >/dev/null || {
    log "apt-get install debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  root=$(mktemp -d "$cache/root.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  chmod 755 "$root"  # the image's /: mktemp's 0700 would lock every other user out
  log "debootstrap $suite from $mirror with $PACKAGES (minbase)"
  t1=$(now)
  debootstrap --variant=minbase --include="$PACKAGES" "$suite" "$root" "$mirror" \
    >"$cache/debootstrap.log" 2>&1 ||
    { log "debootstrap failed; see $cache/debootstrap.log"; tail -5 "$cache/debootstrap.log" >&2; exit 1; }
  log "debootstrap took $(since "$t1") s"
  # What an image needs no more of: package caches and lists, docs, man pages.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
  chroot "$root" node --version >/dev/null ||
    { log "node does not run inside the new root"; exit 1; }
  tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$root"
  trap - EXIT
else
  log "reusing $tarball"
fi

t2=$(now)
node_version=$(tar -xOf "$tarball" ./var/lib/dpkg/status |
  awk '/^Package: nodejs$/ { p = 1 } p && /^Version:/ { print $2; exit }')
docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["node"]' \
  --message "crashpoint test image: Debian $suite minbase, nodejs $node_version" \
  "$tarball" "$ref" >/dev/null
docker tag "$ref" "$REPO:$RECIPE-$suite"
log "imported $ref (nodejs $node_version) in $(since "$t2") s; total $(since "$t0") s"
echo "$ref"
