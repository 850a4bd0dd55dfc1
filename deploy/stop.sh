#!/usr/bin/env bash
# deploy/stop.sh RUN_DIR: stop what deploy/run.sh started there (nginx, then every replica), by their pid files.
# Only processes whose pid files are in RUN_DIR, and only while they still run what run.sh started.
set -uo pipefail
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: $0 RUN_DIR (the directory deploy/run.sh printed)" >&2; exit 2; }
run_dir="$(cd "$1" && pwd)"
nginx="${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}"

runs() {  # pid $1 alive and its command line contains $2
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q -- "$2"
}
stop_pid() {  # TERM, wait up to 10 s, then KILL
  local pid="$1" what="$2"
  runs "$pid" "$what" || return 0
  kill "$pid" 2>/dev/null
  for _ in $(seq 1 40); do runs "$pid" "$what" || return 0; sleep 0.25; done
  echo "pid $pid ($what) ignored TERM: KILL" >&2
  kill -9 "$pid" 2>/dev/null
}

if [ -f "$run_dir/nginx.pid" ]; then
  pid="$(cat "$run_dir/nginx.pid")"
  env -u NGINX "$nginx" -p "$run_dir" -c "$run_dir/nginx.conf" -e "$run_dir/error.log" -s stop 2>/dev/null || true
  for _ in $(seq 1 40); do runs "$pid" nginx || break; sleep 0.25; done
  stop_pid "$pid" nginx
  rm -f "$run_dir/nginx.pid"
fi
for f in "$run_dir"/app-*.pid; do
  [ -f "$f" ] || continue
  stop_pid "$(cat "$f")" streamlit
  rm -f "$f"
done
echo "stopped (logs kept in $run_dir)"
