"""Helpers shared by the inca-am Python tests (imported from the tests' own directory)."""
import socket


def free_port():
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
