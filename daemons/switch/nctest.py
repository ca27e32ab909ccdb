"""Helpers shared by inca-switch's NETCONF tests in Python (imported from the tests' own
directory): the namespaces, python3-ncclient or SKIP, free ports, SSH keys made by ssh-keygen,
and an ncclient session to a switch on 127.0.0.1."""
import os
import random
import shutil
import socket
import subprocess
import sys

SKIP = 77
NS = 'urn:inca:yang:inca-switch'
NC = 'urn:ietf:params:xml:ns:netconf:base:1.0'

try:
    from ncclient import manager
except ImportError as e:
    print('python3-ncclient missing: %s' % e)
    sys.exit(SKIP)


def free_port():
    for _ in range(50):
        port = random.randint(20000, 60000)
        s = socket.socket()
        try:
            s.bind(('127.0.0.1', port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError('no free port')


def ssh_keys(d, names):
    """An ed25519 key pair d/NAME, d/NAME.pub per name (SKIP without ssh-keygen)."""
    if not shutil.which('ssh-keygen'):
        print('ssh-keygen missing (openssh-client)')
        sys.exit(SKIP)
    for k in names:
        subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', k, '-f',
                        os.path.join(d, k)], check=True)


def connect(port, key, timeout=15):
    """An ncclient session as user inca with the private key file key."""
    return manager.connect(host='127.0.0.1', port=port, username='inca', key_filename=key,
                           hostkey_verify=False, allow_agent=False, look_for_keys=False,
                           timeout=timeout)
