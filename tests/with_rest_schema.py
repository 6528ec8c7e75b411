"""`python tests/with_rest_schema.py SAVED MODULE ARGS...` runs MODULE as `python -m MODULE
ARGS...` would, with `rest_schema.RestBodies` installed: each XML reply of an emulator in
this process and each XML request of our client is recorded, and saved to SAVED when the
process exits, for the test that started it to check against Tableau's REST schema (the
demo's processes run emulators of their own: tests/dagster_ui.py)."""

from __future__ import annotations

import atexit
import os
import runpy
import sys
from pathlib import Path

import pytest
from rest_schema import RestBodies

saved, module = Path(sys.argv[1]), sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
sys.path.insert(0, os.getcwd())  # as `python -m` has it: the demo package at the root
bodies = RestBodies()
bodies.install(pytest.MonkeyPatch())  # for the process's life: never undone
atexit.register(bodies.save, saved)
runpy.run_module(module, run_name="__main__", alter_sys=True)
