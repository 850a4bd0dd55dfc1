"""A stand-in server for the deploy tests: answers GET /_stcore/health with "ok" on HOST:PORT. As a replica it
fails like Streamlit on a taken port ("Port N is already in use", exit 1), and FAKE_REPLICA_EXIT=1 makes every
replica exit that way at once. Each start is recorded in $FAKE_MARKERS (a file per server, holding its pid) when set,
and a replica's PAGED_MAX_SESSIONS in $FAKE_ENV_DIR (a file per replica) when that is set."""

import http.server
import os
import sys

kind, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if os.environ.get("FAKE_MARKERS"):
    with open(os.path.join(os.environ["FAKE_MARKERS"], f"{kind}-{port}"), "w") as marker:
        marker.write(str(os.getpid()))
if kind == "replica" and os.environ.get("FAKE_ENV_DIR"):  # what the replica was told: its session limit
    with open(os.path.join(os.environ["FAKE_ENV_DIR"], f"{kind}-{port}"), "w") as told:
        told.write(os.environ.get("PAGED_MAX_SESSIONS", "(unset)"))
if kind == "replica" and os.environ.get("FAKE_REPLICA_EXIT") == "1":
    print(f"Port {port} is already in use", file=sys.stderr)
    sys.exit(1)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"ok" if self.path.startswith("/_stcore/health") else b"fake"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


try:
    server = http.server.HTTPServer((host, port), Health)
except OSError:
    print(f"Port {port} is already in use", file=sys.stderr)
    sys.exit(1)
server.serve_forever()
