"""Shared by tests/ref and tests/integration.

1. The key-centering calibration of a quantized K cache (src/model/key_center_cache.h) is kept for the session
in one temporary folder (TACHYON_KV_CENTER_CACHE, unless the caller set it): a scalar-level start calibrates in
about a minute of CPU, and a hit returns the very floats the calibration computes (the file is keyed by the
model's bytes, the ISA level, the thread count and the switches the forward pass reads), so every later start
with the same model and level skips it and computes the same logits. The folder goes at the session's end.

2. gguf-py's GGUFReader reads the file through a plain ndarray view of its memory map instead of the np.memmap
itself.

GGUFReader parses every element of an array field with a slice of self.data, and slicing an np.memmap runs
its __array_finalize__ each time: on Gemma 3's 262,144-token vocabulary (three arrays of that length) that is
about 20 s per reader on this project's 2-core CI machine, and several tests open such files. The same bytes
through `memmap.view(np.ndarray)` (the same memory, kept mapped by the view's base; read-only when the map
is) parse about 3x faster. Only the Python type of the arrays changes (ndarray instead of memmap): the bytes,
shapes, dtypes and write flags are the same, and no test uses memmap's own methods."""
import os
import shutil
import tempfile

import gguf
import numpy as np

_KVC_DIR = None
if not os.environ.get("TACHYON_KV_CENTER_CACHE"):
    _KVC_DIR = tempfile.mkdtemp(prefix="tachyon-kv-center-")
    os.environ["TACHYON_KV_CENTER_CACHE"] = _KVC_DIR


def pytest_sessionfinish(session, exitstatus):
    if _KVC_DIR:
        shutil.rmtree(_KVC_DIR, ignore_errors=True)


def _data_get(self):
    return self._tachyon_data


def _data_set(self, value):
    self._tachyon_data = value.view(np.ndarray) if isinstance(value, np.memmap) else value


if not isinstance(getattr(gguf.GGUFReader, "data", None), property):
    gguf.GGUFReader.data = property(_data_get, _data_set)
