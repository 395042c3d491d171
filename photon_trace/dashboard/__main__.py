"""``python -m photon_trace.dashboard [TRACE ...]``."""
from photon_trace.dashboard.cli import main

raise SystemExit(main())
