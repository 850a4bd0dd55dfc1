"""Building and loading the C kernel (native_decode.c) without running foreign or broken code.

Loading a shared library runs its constructors, so a library is loaded only when this process can
trust it:
- it lives in a private folder: $PAGED_CACHE_DIR, else ~/.cache/paged (created 0700), used only when
  it is a folder owned by this user and not writable by group or others; otherwise a fresh private
  temp folder of this process (`tempfile.mkdtemp`, 0700, removed at exit) - never a shared one;
- its bytes match the SHA-256 the builder wrote next to it (`<name>.so.sha256`), checked before
  `dlopen`. A truncated, garbage or foreign file fails the check and is rebuilt, so it can neither
  kill the process (a truncated library mapped by `dlopen` raises SIGBUS) nor silently keep the slow
  fallback in place;
- it is built into a temporary name and renamed into place only when complete. The compiler runs
  under a timeout (COMPILE_TIMEOUT_S) in its own process group, killed whole when it hangs. `$CC` is
  split like a shell would (`CC="gcc -O2"` works). Every failure raises RuntimeError saying why.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("native_decode.c")
# the function the library must export (paged_decode, its arguments in one array)
SYMBOL = "paged_decode_packed"
# ... and the model's small ops (native_ops.h); a library without every one of them is not used
SYMBOLS = (SYMBOL, "paged_rms_norm", "paged_rope", "paged_silu_mul", "paged_write_rows")
# Tried in order; the first that builds is used. -march=native: AVX2/FMA where the CPU has them.
FLAG_SETS = (
    ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"),
    ("-O3", "-march=native", "-pthread", "-shared", "-fPIC"),
    ("-O3", "-pthread", "-shared", "-fPIC"),
)
# a build takes about a second; a compiler that hangs must not hang the caller
COMPILE_TIMEOUT_S = 60.0

_private_tmp: list[Path] = []  # this process's fallback folder, made at most once


def compiler() -> list[str] | None:
    """The C compiler's command line, or None when there is none.

    $CC split like a shell would (its first word resolved on PATH), else the first of cc, gcc,
    clang on PATH.

    Raises: RuntimeError if $CC is set but cannot be used.
    """
    cc = os.environ.get("CC", "").strip()
    if not cc:
        return next(([path] for name in ("cc", "gcc", "clang") if (path := shutil.which(name))),
                    None)
    try:
        argv = shlex.split(cc)
    except ValueError as err:
        raise RuntimeError(f"$CC={cc!r} cannot be split into words like a shell would: "
                           f"{err}") from None
    path = shutil.which(argv[0]) if argv else None
    if path is None:
        raise RuntimeError(f"$CC={cc!r}: {argv[0] if argv else cc!r} is not an executable on PATH")
    return [path, *argv[1:]]


def _private_folder_problem(path: Path) -> str | None:
    """None when `path` (created 0700 if missing) is a folder owned by this user that group and
    others cannot write; else why it cannot hold libraries this process will load."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as err:
        return f"cannot be created or read ({err.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is not None and info.st_uid != uid:
        return f"is owned by uid {info.st_uid}, not by this user (uid {uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    if not os.access(path, os.W_OK | os.X_OK):
        return "is not writable"
    return None


def cache_dir() -> Path:
    """The private folder for built libraries: $PAGED_CACHE_DIR, else ~/.cache/paged.

    When that is unusable (see `_private_folder_problem`), a private temp folder made once per
    process and removed at exit.
    """
    explicit = os.environ.get("PAGED_CACHE_DIR")
    try:
        candidate = Path(explicit) if explicit else Path.home() / ".cache" / "paged"
    except RuntimeError:  # no home directory to be found
        candidate = None
    if candidate is not None and _private_folder_problem(candidate) is None:
        return candidate
    if not _private_tmp:
        folder = Path(tempfile.mkdtemp(prefix="paged-native-"))  # 0700, a fresh unpredictable name
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _private_tmp.append(folder)
    return _private_tmp[0]


