"""The reconciler function's code asset (its handler module: ``app``)."""
