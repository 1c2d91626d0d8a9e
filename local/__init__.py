"""Local development stack (offline stand-ins for the AWS services the pipeline uses)."""
