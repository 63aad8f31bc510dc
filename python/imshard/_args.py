"""The package's argument checks: each refuses a value the C side would
take for another (a bool for 1, -1 wrapped to 2**64 - 1, a float cut to
an int) with an ArgumentError that names the argument."""
import numbers
import os

import numpy as np

from ._imshard import ArgumentError


def _u64(v, what):
    # the C side takes unsigned 64-bit values, which would wrap -1 or 2**64
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < 2**64:
        raise ArgumentError("%s must be an integer from 0 to 2**64 - 1, got %r" % (what, v))
    return int(v)


def _count(v, what):
    # the C side takes a C int: a bool is a mistake (True would pass for
    # 1), and a float or a number past 32 bits would raise TypeError or
    # OverflowError instead of saying which argument is wrong
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not -2**31 <= v < 2**31:
        raise ArgumentError("%s must be an integer, got %r" % (what, v))
    return int(v)


def _text(v, what, none_ok=False):
    # the C call takes a str: another type raised TypeError naming its
    # position in that call ("argument 4 must be str"), not the option
    if not (isinstance(v, str) or (none_ok and v is None)):
        raise ArgumentError("%s must be a string, got %r" % (what, v))
    # the C call takes a C string: a NUL raised "embedded null
    # character", naming no option
    if v is not None and "\0" in v:
        raise ArgumentError("%s must not hold a NUL character, got %r" % (what, v))
    return v


def _path(v, what):
    # a path is a str, bytes or os.PathLike, as os.fspath takes it; else
    # the C call raised "expected str, bytes or os.PathLike object, not
    # int", naming no argument (pack(rows, 5, out): the root or out?)
    if not isinstance(v, (str, bytes, os.PathLike)):
        raise ArgumentError("%s must be a path (str, bytes or os.PathLike), got %r" % (what, v))
    # no path holds a NUL: the conversion raised "embedded null byte",
    # naming no argument either
    p = os.fspath(v)
    if ("\0" if isinstance(p, str) else b"\0") in p:
        raise ArgumentError("%s holds a NUL character, which no path can: %r" % (what, p))
    return v


def _flag(v, what):
    # a yes/no option takes True or False (1 and 0, and NumPy's bools, as
    # well): any other value's truth would pass for an answer (the string
    # "no" is true, so is "false"; a list of options, 2, None)
    if isinstance(v, (bool, np.bool_)) or (isinstance(v, numbers.Integral) and v in (0, 1)):
        return bool(v)
    raise ArgumentError("%s must be True or False, got %r" % (what, v))


def _ratio(v, what):
    # a share of the records: a real number in [0, 1) (a bool is a
    # mistake, and the C side would take a negative one for "not given")
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 <= v < 1:
        raise ArgumentError("%s must be in [0, 1), got %r" % (what, v))
    return v


def _integer(v, i, what):
    # a label of 1.5 or True is a mistake the command refuses in a list
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ArgumentError("row %d: %s %r is not an integer" % (i, what, v))
    return int(v)


def _index(v, i):
    # a list file's index column is 0..2**64 - 1, as the list reader
    # checks it; the C call would wrap -1 to 2**64 - 1 and 2**64 to 0
    v = _integer(v, i, "index")
    if v < 0:
        raise ArgumentError("row %d: index %d is negative" % (i, v))
    if v >= 2**64:
        raise ArgumentError("row %d: index %d is too large (at most 2**64 - 1)" % (i, v))
    return v


def _extras(v, i):
    # each value is checked on the C side, which names the row as the list
    # reader names a line; a value that is no sequence is refused here
    try:
        return tuple(v)
    except TypeError:
        raise ArgumentError("row %d: extra labels must be a sequence of numbers, got %r"
                            % (i, v)) from None


def _rows(rows):
    # pack's first argument, when it is no path: the message says which
    # argument and row (before: "'int' object is not iterable")
    try:
        rows = iter(rows)
    except TypeError:
        raise ArgumentError("list_or_rows must be a list file's path or rows, got %r"
                            % (rows,)) from None
    out = []
    for i, r in enumerate(rows):
        try:
            r = tuple(r)
        except TypeError:
            raise ArgumentError("row %d: expected (label, path), (index, label, path) or "
                                "(index, label, extras, path), got %r" % (i, r)) from None
        if len(r) == 2:
            out.append((i, _integer(r[0], i, "label"), (), r[1]))
        elif len(r) == 3:
            out.append((_index(r[0], i), _integer(r[1], i, "label"), (), r[2]))
        elif len(r) == 4:
            out.append((_index(r[0], i), _integer(r[1], i, "label"), _extras(r[2], i), r[3]))
        else:
            raise ArgumentError("row %d: expected (label, path), (index, label, path) or "
                                "(index, label, extras, path), got %d fields" % (i, len(r)))
    return out
