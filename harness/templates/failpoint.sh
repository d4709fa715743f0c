# crashpoint's failpoint client for POSIX sh (docs/failpoints.md); needs socat(1).
# Source it, then call:   failpoint after_claim "$job" "$attempt"
# and, once a job's end is durable:   job_end "$job" done "$attempt"
# Unset CRASHPOINT_FAILPOINTS: returns at once. If the harness goes away: failpoints off.
# It keeps one connection open through socat on file descriptors 8 and 9 (leave them be);
# point and job must not hold quotes or backslashes (they are written into JSON as is).
failpoint() {
  [ -n "${CRASHPOINT_FAILPOINTS:-}" ] || return 0
  if [ -z "${_fp_open:-}" ]; then
    command -v socat >/dev/null 2>&1 || { echo "failpoint: no socat; failpoints off" >&2; CRASHPOINT_FAILPOINTS=; return 0; }
    _fp_dir=$(mktemp -d) && mkfifo "$_fp_dir/in" "$_fp_dir/out" || { CRASHPOINT_FAILPOINTS=; return 0; }
    socat - "UNIX-CONNECT:$CRASHPOINT_FAILPOINTS" <"$_fp_dir/in" >"$_fp_dir/out" 2>/dev/null &
    exec 8>"$_fp_dir/in" 9<"$_fp_dir/out"
    rm -r "$_fp_dir"  # the open descriptors keep both pipes alive
    _fp_open=1
  fi
  _fp_extra=${CRASHPOINT_WORKER_ID:+,\"worker\":\"$CRASHPOINT_WORKER_ID\"}${4:+,\"outcome\":\"$4\"}
  # Under bash, the caller's file and line (a report points there); other shells have none.
  # eval: a POSIX shell must not parse bash's array syntax.
  _fp_at=
  [ -z "${BASH_VERSION:-}" ] || eval '_fp_at=",\"file\":\"${BASH_SOURCE[1]:-}\",\"line\":${BASH_LINENO[0]:-0}"'
  # A subshell ignores SIGPIPE, so a harness that went away fails the write, not the worker.
  if (trap '' PIPE; printf '{"point":"%s","job":"%s","attempt":%d,"pid":%d%s%s}\n' \
      "$1" "$2" "$3" "$$" "$_fp_extra" "$_fp_at" >&8) 2>/dev/null && read -r _fp_reply <&9; then
    return 0
  fi
  CRASHPOINT_FAILPOINTS=; exec 8>&- 9<&-
}
# The job has ended: outcome done, needs_review or dead_lettered.
job_end() { failpoint job_end "$1" "$3" "$2"; }
