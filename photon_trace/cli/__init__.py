"""The ``photon-trace`` command: ``main`` dispatches to one module per subcommand
(``demo``, ``generate``, ``bench``, ``check``, ``import``, ``export``, ``dashboard``, ``serve``)."""
from __future__ import annotations


def main(argv=None) -> int:
    from photon_trace.cli.dispatch import main as _main
    return _main(argv)


__all__ = ["main"]
