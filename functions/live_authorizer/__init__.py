"""The live_authorizer function's code asset (its handler module: ``app``)."""
