"""Live status: the update a subscriber receives for a changed document, and the connections
(WebSocket in AWS, SSE locally) it is pushed to, per tenant.

May import: ``core``, ``documents`` (an update is the document's API view).
"""
