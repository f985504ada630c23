"""Read benchmark: the C core against the pure-Python core, a naive reader, cgget and floors."""
