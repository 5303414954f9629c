"""Shared helpers of the SDK tests: paths, the Go toolchain, free ports."""

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import unittest
from typing import Dict

SDK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(os.path.dirname(SDK_DIR))

# Tests run from the source tree: make "import toolgateway" find it whatever
# the working directory (an installed copy would otherwise shadow it).
if SDK_DIR not in sys.path:
    sys.path.insert(0, SDK_DIR)

GO = shutil.which("go") or (os.path.exists("/usr/local/go/bin/go") and "/usr/local/go/bin/go") or None
NO_GO_REASON = "the Go toolchain (`go`) is not on PATH: the Go-built programs this test needs cannot be built"

_build_lock = threading.Lock()
_built: Dict[str, str] = {}
_build_dir = None


def go_binary(package: str) -> str:
    """Build a Go program of the repository once per test run (``go build -o``
    into a temporary directory) and return its path. Skips the calling test
    when Go is missing."""
    global _build_dir
    if GO is None:
        raise unittest.SkipTest(NO_GO_REASON)
    with _build_lock:
        if package in _built:
            return _built[package]
        if _build_dir is None:
            _build_dir = tempfile.mkdtemp(prefix="toolgateway-py-tests-")
            atexit.register(shutil.rmtree, _build_dir, True)
        out = os.path.join(_build_dir, package.strip("./").replace("/", "_"))
        proc = subprocess.run([GO, "build", "-o", out, package], cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise AssertionError(f"go build {package} failed:\n{proc.stdout}")
        _built[package] = out
        return out


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
