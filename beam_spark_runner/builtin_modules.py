"""Modules imported once, on a registry's first use, for what they
register when imported (the built-in connectors): the registry is then
complete whichever module imported it first."""

import importlib
import threading


class BuiltinModules:
    def __init__(self, *names):
        self._names = names
        self._lock = threading.Lock()
        self._loaded = False

    def load(self):
        if self._loaded:
            return
        with self._lock:
            if not self._loaded:
                for name in self._names:
                    importlib.import_module(name)
                self._loaded = True
