"""Builds a plugin component from an app module::

    python -m kubewasm_guest.build app -o plugin.wasm

It checks first what componentize-py would report deep in a Rust backtrace
(the module missing, no ``Plugin`` in it, componentize-py absent) and says
the fix; then runs componentize-py against the contract's WIT, which the
installed SDK carries, with this SDK and the current directory on the path.
The first build of a Python plugin takes 15 to 30 seconds (CPython itself
is bundled): it says so.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

WORLD = "controller"


class BuildError(Exception):
    """A build that cannot start, with the fix in its message."""


def wit_dir() -> Path:
    """The contract's WIT, shipped inside the package (``make sdk``)."""
    found = Path(__file__).parent / "wit"
    if not (found / "controller.wit").is_file():
        raise BuildError(f"this copy of kubewasm_guest has no WIT at {found}: install the wheel `make sdk` builds "
                         "(or pass --wit WIT_DIR)")
    return found


def check_app(module: str, path: Path) -> None:
    """Imports the app module natively: it must exist and define ``Plugin``."""
    if module.endswith(".py"):
        raise BuildError(f"name the module, not the file: `{module[:-3]}`, not `{module}`")
    sys.path.insert(0, str(path))
    try:
        try:
            app = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name == module:
                raise BuildError(f"no module `{module}` in {path}: pass the app module's name (app.py -> app)") from None
            raise BuildError(f"{module} imports `{e.name}`, which is not installed: pip install it, "
                             "or for the SDK: pip install the kubewasm_guest wheel") from None
    finally:
        sys.path.pop(0)
    if not hasattr(app, "Plugin"):
        raise BuildError(f"{module}.py defines no `Plugin`, the name the component exports: end it with "
                         "`Plugin = export(YourReconciler())`")


def componentize(module: str, output: Path, wit: Path, path: Path) -> list:
    """The componentize-py command line."""
    tool = shutil.which("componentize-py")
    if tool is None:
        raise BuildError("componentize-py is not installed: pip install 'kubewasm-guest[build]' "
                         "(or componentize-py==0.25.1)")
    sdk_parent = Path(__file__).resolve().parent.parent
    return [tool, "-d", str(wit), "-w", WORLD, "componentize", module,
            "-p", str(path), "-p", str(sdk_parent), "-o", str(output)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubewasm_guest.build", description=__doc__.split("\n")[0])
    parser.add_argument("module", help="the app module, which defines Plugin (app for app.py)")
    parser.add_argument("-o", "--output", required=True, type=Path, help="the component to write")
    parser.add_argument("--wit", type=Path, help="the WIT directory [default: the one the SDK carries]")
    parser.add_argument("--path", type=Path, default=Path("."), help="where the app's modules are [default: .]")
    args = parser.parse_args(argv)
    try:
        wit = args.wit or wit_dir()
        check_app(args.module, args.path)
        command = componentize(args.module, args.output, wit, args.path)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"building {args.output} with componentize-py: CPython and the app are bundled, "
          "15 to 30 s on a first build...", file=sys.stderr, flush=True)
    started = time.monotonic()
    done = subprocess.run(command, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if done.returncode != 0:
        print(f"error: componentize-py failed (exit {done.returncode}); its message is above", file=sys.stderr)
        return done.returncode
    size = args.output.stat().st_size
    print(f"wrote {args.output} ({size} bytes) in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
