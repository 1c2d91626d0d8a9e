"""The local API port: the HTTP API in front of the API function, sign-in, the page, live status.

In AWS these are separate endpoints (API Gateway, Cognito, CloudFront, the WebSocket API); here one
server answers for all of them.
"""
