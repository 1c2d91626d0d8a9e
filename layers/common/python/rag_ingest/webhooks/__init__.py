"""Signed webhooks: a tenant's endpoints (registration, secrets), the Standard Webhooks signature,
the URL policy that keeps deliveries off private networks (checked at registration and again at
every delivery), the fan-out of a document event into one delivery per endpoint, and the delivery
with its retry schedule.

May import: ``core``.
"""
