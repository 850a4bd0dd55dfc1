"""deploy/run.sh and deploy/stop.sh when things go wrong, with stand-ins for Streamlit and nginx (tests/deploy/fakes:
tiny health servers), so no browser, model or real nginx is needed: a port written 08655 is refused; a taken
proxy or replica port is named before anything starts; a replica that exits or an nginx that fails is explained
on stderr and everything started is stopped; an existing nginx.conf is never overwritten; stop.sh stops only the
processes run.sh started (matching start time), never a pid that was reused, whatever its command line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import free_port_block

ROOT = Path(__file__).resolve().parents[2]
FAKES = Path(__file__).resolve().parent / "fakes"
RUN, STOP = ROOT / "deploy" / "run.sh", ROOT / "deploy" / "stop.sh"
GUARD_S = 120  # a hang guard only: every case here ends in a few seconds; HEALTH_TIMEOUT is set far above it


@pytest.fixture
def env(tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    return {**os.environ, "PYTHON": str(FAKES / "python"), "NGINX_BIN": str(FAKES / "nginx"),
            "FAKE_REAL_PYTHON": sys.executable, "FAKE_MARKERS": str(markers), "HEALTH_TIMEOUT": "900"}


def run(args, env, **extra) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(RUN), *map(str, args)], env={**env, **extra}, capture_output=True,
                          text=True, timeout=GUARD_S)


def start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0]
    except (OSError, IndexError):
        return False


def started(env) -> list[str]:
    """The stand-in servers that ever started (replica-PORT, nginx-PORT)."""
    return sorted(os.listdir(env["FAKE_MARKERS"]))


def marker_pids(env) -> list[int]:
    return [int((Path(env["FAKE_MARKERS"]) / name).read_text() or 0) for name in started(env)]


@pytest.fixture
def cleanup():
    """Processes a test started itself, killed at the end whatever happened."""
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_a_port_with_a_leading_zero_is_refused(tmp_path, env):
    """08655 (octal-looking, read as 8655 by nginx) is refused at validation, by name; nothing starts."""
    out = run([1, "08655", tmp_path / "run"], env)
    assert out.returncode == 2 and "leading zero" in out.stderr and "08655" in out.stderr, out.stderr
    out = run(["01", 8655, tmp_path / "run"], env)
    assert out.returncode == 2 and "N must be" in out.stderr
    assert started(env) == []


@pytest.mark.parametrize("which", ["proxy", "replica"])
def test_a_taken_port_is_named_before_anything_starts(tmp_path, env, which):
    """With PORT (nginx's) or PORT + 2 (replica 2's) held by another socket, run.sh exits 1 naming it, before
    starting any replica (so it never waits for a health timeout) and leaves no pid file."""
    port = free_port_block(2)
    held = port if which == "proxy" else port + 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", held))
        s.listen()
        out = run([2, port, tmp_path / "run"], env)
    assert out.returncode == 1 and f"127.0.0.1:{held}" in out.stderr and "in use" in out.stderr, out.stderr
    assert started(env) == [] and not list((tmp_path / "run").glob("*.pid"))


def test_a_replica_that_exits_is_reported_and_the_others_stopped(tmp_path, env):
    """A replica that dies at start (as one does on a port taken meanwhile) is named with its log's last words,
    long before HEALTH_TIMEOUT; every process started is stopped and its pid file removed."""
    port = free_port_block(2)
    run_dir = tmp_path / "run"
    out = run([2, port, run_dir], env, FAKE_REPLICA_EXIT="1")
    assert out.returncode == 1, out.stderr
    assert "exited before answering" in out.stderr and f"Port {port + 1} is already in use" in out.stderr
    assert not list(run_dir.glob("*.pid")) and not list(run_dir.glob("nginx.started"))
    assert not any(alive(pid) for pid in marker_pids(env)), "a process was left running"


@pytest.mark.parametrize("failure", ["config", "start"])
def test_an_nginx_failure_is_explained_and_the_replicas_stopped(tmp_path, env, failure):
    """nginx refusing its config or failing to start: stderr carries nginx's own [emerg] line, both replicas
    (which were running) are stopped and their pid files removed."""
    port = free_port_block(2)
    run_dir = tmp_path / "run"
    out = run([2, port, run_dir], env, FAKE_NGINX_FAIL=failure)
    assert out.returncode == 1 and "[emerg]" in out.stderr and "nginx" in out.stderr, out.stderr
    assert not list(run_dir.glob("*.pid"))
    assert not any(alive(pid) for pid in marker_pids(env)), "a replica was left running"
    assert "stopping what this run started" in out.stderr


def test_an_existing_nginx_conf_is_never_overwritten(tmp_path, env):
    """A run dir that already holds an nginx.conf is refused, the file untouched, nothing started."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "nginx.conf").write_text("# the operator's own\n")
    out = run([1, free_port_block(1), run_dir], env)
    assert out.returncode == 1 and "nginx.conf already exists" in out.stderr
    assert (run_dir / "nginx.conf").read_text() == "# the operator's own\n" and started(env) == []


