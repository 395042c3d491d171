"""``/openapi.json`` with every request body documented.

The routes read their bodies by hand (after the API-key check, with our own error
messages), so FastAPI cannot see them; this puts each route's pydantic model into
the schema as its ``requestBody`` (nested models under ``components/schemas``), so
clients and generators (schemathesis) know what to send.
"""
from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

REF = "#/components/schemas/{model}"


def document_bodies(app: FastAPI, bodies: dict[str, type[BaseModel]]) -> None:
    """Make ``app.openapi()`` describe ``bodies`` (route path -> model) as JSON request bodies."""
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = plain()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for path, model in bodies.items():
            body = model.model_json_schema(ref_template=REF)
            components.update(body.pop("$defs", {}))
            components[model.__name__] = body
            op = schema["paths"][path]["post"]
            op["requestBody"] = {"required": True, "content": {
                "application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}}}
        app.openapi_schema = schema
        return schema

    app.openapi = openapi
