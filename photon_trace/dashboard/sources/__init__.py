"""Where the dashboard's traces come from: the allowed folders and the cache of loaded,
analysed traces (``store``), what may be opened (``openable``), and following a trace that is
still being written (``live``). Nothing here draws.
"""
