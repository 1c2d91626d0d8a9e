"""The live_pusher function's code asset (its handler module: ``app``)."""
