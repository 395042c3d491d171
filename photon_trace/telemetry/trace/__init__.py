"""A trace as data: its records (``records``), header (``header``), file (``file``: write and
load; ``rows``: the loader's checked rows), lanes (``lanes``: which stream is analysed and which
host spans are phases), times (``time``), and other tools' traces read into it (``importers``).

The lowest layer of telemetry: it imports nothing from recording, export or analysis, which
all read it.
"""
