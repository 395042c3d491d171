"""``python -m photon_trace.cli ...``: the same as ``photon-trace ...``."""
from photon_trace.cli.dispatch import main

raise SystemExit(main())
