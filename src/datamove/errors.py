"""The one exception type of datamove, and how messages quote what they show.

Messages quote values that come from users and files: a name may hold a
newline or be megabytes long, an integer may have more digits than Python
will print (``sys.get_int_max_str_digits``). :func:`quote` and :func:`number`
keep every message one short line whatever it quotes.

>>> quote("conv1/BiasAdd")
"'conv1/BiasAdd'"
>>> quote("a\\nb")
"'a\\\\nb'"
>>> quote("x" * 100, limit=20)
"'xxxxxxxx...xxxxxxxx' (100 characters)"
>>> number(12), number(-10**200)
('12', '-<an integer of 201 digits>')
"""

from __future__ import annotations

import math
import reprlib

__all__ = ["DataMoveError", "quote", "show", "brief", "number", "traced"]

#: Integers with more digits than this are shown by their digit count.
MAX_DIGITS = 60


class DataMoveError(ValueError):
    """Bad input to a datamove operation.

    The message names the argument, the rule it breaks and the values, e.g.
    ``crops_begin[2] + crops_end[2] = 11 exceeds data.shape[2] * block_shape[2] = 10``.
    A subclass of :class:`ValueError`, so ``except ValueError`` catches it too.
    """

    # Exception's own __init__: AutoGraph (tf.function) then re-raises it as a DataMoveError with the traced
    # code's lines added, where for any other __init__ it raises a StagingError in its place.
    __init__ = Exception.__init__


def quote(text: object, limit: int = 80) -> str:
    """``repr`` of a name for a message: control characters escaped, the middle of a long one cut.

    Parameters
    ----------
    text : object
        Usually a str (a layer, tensor or file name); anything else is
        quoted as its ``str``.
    limit : int
        Characters kept: half from the start, half from the end.
    """
    text = text if isinstance(text, str) else str(text)
    if len(text) <= limit:
        return repr(text)
    half = max(1, limit // 2 - 2)
    return f"{repr(text[:half])[:-1]}...{repr(text[-half:])[1:]} ({len(text)} characters)"


def show(text: object, limit: int = 200) -> str:
    """A file name for a message: as it is when printable and short, else as :func:`quote` gives it.

    >>> show("out/x.npy"), show("a\\nb.npy")
    ('out/x.npy', "'a\\\\nb.npy'")
    """
    text = text if isinstance(text, str) else str(text)
    if len(text) <= limit and text.isprintable():
        return text
    return quote(text, limit)


_REPR = reprlib.Repr()
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = _REPR.maxfrozenset = 8
_REPR.maxstring = _REPR.maxother = 80


def brief(value: object) -> str:
    """``repr`` of an argument for a message, a few items of a container and at most ~80 characters.

    >>> brief({1, 2}), brief(list(range(100))), brief(10**5000)
    ('{1, 2}', '[0, 1, 2, 3, 4, 5, 6, 7, ...]', '<an integer of 5001 digits>')
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return number(value)
    try:
        return _REPR.repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        return f"<{type(value).__name__} object>"


def _digits(value: int) -> int:
    """Decimal digits of ``abs(value)``, without converting it to a string."""
    value = abs(value)
    if value == 0:
        return 1
    estimate = int((value.bit_length() - 1) * math.log10(2)) + 1
    return estimate + 1 if value >= 10**estimate else estimate


def number(value: int) -> str:
    """An integer for a message: its digits, or past :data:`MAX_DIGITS` digits its digit count.

    Python refuses to print integers of more than 4,300 digits; a message
    about ``block_size ** rank`` must still be one line.
    """
    digits = _digits(value)
    if digits <= MAX_DIGITS:
        return str(value)
    return f"{'-' if value < 0 else ''}<an integer of {digits} digits>"


def traced(value: object) -> str:
    """What to do about a parameter whose value a compiler traces (a JAX tracer, a symbolic ``tf.Tensor``), as
    the end of a message: the operations' parameters decide shapes, so they must be known while tracing.
    ``""`` for any other value.

    >>> traced(3)
    ''
    """
    kind = type(value)
    module = kind.__module__
    if module.startswith("jax") and any(c.__name__.endswith("Tracer") for c in kind.__mro__):
        return ("; its value is traced by JAX (jax.jit, vmap, grad) and not known while tracing, but it decides "
                "the output's shape: make it static (jax.jit(f, static_argnums=...) or static_argnames=...), "
                "or close over it (a closure, functools.partial)")
    if module.startswith("tensorflow") and kind.__name__ != "EagerTensor":
        return ("; a symbolic tensor's value is not known while tf.function traces, but it decides the output's "
                "shape: pass a Python int (tf.function traces once per value)")
    return ""
