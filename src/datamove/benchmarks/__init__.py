"""The benchmarks: every figure as a ratio to a same-process copy of the same bytes, beside the peers.

``suite`` (the CPU cases: ``datamove bench`` and ``bench/run.py``), ``gpu``
(the GPU cases, against a device-to-device copy), ``process`` (what a user
meets before anything is warm: fresh processes, whole scripts, the install)
and ``common``. ``import datamove`` never imports them.
"""
