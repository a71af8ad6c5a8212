"""Types of the command line's numbers: a count, a size, an interval or a
threshold that is negative, zero where it divides, NaN or infinite is the user's
error, said by argparse at once, not a wrong number later (a negative idle power
gave negative energy; a batch size of 0, NaN samples per second)."""
import argparse
import math


def _number(kind, text, ok, what, infinite=False):
    try:
        v = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}, got {text!r}") from None
    if not ((math.isfinite(v) or (infinite and v == math.inf)) and ok(v)):
        raise argparse.ArgumentTypeError(f"{what}, got {text!r}")
    return v


def count(text):
    """A whole number above 0 (jobs, a batch size)."""
    return _number(int, text, lambda v: v > 0, "must be a whole number above 0")


def index(text):
    """A whole number from 0 (a rank)."""
    return _number(int, text, lambda v: v >= 0, "must be a whole number from 0")


def positive(text):
    """A finite number above 0 (an interval)."""
    return _number(float, text, lambda v: v > 0, "must be a number above 0")


def non_negative(text):
    """A finite number from 0 (a wait, a threshold)."""
    return _number(float, text, lambda v: v >= 0, "must be a number from 0")


def seconds(text):
    """A wait from 0, or inf: until the database is free."""
    return _number(float, text, lambda v: v >= 0, "must be a number of seconds from 0, or inf", infinite=True)
