"""flakeid: the Python client of the flakeid ID service.

It asks one of several servers for Snowflake IDs, segment IDs, series
numbers and UUID-shaped texts over the HTTP/JSON API, fails over between
them (honouring Retry-After), and can keep a local buffer of prefetched IDs
so that most calls never touch the network::

    import flakeid
    with flakeid.Client(flakeid.Config.default()) as client:
        print(client.next_id())

or makes them itself, under a worker-id lease a server holds for it::

    with flakeid.Client(flakeid.Config.default()) as client:
        with client.local_generator("billing") as gen:
            print(gen.next_id())

Standard library only; Python 3.11 or later.
"""

from .client import (DEFAULT_BACKOFF_MAX, DEFAULT_BACKOFF_MIN, DEFAULT_ENDPOINT, DEFAULT_LOW_WATER, DEFAULT_TIMEOUT,
                     MAX_COUNT, Bounds, BufferConfig, Client, Config, Parts)
from .local import LocalGenerator
from .segment import Segment
from .errors import (APIError, Closed, FlakeidError, InvalidArgument, InvalidConfig, NotFound, Overlap,
                     PermissionDenied, Unauthenticated, Unavailable)

__all__ = [
    "APIError", "Bounds", "BufferConfig", "Client", "Closed", "Config", "DEFAULT_BACKOFF_MAX", "DEFAULT_BACKOFF_MIN",
    "DEFAULT_ENDPOINT", "DEFAULT_LOW_WATER", "DEFAULT_TIMEOUT", "FlakeidError", "InvalidArgument", "InvalidConfig",
    "LocalGenerator", "MAX_COUNT", "NotFound", "Overlap", "Parts", "PermissionDenied", "Segment", "Unauthenticated",
    "Unavailable",
]
