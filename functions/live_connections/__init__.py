"""The live_connections function's code asset (its handler module: ``app``)."""
