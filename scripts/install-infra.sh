#!/usr/bin/env bash
# Installs and starts what the process tier needs: the Toxiproxy server, PostgreSQL,
# Redis (the examples' broker), the Docker engine, headless Chromium and xmllint, socat (the
# shell failpoint client's link to the harness's UNIX socket), the Node.js dependencies of
# examples/bullmq-worker, libfaketime and stress-ng (clock-skew cells, runs under load), the
# Debian test image the [target.docker] tests run in (scripts/build-test-image.sh; needs the
# engine), actionlint (checks docs/ci/ and action.yml in `nox -s lint`) and kubeconform
# (checks docs/k8s/ there). Idempotent: every step checks first.
# Usage: scripts/install-infra.sh [toxiproxy|postgres|redis|npm|docker|browser|socat|faketime|image|actionlint|kubeconform|all]...
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${CRASHPOINT_CACHE:-$HOME/.cache/crashpoint}
state=${CRASHPOINT_INFRA_DIR:-/var/tmp/crashpoint-infra}
mkdir -p "$cache" "$state"
TOXIPROXY_VERSION=2.12.0
ACTIONLINT_VERSION=1.7.12
KUBECONFORM_VERSION=0.6.7

log() { printf '[install-infra] %s\n' "$*" >&2; }
timed() {  # timed NAME CMD...: runs CMD and says how long it took
  local name=$1 t0 t1; shift
  t0=$(date +%s.%N)
  "$@"
  t1=$(date +%s.%N)
  log "$(printf '%s took %.1f s' "$name" "$(echo "$t1 - $t0" | bc)")"
}

apt_updated=0
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ $apt_updated -eq 0 ]; then apt-get update -qq; apt_updated=1; fi
  log "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

toxiproxy() {
  local bin="$cache/toxiproxy-$TOXIPROXY_VERSION/toxiproxy-server"
  if [ -x "$bin" ]; then log "toxiproxy: cached at $bin"; return 0; fi
  command -v go >/dev/null || { log "toxiproxy: no Go toolchain; network scenarios will be skipped"; return 0; }
  local gobin="$cache/toxiproxy-$TOXIPROXY_VERSION/gobin"
  mkdir -p "$gobin"
  GOBIN="$gobin" GOFLAGS=-buildvcs=false go install \
    -ldflags "-X github.com/Shopify/toxiproxy/v2.Version=$TOXIPROXY_VERSION" \
    "github.com/Shopify/toxiproxy/v2/cmd/server@v$TOXIPROXY_VERSION"
  # go install names the binary after its package directory ("server").
  mv "$gobin/server" "$bin"
  rmdir "$gobin" 2>/dev/null || true
  log "toxiproxy: built $bin"
}

actionlint() {
  # actionlint checks the workflows' run: scripts with shellcheck.
  apt_install shellcheck
  local dir="$cache/actionlint-$ACTIONLINT_VERSION" bin
  bin="$dir/actionlint"
  if [ -x "$bin" ]; then log "actionlint: cached at $bin"; return 0; fi
  command -v go >/dev/null || { log "actionlint: no Go toolchain; nox -s lint will not check the workflows"; return 0; }
  mkdir -p "$dir"
  GOBIN="$dir" GOFLAGS=-buildvcs=false go install \
    "github.com/rhysd/actionlint/cmd/actionlint@v$ACTIONLINT_VERSION"
  log "actionlint: built $bin"
}

kubeconform() {
  local dir="$cache/kubeconform-$KUBECONFORM_VERSION" bin
  bin="$dir/kubeconform"
  if [ -x "$bin" ]; then log "kubeconform: cached at $bin"; return 0; fi
  command -v go >/dev/null || { log "kubeconform: no Go toolchain; nox -s lint will not check docs/k8s/"; return 0; }
  mkdir -p "$dir"
  GOBIN="$dir" GOFLAGS="-mod=mod -buildvcs=false" go install \
    "github.com/yannh/kubeconform/cmd/kubeconform@v$KUBECONFORM_VERSION"
  log "kubeconform: built $bin"
}

postgres() {
  apt_install postgresql bc
  local ver cluster
  ver=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf "%f\n" | sort -n | tail -1)
  cluster=main
  if ! pg_lsclusters -h | grep -q "^$ver $cluster "; then
    pg_createcluster "$ver" "$cluster" >/dev/null
  fi
  if ! pg_lsclusters -h | awk -v v="$ver" -v c="$cluster" '$1==v && $2==c {print $4}' | grep -q online; then
    pg_ctlcluster "$ver" "$cluster" start
  fi
  su postgres -c "psql -qtAc \"SELECT 1 FROM pg_roles WHERE rolname='crashpoint'\"" | grep -q 1 ||
    su postgres -c "psql -qc \"CREATE ROLE crashpoint LOGIN SUPERUSER PASSWORD 'crashpoint'\""
  su postgres -c "psql -qtAc \"SELECT 1 FROM pg_database WHERE datname='crashpoint'\"" | grep -q 1 ||
    su postgres -c "createdb -O crashpoint crashpoint"
  log "postgres: $ver/$cluster online; CRASHPOINT_PG_DSN=postgresql://crashpoint:crashpoint@127.0.0.1:5432/crashpoint"
}

