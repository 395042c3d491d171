"""The page's callbacks, one module per part: trace A's timeline (``timeline``), selecting and
navigating (``select``), the Panels and Compare tabs (``panels``) and live mode (``live``).
Each has a ``register(app, state)``; importing one registers nothing.
"""
