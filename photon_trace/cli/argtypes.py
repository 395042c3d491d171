"""How the command line's values are read and its help is shown.

A value out of range is argparse's own error, so each argument gets its own message
(``argument --streams: must be at least 1, got -3``) and exit 2, before anything is loaded.
``HelpFormatter`` says each option's default after its help, as ``--help`` readers expect.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable

TCP_PORT_MAX = 65535


def at_least(low: int) -> Callable[[str], int]:
    """An ``int`` argument's type: whole numbers from ``low`` up."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value
    parse.__name__ = f"an integer >= {low}"   # argparse names the type in some messages
    return parse


positive_int = at_least(1)


def port(text: str) -> int:
    """A TCP port to listen on: 0 (the system picks one) to 65535."""
    value = at_least(0)(text)
    if value > TCP_PORT_MAX:
        raise argparse.ArgumentTypeError(f"must be a TCP port, 0 to {TCP_PORT_MAX}, got {value}")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A share of something, 0 to 1 (``0.05`` is 5%)."""
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a fraction from 0 to 1 (0.05 is 5%), got {text}")
    return value


def non_negative(text: str) -> float:
    """A finite number, zero or more."""
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more, got {text}")
    return value


def positive(text: str) -> float:
    """A finite number above zero (a timeout)."""
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written (they are laid out by hand), and every option's
    default after its help: ``(default: 8050)``, a list as ``1 8 32``. An option whose help
    already says its default, or that has none (unset, off, a flag), is left as it is."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        # argparse finds the terminal's width through shutil, whose import (bz2 and lzma with it)
        # was a fifth of ``photon-trace check`` of a 28-event profile; the same width without it.
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text.lower() or any(default is x for x in (None, False, argparse.SUPPRESS))
                or default == []
                or not action.option_strings):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"   # the help is %-formatted next


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` gives it: ``COLUMNS`` when a positive
    number, else standard output's terminal, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80
