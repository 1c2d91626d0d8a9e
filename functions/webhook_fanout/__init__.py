"""The webhook fan-out function's code asset (its handler module: ``app``)."""