redis() {
  apt_install redis-server
  if redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then
    log "redis: already answering on 127.0.0.1:6379"; return 0
  fi
  # Loopback only and nothing on disk: the examples keep their durable state in the
  # trial's own directory, and Redis is only their broker.
  redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --save '' --appendonly no \
    --dir "$state" --logfile "$state/redis.log" --pidfile "$state/redis.pid"
  for _ in $(seq 1 50); do
    redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG && break
    sleep 0.1
  done
  redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG ||
    { log "redis: redis-server did not start; see $state/redis.log"; return 1; }
  log "redis: $(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p') on 127.0.0.1:6379; REDIS_URL=redis://127.0.0.1:6379/0"
}

npm_deps() {
  command -v npm >/dev/null || { log "npm: no npm on PATH; the Node.js examples and SDK tests cannot run"; return 0; }
  # Each folder with a lock file: the BullMQ example, the SDK example (stripe, resend),
  # the SMTP example (nodemailer), and the vendors' Node.js SDKs the persona tests drive
  # (tests/sdk-node).
  local dir
  for dir in "$here/../examples/bullmq-worker" "$here/../examples/node-sdk-worker" "$here/../examples/smtp-node-worker" "$here/../tests/sdk-node"; do
    [ -f "$dir/package-lock.json" ] || { log "npm: no $dir/package-lock.json"; continue; }
    if [ -d "$dir/node_modules" ] && [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
      log "npm: $dir/node_modules is up to date"; continue
    fi
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    log "npm: installed $dir/node_modules"
  done
}

docker_engine() {
  apt_install docker.io
  if docker info >/dev/null 2>&1; then
    log "docker: engine already running ($(docker info -f '{{.Driver}}' 2>/dev/null) storage)"; return 0
  fi
  # No bridge or iptables on this kind of machine: containers use the host network.
  # overlay2 shares the image's layers between its containers; vfs, where the kernel or
  # the filesystem refuses overlay, copies the image's whole root into each new one
  # (the 172 MB test image: about 0.6 s of the engine's CPU per container).
  local driver pid
  : >"$state/dockerd.log"
  for driver in overlay2 vfs; do
    nohup dockerd --iptables=false --ip-masq=false --bridge=none --storage-driver="$driver" \
      >>"$state/dockerd.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do
      docker info >/dev/null 2>&1 && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if docker info >/dev/null 2>&1; then log "docker: engine running ($driver storage)"; return 0; fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    log "docker: dockerd did not start with $driver storage"
  done
  log "docker: dockerd did not start; see $state/dockerd.log"
  return 1
}

browser() {
  apt_install chromium libxml2-utils
  log "browser: $(chromium --version 2>/dev/null || echo missing)"
}

socat_tool() {
  apt_install socat
  log "socat: $(socat -V | grep -m1 'socat version' || echo missing)"
}

faketime_lib() {
  # Clock-skew cells preload it per worker, after a small C shim (harness/faketime_shim.py,
  # built by gcc) that keeps Python's monotonic sleeps working; stress-ng loads both cores
  # for the no-false-positive runs under load.
  apt_install libfaketime stress-ng gcc libc6-dev
  local lib
  lib=$(dpkg -L libfaketime 2>/dev/null | grep -m1 'libfaketime.so.1$' || true)
  log "faketime: ${lib:-missing}; stress-ng: $(stress-ng --version 2>/dev/null | head -1 || echo missing)"
}

test_image() {
  apt_install debootstrap
  # Cached: the image in the engine, the root's tarball in $cache (kept between CI runs).
  CRASHPOINT_CACHE=$cache bash "$here/build-test-image.sh" >/dev/null
}

[ $# -eq 0 ] && set -- all
for what in "$@"; do
  case $what in
    toxiproxy) timed toxiproxy toxiproxy ;;
    postgres) timed postgres postgres ;;
    redis) timed redis redis ;;
    npm) timed npm npm_deps ;;
    docker) timed docker docker_engine ;;
    browser) timed browser browser ;;
    socat) timed socat socat_tool ;;
    faketime) timed faketime faketime_lib ;;
    image) timed image test_image ;;
    actionlint) apt_install bc; timed actionlint actionlint ;;
    kubeconform) apt_install bc; timed kubeconform kubeconform ;;
    all) apt_install bc; timed toxiproxy toxiproxy; timed postgres postgres; timed redis redis; timed npm npm_deps; timed docker docker_engine; timed browser browser; timed socat socat_tool; timed faketime faketime_lib; timed image test_image; timed actionlint actionlint; timed kubeconform kubeconform ;;
    *) log "unknown component '$what' (expected toxiproxy, postgres, redis, npm, docker, browser, socat, faketime, image, actionlint, kubeconform or all)"; exit 2 ;;
  esac
done
