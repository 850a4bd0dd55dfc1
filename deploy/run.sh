#!/usr/bin/env bash
# deploy/run.sh N PORT [RUN_DIR]: N Streamlit processes of the app behind one nginx, for a class that outgrows one.
#
#   replicas  127.0.0.1:PORT+1 ... 127.0.0.1:PORT+N   (each `streamlit run app.py --server.headless true ...`)
#   nginx     $BIND:PORT (BIND defaults to 127.0.0.1; BIND=0.0.0.0 to let the class in)
#
# Sticky sessions: a browser's first request gets a random `paged_replica` cookie from nginx, and every request
# (the page, its scripts, the websocket /_stcore/stream) is routed by `hash $cookie consistent`, so one browser
# always reaches the replica that holds its st.session_state. The websocket is proxied with Upgrade/Connection.
# Everything (config, pids, logs, nginx temp paths) lives in RUN_DIR (default: a new temp dir); nothing outside it
# is touched and no root is needed. Stop with: deploy/stop.sh RUN_DIR.
# Each pid file holds "PID START" (START: the process's start time, field 22 of /proc/PID/stat), so stop.sh stops
# only the very processes started here, never a later process that reused a pid.
# On any failure (a port taken, nginx refusing its config, a replica exiting, a health timeout) it says why on
# stderr, stops everything it started, and exits 1.
# Environment: PYTHON (default python3, the one with streamlit), NGINX_BIN (default: nginx on PATH or
# /usr/sbin/nginx; not NGINX, which nginx itself reads),
# BIND, HEALTH_TIMEOUT (seconds to wait for every replica and the proxy, default 120),
# PAGED_MAX_SESSIONS: learners the whole deployment holds at once (default 40 per replica); each replica gets its
#   share, ceil(total / N), as its own PAGED_MAX_SESSIONS (ui/capacity.py counts one process's sessions only),
# PAGED_CONN_PER_ADDR: connections nginx lets one client address hold at once (limit_conn; default: the total
#   above, so a class behind one NAT still fits, and a flood from one address is refused by nginx with a 503
#   instead of costing a replica a session per tab; where every learner has an address of their own, 4-8 is enough).
set -euo pipefail

