"""Sources: documents that live elsewhere (a bucket, a site, a team's own system), kept in sync."""
