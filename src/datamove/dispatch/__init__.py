"""The dispatch: from a validated call to the engine that runs it, and the result back in the caller's kind.

``recipes`` (what a repeated call of the same layout needs, computed once and
kept), ``foreign`` (arrays of other libraries than NumPy: their facts, the
route table's answer, tracing and compiling) and ``tensorflow`` (TensorFlow
tensors on TensorFlow's own ops). Which engine runs is the route table's
(:mod:`datamove.engines.route`); the rules are :mod:`datamove.rules`'.
"""
