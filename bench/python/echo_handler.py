"""The null function under awslambdaric: answers with its event, imports nothing.

Its cold start is the Python runtime's own floor (interpreter and awslambdaric),
its warm invoke the floor of one round trip through the bench's Runtime API.
"""


def handler(event, context):
    return event
