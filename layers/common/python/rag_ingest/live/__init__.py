"""Live status and answers: the update a subscriber receives for a changed document, the
connections (the WebSocket API, in AWS and in the local stack) it is pushed to, per tenant, and
answers streamed to the connection that asked for one.

May import: ``core``, ``documents`` (an update is the document's API view), ``answers``.
"""
