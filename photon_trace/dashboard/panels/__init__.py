"""What sits beside the timeline: the analysis report's figures and rows (``figures``),
statistics of a time range and the idle breakdown (``stats``), search (``search``) and what a
click selects, its details and its marks (``selection``). Pure functions: no callbacks.
"""