usage() { echo "usage: $0 N PORT [RUN_DIR]   (N replicas on PORT+1..PORT+N, nginx on PORT)" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
n="$1"; port="$2"
[[ "$n" =~ ^[1-9][0-9]{0,1}$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 64 ] || { echo "N must be an integer in 1..64, got '$n'" >&2; exit 2; }
# Plain decimal, no leading zero: bash reads 08655 as octal (an error) and nginx would read it as 8655.
[[ "$port" =~ ^[1-9][0-9]{3,4}$ ]] && [ "$port" -ge 1024 ] && [ $((port + n)) -le 65535 ] ||
  { echo "PORT must be a decimal integer (no leading zero) with 1024 <= PORT and PORT + N <= 65535, got '$port'" >&2
    exit 2; }

whole() { [[ "$1" =~ ^[1-9][0-9]{0,5}$ ]]; }  # a decimal 1..999999, no sign, no leading zero
total="${PAGED_MAX_SESSIONS:-$((40 * n))}"
whole "$total" && [ "$total" -ge "$n" ] ||
  { echo "PAGED_MAX_SESSIONS must be a whole number of learners, at least N ($n: one per replica), got '$total'" >&2
    exit 2; }
per_replica=$(( (total + n - 1) / n ))
conn_per_addr="${PAGED_CONN_PER_ADDR:-$total}"
whole "$conn_per_addr" ||
  { echo "PAGED_CONN_PER_ADDR must be a whole number of connections, at least 1, got '$conn_per_addr'" >&2; exit 2; }

root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
nginx="${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}"
bind="${BIND:-127.0.0.1}"
timeout="${HEALTH_TIMEOUT:-120}"
[ -x "$nginx" ] || { echo "nginx not found (tried '$nginx'): apt-get install nginx, or set NGINX_BIN=/path/to/nginx" >&2; exit 1; }
"$python" -c "import streamlit" 2>/dev/null || { echo "'$python' cannot import streamlit: set PYTHON" >&2; exit 1; }

run_dir="${3:-$(mktemp -d "${TMPDIR:-/tmp}/paged-deploy.XXXXXX")}"
mkdir -p "$run_dir/tmp"
run_dir="$(cd "$run_dir" && pwd)"
if ls "$run_dir"/app-*.pid >/dev/null 2>&1 || [ -f "$run_dir/nginx.pid" ]; then
  echo "$run_dir already holds a running deployment: deploy/stop.sh $run_dir first" >&2; exit 1
fi
if [ -e "$run_dir/nginx.conf" ]; then  # someone's config (or an earlier run's): never overwritten
  echo "$run_dir/nginx.conf already exists: pick a new RUN_DIR, or move that file away" >&2; exit 1
fi

# --- every port free before anything starts (a taken one is named now, not after the health timeout) ---------
taken="$("$python" - "$bind" "$port" "$n" <<'PY'
import socket, sys
bind, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for host, p in [(bind, port)] + [("127.0.0.1", port + i) for i in range(1, n + 1)]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as nginx and tornado bind (TIME_WAIT is no conflict)
    try:
        s.bind((host, p))
    except OSError as err:
        print(f"{host}:{p} ({err.strerror})")
    finally:
        s.close()
PY
)"
[ -z "$taken" ] || { echo "port(s) already in use: $(echo $taken): pick another PORT" >&2; exit 1; }

start_time() {  # field 22 of /proc/PID/stat (after "PID (comm) ", which may hold spaces); 0 if PID is gone
  local stat; stat="$(cat "/proc/$1/stat" 2>/dev/null)" || { echo 0; return; }
  set -- ${stat##*) }; echo "${20}"
}
succeeded=0 failed_cmd="" failed_line=""
fail() {  # say why on stderr, stop everything started so far (stop.sh reads the pid files), exit 1
  trap - EXIT
  echo "deploy/run.sh: $*" >&2
  echo "stopping what this run started (logs kept in $run_dir)" >&2
  "$(dirname "$0")/stop.sh" "$run_dir" >&2 || true
  exit 1
}
trap 'failed_cmd="$BASH_COMMAND" failed_line="$LINENO"' ERR
trap 'rc=$?; [ "$succeeded" = 1 ] || fail "failed (exit status $rc) at line $failed_line: $failed_cmd"' EXIT

# --- the replicas: each in its own session (setsid), stdio in its log, so it outlives this script -------------
servers=""
for i in $(seq 1 "$n"); do
  p=$((port + i))
  (cd "$root" && PAGED_MAX_SESSIONS="$per_replica" exec setsid "$python" -m streamlit run app.py \
      --server.headless true --server.port "$p" \
      --server.address 127.0.0.1 --browser.gatherUsageStats false --server.fileWatcherType none \
      --server.runOnSave false </dev/null >"$run_dir/app-$i.log" 2>&1) &
  echo "$! $(start_time $!)" >"$run_dir/app-$i.pid"
  servers+="        server 127.0.0.1:$p max_fails=0;"$'\n'
done

# --- nginx: its config, pid, logs and temp files all in RUN_DIR ----------------------------------------------
user_line=""
[ "$(id -u)" = 0 ] && user_line="user $(id -un) $(id -gn);"  # as root, workers would otherwise run as nobody
cat >"$run_dir/nginx.conf" <<CONF
# Written by deploy/run.sh for $n replicas (PAGED_MAX_SESSIONS=$per_replica each, $total in all);
# nginx -p $run_dir -c $run_dir/nginx.conf
$user_line
worker_processes auto;
pid $run_dir/nginx.pid;
error_log $run_dir/error.log warn;
events { worker_connections 4096; }

http {
    client_body_temp_path $run_dir/tmp/client_body;
    proxy_temp_path $run_dir/tmp/proxy;
    fastcgi_temp_path $run_dir/tmp/fastcgi;
    uwsgi_temp_path $run_dir/tmp/uwsgi;
    scgi_temp_path $run_dir/tmp/scgi;
    log_format paged '\$remote_addr [\$time_local] "\$request" \$status upstream=\$upstream_addr '
                     'sticky=\$paged_sticky rt=\$request_time';
    access_log $run_dir/access.log paged;

    # One client address holds at most $conn_per_addr connections at once (each open tab keeps its websocket).
    limit_conn_zone \$binary_remote_addr zone=paged_per_addr:10m;
    limit_conn_log_level warn;

    # A browser without the cookie is routed by a fresh random key, and gets that key as its cookie.
    map \$cookie_paged_replica \$paged_sticky {
        ""      \$request_id;
        default \$cookie_paged_replica;
    }
    map \$cookie_paged_replica \$paged_set_cookie {
        ""      "paged_replica=\$request_id; Path=/; HttpOnly; SameSite=Lax";
        default "";
    }
    map \$http_upgrade \$connection_upgrade {
        default upgrade;
        ""      close;
    }

    upstream paged_app {
        hash \$paged_sticky consistent;
$servers    }

    server {
        listen $bind:$port;
        proxy_http_version 1.1;
        proxy_set_header Host \$http_host;
        proxy_set_header X-Real-IP \$remote_addr;
        proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
        add_header Set-Cookie \$paged_set_cookie always;  # an empty value adds no header
        limit_conn paged_per_addr $conn_per_addr;

        location /_stcore/stream {  # the websocket that carries every rerun of a session
            proxy_pass http://paged_app;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection \$connection_upgrade;
            proxy_read_timeout 1d;
            proxy_send_timeout 1d;
            proxy_buffering off;
        }
        location / {
            proxy_pass http://paged_app;
        }
    }
}
CONF
env -u NGINX "$nginx" -t -q -p "$run_dir" -c "$run_dir/nginx.conf" -e "$run_dir/error.log" 2>>"$run_dir/error.log" ||
  fail "nginx refused its config ($run_dir/nginx.conf): $(tail -n 3 "$run_dir/error.log" | tr '\n' ' ')"
env -u NGINX "$nginx" -p "$run_dir" -c "$run_dir/nginx.conf" -e "$run_dir/error.log" </dev/null >/dev/null \
    2>>"$run_dir/error.log" || fail "nginx did not start: $(tail -n 3 "$run_dir/error.log" | tr '\n' ' ')"
for _ in $(seq 1 40); do [ -s "$run_dir/nginx.pid" ] && break; sleep 0.05; done
[ -s "$run_dir/nginx.pid" ] || fail "nginx started but wrote no pid file: $(tail -n 3 "$run_dir/error.log" | tr '\n' ' ')"
nginx_pid="$(cat "$run_dir/nginx.pid")"
echo "$nginx_pid $(start_time "$nginx_pid")" >"$run_dir/nginx.started"  # nginx owns nginx.pid; this is ours

# --- wait until every replica and the proxy answer /_stcore/health ------------------------------------------
healthy() { "$python" - "$1" <<'PY'
import sys, urllib.request
try:
    sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=2).read() == b"ok" else 1)
except OSError:
    sys.exit(1)
PY
}
proxy_host="$bind"; [ "$bind" = 0.0.0.0 ] && proxy_host=127.0.0.1
alive() { [ -d "/proc/$1" ] && [ "$(start_time "$1")" = "$2" ] && ! grep -q '^State:.*Z' "/proc/$1/status"; }
all_alive() {  # every process started here still runs; else fail naming it and the end of its log
  local f pid start log
  for f in "$run_dir"/app-*.pid "$run_dir/nginx.started"; do
    [ -f "$f" ] || continue
    read -r pid start <"$f"
    log="$run_dir/$(basename "$f" .pid).log"; [ "$f" = "$run_dir/nginx.started" ] && log="$run_dir/error.log"
    alive "$pid" "$start" ||
      fail "$(basename "$f") (pid $pid) exited before answering: $(tail -n 3 "$log" 2>/dev/null | tr '\n' ' ')"
  done
}
deadline=$((SECONDS + timeout))
for url in $(for i in $(seq 1 "$n"); do echo "http://127.0.0.1:$((port + i))/_stcore/health"; done) \
           "http://$proxy_host:$port/_stcore/health"; do
  until healthy "$url"; do
    all_alive  # a replica that could not bind its port (or crashed) is reported at once, not at the deadline
    [ $SECONDS -lt $deadline ] || fail "not healthy after ${timeout}s: $url"
    sleep 0.5
  done
done
succeeded=1
echo "url http://$proxy_host:$port/"
echo "sessions $per_replica per replica ($total in all), $conn_per_addr connections per client address"
echo "run_dir $run_dir"
echo "stop: $(dirname "$0")/stop.sh $run_dir"
