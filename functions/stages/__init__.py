"""The seven stage functions' shared code asset (its handler module: ``app``)."""