def _cpu_flags() -> str:
    """This CPU's feature flags: -march=native builds for them, so they are part of the cache key.
    """
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        return platform.processor()


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run argv in a process group of its own; on timeout kill that group (the compiler and whatever
    it started) and raise RuntimeError."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.communicate(timeout=5)
        # a child that left the group still holds the pipes: stop waiting
        except subprocess.TimeoutExpired:
            pass
        raise RuntimeError(f"impl='native': `{shlex.join(argv)[:200]}` did not finish within "
                           f"{timeout:g} s (COMPILE_TIMEOUT_S) and was killed") from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def library_path(cc: list[str], flags: tuple[str, ...]) -> Path:
    """Where the library built by `cc` with `flags` is cached.

    The name holds a hash of the source
    (and the native_*.h it includes), the compiler command, its version, the flags and this CPU's
    features, so any of them changing builds anew.
    """
    version = _run([*cc, "--version"], COMPILE_TIMEOUT_S).stdout.split("\n")[0]
    sources = b"".join(path.read_bytes()
                       for path in [SOURCE, *sorted(SOURCE.parent.glob("native_*.h"))])
    key = hashlib.sha256(b"\0".join([sources, shlex.join(cc).encode(), version.encode(),
                                     " ".join(flags).encode(), platform.machine().encode(),
                                     _cpu_flags().encode()])).hexdigest()[:16]
    return cache_dir() / f"native_decode-{key}.so"


def _digest_path(library: Path) -> Path:
    return library.with_name(library.name + ".sha256")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verified(library: Path) -> bool:
    """True when `library` is a regular file (not a link) whose SHA-256 is the one its builder wrote
    next to it."""
    try:
        if not stat.S_ISREG(os.lstat(library).st_mode):
            return False
        expected = _digest_path(library).read_text().strip()
        return len(expected) == 64 and _sha256(library) == expected
    except (OSError, UnicodeDecodeError):
        return False


def _forget(library: Path) -> None:
    library.unlink(missing_ok=True)
    _digest_path(library).unlink(missing_ok=True)


def _compile(cc: list[str], flags: tuple[str, ...], target: Path) -> str | None:
    """Build SOURCE into `target` (temp name, digest written, then renamed into place).

    Returns None, or the compiler's complaint when it rejected these flags.
    Raises: RuntimeError if the compiler hangs.
    """
    fd, partial_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    partial = Path(partial_name)
    try:
        result = _run([*cc, *flags, "-o", str(partial), str(SOURCE), "-lm"], COMPILE_TIMEOUT_S)
        if result.returncode != 0:
            return f"{shlex.join(cc)} {' '.join(flags)}: {result.stderr.strip()[-400:]}"
        digest_partial = _digest_path(partial)
        digest_partial.write_text(_sha256(partial) + "\n")
        # A concurrent build of the same key writes a library of its own; either pair verifies, a
        # mixed pair fails the check and is rebuilt by the next process.
        os.replace(digest_partial, _digest_path(target))
        os.replace(partial, target)
        return None
    finally:
        partial.unlink(missing_ok=True)
        _digest_path(partial).unlink(missing_ok=True)


def _open(library: Path) -> ctypes.CDLL:
    """dlopen `library` and check that it has every function of SYMBOLS.

    Raises: RuntimeError (the handle closed again) if either fails.
    """
    try:
        lib = ctypes.CDLL(str(library))
    except OSError as err:
        raise RuntimeError(f"impl='native': {library} could not be loaded: {err}") from None
    missing = next((name for name in SYMBOLS if not hasattr(lib, name)), None)
    if missing is not None:
        # Unload it, or the next dlopen of this path would hand back this same library.
        import _ctypes

        _ctypes.dlclose(lib._handle)
        raise RuntimeError(f"impl='native': {library} has no function {missing!r}")
    return lib


def load_kernel() -> ctypes.CDLL:
    """Build (or find built and verified) and load the library with the C functions of SYMBOLS.

    A cached library that fails the check or fails to load is deleted and built once more.
    Raises: RuntimeError saying why it cannot be had.
    """
    cc = compiler()
    if cc is None:
        raise RuntimeError("impl='native' needs a C compiler (cc, gcc or clang; or set $CC), e.g. "
                           "apt-get install gcc; meanwhile use impl='fused' or 'gather'")
    errors = []
    for flags in FLAG_SETS:
        target = library_path(cc, flags)
        if verified(target):
            try:
                return _open(target)
            except RuntimeError as err:
                errors.append(str(err))
        _forget(target)  # missing, unverified or unloadable: never dlopen it, build it anew
        complaint = _compile(cc, flags, target)
        if complaint is not None:
            errors.append(complaint)
            continue
        try:
            return _open(target)
        # e.g. built, but its runtime library is missing: try the next flags
        except RuntimeError as err:
            errors.append(str(err))
            _forget(target)
    raise RuntimeError("impl='native' could not be built:\n" + "\n".join(errors))
