"""The native engine: the compiled CPU core (``datamove._native``) and its Python side.

``engine`` (the engine protocol over the core: first calls, repeats, programs the core plans), ``threads``
(how many threads the core uses) and ``core_format`` (the program format and limits as the core exports
them). The core plans and lowers every call itself; the Python lowering it was ported from lives on in the
tests (``tests/lowering``), as the reference they hold the core's planner to.
"""
