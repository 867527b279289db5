"""What datamove knows of array libraries: one adapter each, NumPy's outputs, and the bounded cache.

``libraries`` (recognise an array's library, its key, a NumPy view,
allocation, the checks of ``out=``), ``outputs`` (NumPy results: ``out=``
checks, allocation, overlap) and ``caches`` (the package's one kind of cache,
fork-safe). The engines and the dispatch read them; they import no engine.
"""
