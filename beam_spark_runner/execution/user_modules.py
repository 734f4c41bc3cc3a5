"""The driver's own Python modules, shipped to Spark's Python workers.

A DoFn defined in `my_transforms.py` beside the pipeline's script, or in a
test module pytest imported from another directory, is pickled by
reference: Spark's Python workers import `my_transforms` by name, and fail
with ModuleNotFoundError when the module's directory is not on their path
(a cluster's executors never have it; a local master's workers have only
the JVM's working directory). DirectRunner runs them, as it runs in the
driver.

`ship_user_modules` finds the modules this process imported that a fresh
interpreter of this Python would not find where the driver found them (its
script's directory, directories added to `sys.path` or PYTHONPATH, the
current directory), zips their top-level packages (their `.py` files), and
hands the zip to `SparkContext.addPyFile`, Spark's own way to put code on
every executor's path, for this task and all later ones. Installed
distributions (site-packages, editable installs) are not shipped: the
executors' environment must provide them, as for any PySpark job.

Guarantees: the same modules give the same zip name (content hash), so a
notebook running many pipelines adds each version once; a module the
workers already have is never shadowed by a copy.
"""

import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import zipfile

_LOG = logging.getLogger(__name__)

# A top-level package bigger than this is shipped as the modules the driver
# imported (and their packages' __init__ files) rather than whole.
MAX_PACKAGE_FILES = 2000
MAX_PACKAGE_BYTES = 64 << 20
_SKIPPED_DIRS = {"__pycache__", ".git", ".venv", "venv", "node_modules", ".tox", ".eggs"}

_lock = threading.Lock()
_installed_cache = {}
_shipped = {}  # (Spark application id, zip name) -> the zip's path
_zips = {}  # zip name -> the zip's path


def _top_level_roots():
    """{top-level name: (root directory, is package, [imported .py files])}
    of the modules in sys.modules that live outside this interpreter's
    standard paths."""
    found = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not path or name == "__main__" or not path.endswith(".py"):
            continue
        parts = name.split(".")
        is_init = os.path.basename(path) == "__init__.py"
        root = os.path.abspath(path)
        for _ in range(len(parts) + (1 if is_init else 0)):
            root = os.path.dirname(root)
        top = parts[0]
        expected = os.path.join(root, top) if (len(parts) > 1 or is_init) else os.path.join(root, top + ".py")
        if not os.path.exists(expected):
            continue  # loaded in an unusual way (zip, custom importer): not ours to ship
        entry = found.setdefault(top, (root, len(parts) > 1 or is_init, []))
        if entry[0] == root:
            entry[2].append(os.path.abspath(path))
    return found


def _found_by_a_fresh_interpreter(candidates):
    """The subset of {top-level name: root} that this Python, started anew
    (no PYTHONPATH, another working directory), imports from the same root."""
    key = tuple(sorted(candidates.items()))
    with _lock:
        if key in _installed_cache:
            return _installed_cache[key]
    script = (
        "import importlib.util, json, os, sys\n"
        "out = {}\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        spec = importlib.util.find_spec(name)\n"
        "    except Exception:\n"
        "        spec = None\n"
        "    if spec is not None and spec.origin:\n"
        "        out[name] = os.path.abspath(spec.origin)\n"
        "print(json.dumps(out))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        output = subprocess.run(
            [sys.executable, "-c", script, json.dumps(sorted(candidates))],
            capture_output=True,
            text=True,
            cwd=tempfile.gettempdir(),
            env=env,
            timeout=60,
            check=True,
        ).stdout
        origins = json.loads(output.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        _LOG.warning("Could not tell which of the driver's modules Spark's workers have (%s); shipping all", e)
        origins = {}
    found = {
        name
        for name, origin in origins.items()
        if os.path.abspath(origin).startswith(os.path.join(candidates[name], "") if name in candidates else "\0")
    }
    with _lock:
        _installed_cache[key] = found
    return found


def _package_files(root, top, imported):
    """The .py files of top-level package `top` under `root` to ship."""
    files, size = [], 0
    for directory, dirs, names in os.walk(os.path.join(root, top)):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                files.append(path)
                size += os.path.getsize(path)
        if len(files) > MAX_PACKAGE_FILES or size > MAX_PACKAGE_BYTES:
            _LOG.warning(
                "Package %s under %s is large; shipping only its %d modules the driver imported",
                top,
                root,
                len(imported),
            )
            return _imported_with_inits(root, imported)
    return files


def _imported_with_inits(root, imported):
    files = set(imported)
    for path in imported:
        directory = os.path.dirname(path)
        while directory.startswith(root + os.sep):
            init = os.path.join(directory, "__init__.py")
            if os.path.exists(init):
                files.add(init)
            directory = os.path.dirname(directory)
    return sorted(files)


def _namespace_inits(files):
    """Archive names of the `__init__.py` files the zip must add: Python's
    zip importer cannot import a namespace package (a directory without
    `__init__.py`, such as a repository's `examples/`), so every package
    directory of a shipped module gets an empty one in the zip (the
    workers then see a regular package holding the driver's portion)."""
    missing = set()
    for name in files:
        directory = os.path.dirname(name)
        while directory:
            init = os.path.join(directory, "__init__.py")
            if init not in files:
                missing.add(init)
            directory = os.path.dirname(directory)
    return missing


def user_module_files():
    """{archive name: local path, or None for an empty `__init__.py` the
    zip adds} of the driver's modules Spark's workers would not find, in a
    stable order."""
    roots = _top_level_roots()
    prefixes = tuple(os.path.join(os.path.abspath(p), "") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix) if p)
    candidates = {top: root for top, (root, _, _) in roots.items() if not os.path.join(root, "").startswith(prefixes)}
    if not candidates:
        return {}
    installed = _found_by_a_fresh_interpreter(candidates)
    files = {}
    for top in sorted(set(candidates) - installed):
        root, is_package, imported = roots[top]
        paths = _package_files(root, top, imported) if is_package else [os.path.join(root, top + ".py")]
        for path in paths:
            files[os.path.relpath(path, root)] = path
    for name in _namespace_inits(files):
        files[name] = None
    return files


def ship_user_modules(spark_context):
    """Adds a zip of the driver's own modules to every executor's Python
    path (SparkContext.addPyFile); returns its path, or None when there is
    nothing to ship."""
    files = user_module_files()
    if not files:
        return None
    digest = hashlib.sha256()
    for name, path in sorted(files.items()):
        digest.update(name.encode())
        if path is not None:
            with open(path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
    zip_name = "beam-user-modules-%s.zip" % digest.hexdigest()[:20]
    # Per SparkContext: a context started after another one stopped (or
    # died) has none of the earlier one's files.
    shipped_key = (spark_context.applicationId, zip_name)
    with _lock:
        if shipped_key in _shipped:
            return _shipped[shipped_key]
        path = _zips.get(zip_name)
        if path is None or not os.path.exists(path):
            directory = tempfile.mkdtemp(prefix="beam-spark-user-modules-")
            path = os.path.join(directory, zip_name)
            with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
                for name, source in sorted(files.items()):
                    if source is None:
                        archive.writestr(name, "")
                    else:
                        archive.write(source, name)
            _zips[zip_name] = path
        spark_context.addPyFile(path)
        _shipped[shipped_key] = path
    _LOG.info(
        "Shipped the driver's own modules to Spark's executors (%s): %s",
        zip_name,
        ", ".join(sorted({name.split(os.sep)[0] for name in files})),
    )
    return path
