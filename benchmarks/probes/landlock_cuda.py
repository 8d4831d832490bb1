"""Probe (GPU host): which part of the Landlock layer stops CUDA from starting, and which system
call it denies. Each case runs in a fresh process: apply the restriction (before CUDA, as the
sandbox does), then cuInit through ctypes (fast: no torch import); the "torch" cases import torch
and run a kernel. In cases where cuInit fails, a small LD_PRELOAD shim (compiled here with the
host's C compiler; the H200 image has no strace) logs every failing open/mkdir/mknod/unlink/
connect/socket/ftruncate libcuda makes, with errno. Prints one JSON line per case.

Found on the H200 (2026-12-03, first session): with every part on, cudaGetDeviceCount failed with
error 304 (CUDA_ERROR_OPERATING_SYSTEM) in every sandbox. Suspected cause (NVIDIA/OpenShell PR 710):
cuInit writes /proc/<pid>/task/<tid>/comm to name its threads; the "without /proc/self/task" cases
leave out the rule that allows it (containment.writable_paths).

    python3 benchmarks/probes/landlock_cuda.py
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
static void note(const char *call, const char *path, long arg, int err) {
    fprintf(stderr, "SHIM %s %s 0x%lx -> %s\n", call, path ? path : "-", arg, strerror(err));
}
#define OPENLIKE(name) \
int name(const char *p, int flags, ...) { \
    static int (*real)(const char *, int, ...); if (!real) real = dlsym(RTLD_NEXT, #name); \
    va_list ap; va_start(ap, flags); int mode = va_arg(ap, int); va_end(ap); \
    int r = real(p, flags, mode); if (r < 0) { int e = errno; note(#name, p, flags, e); errno = e; } return r; }
OPENLIKE(open)
OPENLIKE(open64)
#define OPENATLIKE(name) \
int name(int d, const char *p, int flags, ...) { \
    static int (*real)(int, const char *, int, ...); if (!real) real = dlsym(RTLD_NEXT, #name); \
    va_list ap; va_start(ap, flags); int mode = va_arg(ap, int); va_end(ap); \
    int r = real(d, p, flags, mode); if (r < 0) { int e = errno; note(#name, p, flags, e); errno = e; } return r; }
OPENATLIKE(openat)
OPENATLIKE(openat64)
int mkdir(const char *p, mode_t m) { static int (*real)(const char *, mode_t); if (!real) real = dlsym(RTLD_NEXT, "mkdir");
    int r = real(p, m); if (r < 0) { int e = errno; note("mkdir", p, m, e); errno = e; } return r; }
int mknod(const char *p, mode_t m, dev_t d) { static int (*real)(const char *, mode_t, dev_t); if (!real) real = dlsym(RTLD_NEXT, "mknod");
    int r = real(p, m, d); if (r < 0) { int e = errno; note("mknod", p, m, e); errno = e; } return r; }
int unlink(const char *p) { static int (*real)(const char *); if (!real) real = dlsym(RTLD_NEXT, "unlink");
    int r = real(p); if (r < 0) { int e = errno; note("unlink", p, 0, e); errno = e; } return r; }
int ftruncate(int fd, off_t n) { static int (*real)(int, off_t); if (!real) real = dlsym(RTLD_NEXT, "ftruncate");
    int r = real(fd, n); if (r < 0) { int e = errno; note("ftruncate", NULL, fd, e); errno = e; } return r; }
int socket(int dom, int type, int proto) { static int (*real)(int, int, int); if (!real) real = dlsym(RTLD_NEXT, "socket");
    int r = real(dom, type, proto); if (r < 0) { int e = errno; note("socket", NULL, dom, e); errno = e; } return r; }
int connect(int fd, const struct sockaddr *a, socklen_t n) { static int (*real)(int, const struct sockaddr *, socklen_t);
    if (!real) real = dlsym(RTLD_NEXT, "connect"); int r = real(fd, a, n);
    if (r < 0) { int e = errno; const char *p = a->sa_family == AF_UNIX ? ((const struct sockaddr_un *)a)->sun_path : NULL;
                 note("connect", p && !p[0] ? "(abstract)" : p, a->sa_family, e); errno = e; } return r; }
"""

