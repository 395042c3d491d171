"""The timeline: a trace's records as numpy arrays (``data``, with the marks' data in
``marks``), drawn for a ``View`` (``view``) on one ``Frame`` (``frame``) as spans (``draw``)
and marks (``draw_marks``), assembled into the figure (``figure``), with the overview strip
above it (``overview``). Pure functions of the data: no callbacks, no page.
"""