def test_a_good_run_starts_everything_and_stop_sh_stops_exactly_that(tmp_path, env):
    """Two replicas and the proxy answer; each pid file holds the pid and its start time; stop.sh stops all
    three and removes the pid files."""
    port = free_port_block(2)
    run_dir = tmp_path / "run"
    out = run([2, port, run_dir], env)
    assert out.returncode == 0, out.stderr
    assert f"url http://127.0.0.1:{port}/" in out.stdout
    files = sorted(run_dir.glob("app-*.pid")) + [run_dir / "nginx.started"]
    pids = []
    for f in files:
        pid, start = f.read_text().split()
        assert alive(int(pid)) and start_time(int(pid)) == start
        pids.append(int(pid))
    stop = subprocess.run(["bash", str(STOP), str(run_dir)], env=env, capture_output=True, text=True,
                          timeout=GUARD_S)
    assert stop.returncode == 0, stop.stderr
    assert not any(alive(p) for p in pids) and not list(run_dir.glob("*.pid"))


def test_stop_sh_leaves_a_reused_pid_alone_whatever_its_command_line(tmp_path, env, cleanup):
    """Stale pid files naming live processes whose command lines contain "streamlit": one with another start time
    (the pid was reused), one with no start time (an old-format file); stop.sh leaves both running. A third file
    with the right start time is stopped: the check is what decides, not the name."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    imposters = [subprocess.Popen(["bash", "-c", "exec -a streamlit-run-app.py sleep 300"]) for _ in range(3)]
    cleanup.extend(imposters)
    a, b, c = imposters
    (run_dir / "app-1.pid").write_text(f"{a.pid} {int(start_time(a.pid)) - 1}\n")
    (run_dir / "app-2.pid").write_text(f"{b.pid}\n")
    (run_dir / "app-3.pid").write_text(f"{c.pid} {start_time(c.pid)}\n")
    assert "streamlit" in Path(f"/proc/{a.pid}/cmdline").read_text()
    stop = subprocess.run(["bash", str(STOP), str(run_dir)], env=env, capture_output=True, text=True,
                          timeout=GUARD_S)
    assert stop.returncode == 0, stop.stderr
    assert alive(a.pid) and alive(b.pid), "stop.sh killed a process it did not start"
    assert c.wait(timeout=GUARD_S) == -signal.SIGTERM
    assert "no recorded start time" in stop.stderr


def test_the_session_limit_is_split_across_replicas_and_nginx_caps_one_address(tmp_path, env):
    """PAGED_MAX_SESSIONS=5 for 2 replicas: each replica is started with PAGED_MAX_SESSIONS=3 (ceil(5 / 2)); the
    nginx config limits one client address to PAGED_CONN_PER_ADDR=7 connections (limit_conn on a per-address
    zone) in the server that proxies everything; stop.sh stops it all."""
    port, told = free_port_block(2), tmp_path / "told"
    told.mkdir()
    run_dir = tmp_path / "run"
    out = run([2, port, run_dir], env, PAGED_MAX_SESSIONS="5", PAGED_CONN_PER_ADDR="7", FAKE_ENV_DIR=str(told))
    try:
        assert out.returncode == 0, out.stderr
        assert {f.name: f.read_text() for f in told.iterdir()} == {f"replica-{port + 1}": "3",
                                                                   f"replica-{port + 2}": "3"}
        conf = (run_dir / "nginx.conf").read_text()
        assert "limit_conn_zone $binary_remote_addr zone=paged_per_addr:10m;" in conf
        server_block = conf.split("server {", 1)[1]
        assert "limit_conn paged_per_addr 7;" in server_block
        assert "sessions 3 per replica (5 in all), 7 connections per client address" in out.stdout
    finally:
        subprocess.run(["bash", str(STOP), str(run_dir)], env=env, capture_output=True, timeout=GUARD_S)


def test_the_default_limits_are_40_per_replica_and_the_total_per_address(tmp_path, env):
    """Without the variables: 40 sessions per replica, and one address may hold as many connections as the whole
    deployment has places (a class behind one NAT still fits)."""
    port, told = free_port_block(2), tmp_path / "told"
    told.mkdir()
    run_dir = tmp_path / "run"
    clean = {k: v for k, v in env.items() if k not in ("PAGED_MAX_SESSIONS", "PAGED_CONN_PER_ADDR")}
    out = run([2, port, run_dir], clean, FAKE_ENV_DIR=str(told))
    try:
        assert out.returncode == 0, out.stderr
        assert sorted(f.read_text() for f in told.iterdir()) == ["40", "40"]
        assert "limit_conn paged_per_addr 80;" in (run_dir / "nginx.conf").read_text()
    finally:
        subprocess.run(["bash", str(STOP), str(run_dir)], env=clean, capture_output=True, timeout=GUARD_S)


@pytest.mark.parametrize("name, value", [("PAGED_MAX_SESSIONS", "1"), ("PAGED_MAX_SESSIONS", "08"),
                                         ("PAGED_MAX_SESSIONS", "lots"), ("PAGED_CONN_PER_ADDR", "0"),
                                         ("PAGED_CONN_PER_ADDR", "-4")])
def test_a_bad_limit_is_refused_by_name_before_anything_starts(tmp_path, env, name, value):
    """A total below one session per replica (1 for 2 replicas), a leading zero, a word, 0 or a sign: exit 2
    naming the variable and the value; nothing started."""
    out = run([2, free_port_block(2), tmp_path / "run"], env, **{name: value})
    assert out.returncode == 2 and name in out.stderr and f"'{value}'" in out.stderr, out.stderr
    assert started(env) == []
