"""The API's routes, one group a module: ``documents``, ``search``, ``webhooks``, ``meta`` (the
OpenAPI document). Each holds a Powertools ``Router`` named ``router`` for its group's paths only;
``app.py`` includes them (``ROUTE_GROUPS``) and maps every error. ``common`` holds what the groups
share (the services, the caller's tenant, a route's OpenAPI responses), ``errors`` the error bodies.

Modules here import each other relatively (``from .common import ...``), which works both as the
package ``functions.api.routes`` (tests, tools, mypy) and as the top-level ``routes`` package Lambda
finds next to ``app.py`` in /var/task (infra/constructs/function.py keeps this marker in the asset).
"""