CASE = r"""
import ctypes, json, os, sys
sys.path.insert(0, REPO)
from kernelsmith.evaluate.sandboxing import landlock, containment
case, scratch = CASE_NAME, SCRATCH
dirs, files = containment.writable_paths(scratch, "cuda")
if "without /proc/self/task" in case:
    files = [f for f in files if not f.startswith("/proc/")]
parts = dict(fs=True, tcp=True, scope_signal=True, scope_unix=True)
libc = ctypes.CDLL(None, use_errno=True)
if case == "no_new_privs only":
    libc.prctl(38, 1, 0, 0, 0)
elif case != "none":
    name = case.replace(" torch", "").replace(" without /proc/self/task", "")
    if name == "fs, / writable":
        dirs = ["/"]
        parts.update(tcp=False, scope_signal=False, scope_unix=False)
    elif name == "fs":
        parts.update(tcp=False, scope_signal=False, scope_unix=False)
    elif name == "fs + /dev /proc /sys /tmp /run /var writable":
        dirs = dirs + ["/dev", "/proc", "/sys", "/tmp", "/run", "/var"]
        parts.update(tcp=False, scope_signal=False, scope_unix=False)
    elif name == "tcp":
        parts.update(fs=False, scope_signal=False, scope_unix=False)
    elif name == "scope signal":
        parts.update(fs=False, tcp=False, scope_unix=False)
    elif name == "scope abstract unix":
        parts.update(fs=False, tcp=False, scope_signal=False)
    elif name == "all but abstract unix scope":
        parts.update(scope_unix=False)
    landlock.restrict(dirs, files, **parts)
denied = {}
for f in files:
    if f.startswith("/dev/nvidia") and not os.path.isdir(f):
        try:
            os.close(os.open(f, os.O_RDWR))
        except OSError as exc:
            denied[f] = exc.strerror
out = {"case": case, "abi": landlock.abi_version(), "rdwr_denied": denied}
if case.endswith("torch"):
    import torch
    try:
        torch.cuda.init()
        x = torch.ones(1024, device="cuda")
        torch.cuda.synchronize()
        out["cuda"] = "ok"
    except Exception as exc:
        out["cuda"] = f"{type(exc).__name__}: {exc}"[:300]
else:
    cuda = ctypes.CDLL("libcuda.so.1")
    rc = cuda.cuInit(0)
    n = ctypes.c_int(-1)
    out["cuInit"] = rc
    out["devices"] = (cuda.cuDeviceGetCount(ctypes.byref(n)), n.value)
print("RESULT " + json.dumps(out))
"""

CASES = (
    "none",
    "no_new_privs only",
    "fs, / writable",
    "fs without /proc/self/task",
    "fs",
    "fs + /dev /proc /sys /tmp /run /var writable",
    "tcp",
    "scope signal",
    "scope abstract unix",
    "all without /proc/self/task",
    "all",
    "all torch",
    "all without /proc/self/task torch",
)


def main() -> None:
    build = tempfile.mkdtemp()
    shim = os.path.join(build, "shim.so")
    cc = shutil.which("cc") or shutil.which("gcc")
    with open(os.path.join(build, "shim.c"), "w") as f:
        f.write(SHIM)
    made = cc and subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", shim, os.path.join(build, "shim.c"), "-ldl"],
        capture_output=True,
        text=True,
    )
    if not made or made.returncode:
        print(json.dumps({"shim": "not built", "why": made.stderr[-300:] if made else "no C compiler"}))
        shim = None
    print(json.dumps({"nvidia_dev": sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))}), flush=True)
    for case in CASES:
        scratch = tempfile.mkdtemp()
        code = CASE.replace("REPO", repr(REPO)).replace("CASE_NAME", repr(case)).replace("SCRATCH", repr(scratch))
        env = {**os.environ, "HOME": scratch, "TMPDIR": scratch}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
        res = [ln[7:] for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        line = json.loads(res[-1]) if res else {"case": case, "exit": proc.returncode, "stderr": proc.stderr[-800:]}
        failed = line.get("cuInit", 0) != 0 or line.get("cuda", "ok") != "ok" or not res
        if failed and shim and not case.endswith("torch"):
            again = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=120,
                env={**env, "LD_PRELOAD": shim},
            )
            notes = [ln[5:] for ln in again.stderr.splitlines() if ln.startswith("SHIM ")]
            line["failing_calls"] = [n for n in notes if "No such file" not in n][:40]
            line["missing_files"] = len([n for n in notes if "No such file" in n])
        print(json.dumps(line), flush=True)
    log = subprocess.run(
        "dmesg 2>/dev/null | grep -i -E 'landlock|audit' | tail -20", shell=True, capture_output=True, text=True
    )
    print(json.dumps({"dmesg": log.stdout.splitlines()}))


if __name__ == "__main__":
    main()
