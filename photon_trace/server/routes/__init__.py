"""The HTTP routes, one module per concern, each an ``APIRouter`` of top-level handlers.

``completions`` (text and chat generation), ``spatial`` (point, detect), ``models``
(the served model), ``monitoring`` (health, metrics, the live trace). Handlers get
what they share through ``state.StateDep``; ``api.create_app`` includes the routers
in ``ROUTERS``'s order, the order requests are matched in.
"""
from __future__ import annotations

from photon_trace.server.routes import completions, models, monitoring, spatial

ROUTERS = (completions.router, spatial.router, models.router, monitoring.router)

# Each route whose body its handler parses by hand, and the model it parses it into:
# the OpenAPI schema documents these (``openapi.document_bodies``).
BODIES = {**completions.BODIES, **spatial.BODIES}
