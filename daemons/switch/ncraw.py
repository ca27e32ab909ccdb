"""One raw NETCONF 1.0 session over inca-switch's UNIX socket, for tests that read the switch's
state without python3-ncclient (the AM's key tests, the metrics tests). Imported with this
directory on sys.path; nctest.py is the ncclient side."""
import socket

HELLO = ('<?xml version="1.0" encoding="UTF-8"?><hello '
         'xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><capabilities><capability>'
         'urn:ietf:params:netconf:base:1.0</capability></capabilities></hello>]]>]]>')


def rpc(sock_path, op, timeout=10):
    """The reply text of the one operation op (XML inside <rpc>), after the hello exchange."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock_path)

    def read_msg():
        buf = b""
        while b"]]>]]>" not in buf:
            d = s.recv(65536)
            if not d:
                break
            buf += d
        return buf.decode()

    try:
        read_msg()
        s.sendall(HELLO.encode())
        s.sendall(('<rpc message-id="1" xmlns="urn:ietf:params:xml:ns:netconf:base:1.0">%s'
                   '</rpc>]]>]]>' % op).encode())
        return read_msg()
    finally:
        s.close()
