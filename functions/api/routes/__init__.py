"""The API's routes, one group a module: ``documents``, ``search``, ``meta`` (the OpenAPI document).

Each module holds a Powertools ``Router`` named ``router`` and registers only its group's paths;
``app.py`` includes the routers (``ROUTE_GROUPS``) and maps every error. ``common`` holds what the
groups share: the services built once per container, the caller's tenant, a route's OpenAPI responses.
A new group (e.g. ``webhooks``) is a module here with its ``router``, added to ``ROUTE_GROUPS``.

Inside this folder, modules import each other relatively (``from .common import ...``): that works
both when it is the package ``functions.api.routes`` (tests, tools, mypy) and when it is the
top-level ``routes`` that Lambda finds next to ``app.py`` in /var/task (the asset leaves out
``__init__.py`` files: then a namespace package).
"""
