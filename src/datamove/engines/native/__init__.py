"""The native engine: the compiled CPU core (``datamove._native``) and its Python side.

``engine`` (the engine protocol over the core: first calls, repeats,
programs), ``threads`` (how many threads the core uses), ``core_format`` (the
program format and limits as the core exports them) and ``strided``/``units``
(the Python lowering of a plan to loop nests: the fallback above the core's
own planner's bounds, and the tests' reference for it).
"""
