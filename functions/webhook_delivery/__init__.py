"""The webhook delivery function's code asset (its handler module: ``app``)."""
