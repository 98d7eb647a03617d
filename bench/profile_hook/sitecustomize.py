"""Loaded by Python at start-up when this directory is on PYTHONPATH (bench.calls puts it there).

With KAVKA_PROFILE_DIR set, the process runs under cProfile from its first line; each SIGUSR2
writes what was recorded since the previous one to KAVKA_PROFILE_DIR/<pid>-<n>.prof and starts
afresh, so a benchmark can cut out exactly its measured phase. Benchmarks only.
"""

import os

_dir = os.environ.get("KAVKA_PROFILE_DIR")
if _dir:
    import cProfile
    import signal

    _state = {"profile": cProfile.Profile(), "n": 0}
    _state["profile"].enable()

    def _cut(*_args: object) -> None:
        p = _state["profile"]
        p.disable()
        p.dump_stats(os.path.join(_dir, f"{os.getpid()}-{_state['n']}.prof"))
        _state["n"] += 1
        _state["profile"] = cProfile.Profile()
        _state["profile"].enable()

    signal.signal(signal.SIGUSR2, _cut)
