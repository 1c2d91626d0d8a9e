"""make cost: the AWS cost model (measure, prices, model, report)."""
