"""``python -m photon_trace.server [serve options]``: the same as ``photon-trace serve``."""
import sys

from photon_trace.server.cli import main

sys.exit(main())
