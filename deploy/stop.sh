#!/usr/bin/env bash
# deploy/stop.sh RUN_DIR: stop what deploy/run.sh started there (nginx, then every replica), by its pid files.
#
# Only the very processes run.sh started: each pid file holds "PID START", START being the process's start time
# (field 22 of /proc/PID/stat) read when run.sh started it. A pid whose process now has another start time (the
# old one exited and the pid was reused, by anything, a streamlit of someone else's included) is left alone, and
# so is a pid file without a start time (not written by this run.sh). Safe to run twice.
set -uo pipefail
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: $0 RUN_DIR (the directory deploy/run.sh printed)" >&2; exit 2; }
run_dir="$(cd "$1" && pwd)"

start_time() {  # as in run.sh; 0 when the pid is gone
  local stat; stat="$(cat "/proc/$1/stat" 2>/dev/null)" || { echo 0; return; }
  set -- ${stat##*) }; echo "${20}"
}
ours() {  # pid $1 still runs the process started at $2 (and is not a zombie)
  [ -n "$2" ] && [ "$(start_time "$1")" = "$2" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}
stop_pid() {  # TERM, wait up to 10 s, then KILL; only while the pid is still the process run.sh started
  local pid="$1" start="$2" what="$3"
  [[ "$pid" =~ ^[1-9][0-9]*$ ]] || { echo "$what: '$pid' is not a pid: left alone" >&2; return 0; }
  if [ -z "$start" ]; then
    echo "$what: pid $pid has no recorded start time (not written by deploy/run.sh): left alone" >&2; return 0
  fi
  ours "$pid" "$start" || return 0  # already gone, or the pid now belongs to another process
  kill "$pid" 2>/dev/null
  for _ in $(seq 1 40); do ours "$pid" "$start" || return 0; sleep 0.25; done
  echo "pid $pid ($what) ignored TERM: KILL" >&2
  kill -9 "$pid" 2>/dev/null
}

if [ -f "$run_dir/nginx.started" ]; then  # nginx's master, as run.sh recorded it (nginx.pid is nginx's own file)
  read -r pid start _ <"$run_dir/nginx.started"
  stop_pid "$pid" "${start:-}" nginx  # TERM: nginx's fast shutdown (its workers exit with the master)
  rm -f "$run_dir/nginx.started" "$run_dir/nginx.pid"
elif [ -f "$run_dir/nginx.pid" ]; then
  echo "nginx: $run_dir/nginx.pid has no nginx.started beside it (not recorded by deploy/run.sh): left alone" >&2
fi
for f in "$run_dir"/app-*.pid; do
  [ -f "$f" ] || continue
  read -r pid start _ <"$f"
  stop_pid "$pid" "${start:-}" "replica $(basename "$f" .pid)"
  rm -f "$f"
done
echo "stopped (logs kept in $run_dir)"
