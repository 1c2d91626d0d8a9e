"""CloudWatch alarms, locally: metrics gathered from the stack, each alarm's rule evaluated on them.

``rules`` is pure (an alarm's state from its datapoints); ``template_alarms`` reads the template's
alarms; ``metrics`` keeps samples; ``moto_backends`` reads moto's queues and executions; ``evaluator``
runs every alarm each tick on the injected ``clock`` and publishes state changes; ``clock_control``
lets tests step that clock on a running stack.
"""
