"""The rules: validation and shape inference, pure functions on shapes and parameters, no arrays.

``dims`` (static, unknown and interval dimensions), ``params`` (the
parameters as plain ints), ``types`` (their literal types), ``shapes`` (each
operation's rules, once: :mod:`datamove.shapes` is their public face) and
``permutations`` (the channel permutation between the depth ops' modes).
Every layer above validates through these; they import nothing of datamove
but :mod:`datamove.errors`.
"""
