"""CloudWatch alarms, locally: metrics gathered from the stack, each alarm's rule evaluated on them.

``rules`` is pure (an alarm's state from its datapoints); ``metrics`` gathers samples; ``evaluator``
runs every template alarm each period and publishes state changes.
"""
