"""The Lambda handlers, one folder per function: ``functions/<name>/app.py``.

In AWS (and in the local stack's Lambda runner) each folder is the function's code asset and
``app.handler`` its handler: ``app`` is a top-level module there. These package markers only
give every handler a unique dotted name here (``functions.<name>.app``) for tests and mypy;
they are left out of the assets (infra/constructs/function.py).
"""
