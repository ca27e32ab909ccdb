#!/usr/bin/python3
# NETCONF conformance of inca-switch, checked with python3-ncclient (a client nobody here
# wrote) over SSH on 127.0.0.1, one case per run:
#   idle        - idle unauthenticated TCP connections (from one and from several loopback
#                 sources) do not delay a real session; the data plane keeps counting packets
#   validate    - :validate:1.1 is advertised; <validate> and test-option test-only check
#                 exactly like a real edit and change nothing
#   monitoring  - <get> of ietf-netconf-monitoring's netconf-state (RFC 6022) has
#                 capabilities, datastores, schemas, sessions and statistics
#   nacm        - an edit of ietf-netconf-acm data is refused, never answered <ok/>
#   errors      - error-path is an XPath of the offending node (RFC 6241 section 4.3), the
#                 prose in error-message; a known but unsupported RPC is
#                 operation-not-supported
#   unknown-rpc - an RPC the server does not know is operation-not-supported (RFC 6241,
#                 error-type protocol, all <rpc> attributes returned), over SSH (ncclient)
#                 and raw on the UNIX socket with both framings: a message that arrives in
#                 pieces, and pipelined RPCs answered in order
#   collectives - capabilities/collective lists every collective the switch offloads
# Usage: netconf_conformance_test.py INCA-SWITCH CASE. Exits 77 when ncclient, ssh-keygen or
# NETCONF support in the binary is missing. Data plane on 127.0.4.70-79, SSH on 127.0.0.1.
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from nctest import NC, NS, SKIP, connect, free_port, ssh_keys
from ncclient.operations.rpc import RPCError
from ncclient.xml_ import to_ele
from lxml import etree

NCM = 'urn:ietf:params:xml:ns:yang:ietf-netconf-monitoring'
NACM = 'urn:ietf:params:xml:ns:yang:ietf-netconf-acm'
# Data plane address: 127.0.4.(70 + the case's index), so the cases can run in parallel.
DATA_ADDR = ('127.0.4.70', 4791)


class Switch:
    def __init__(self, exe, d):
        self.d = d
        ssh_keys(d, ('hostkey', 'client'))
        conf = os.path.join(d, 'sw.conf')
        with open(conf, 'w') as f:
            f.write('listen = %s:%d\nname = conf1\nrole = leaf\nmax_trees = 8\n'
                    'max_slots = 4096\n' % DATA_ADDR)
        self.port = free_port()
        self.unix = os.path.join(d, 'nc.sock')
        ready = os.path.join(d, 'ready')
        self.logpath = os.path.join(d, 'sw.log')
        self.log = open(self.logpath, 'w')
        self.proc = subprocess.Popen([exe, '-c', conf, '--netconf-ssh',
                                      '127.0.0.1:%d' % self.port,
                                      '--netconf-hostkey', os.path.join(d, 'hostkey'),
                                      '--netconf-authorized-keys',
                                      os.path.join(d, 'client.pub'),
                                      '--netconf-unix', self.unix,
                                      '--ready-file', ready, '-vv'], stderr=self.log)
        deadline = time.time() + 10
        while not os.path.exists(ready):
            if self.proc.poll() is not None:
                text = open(self.logpath).read()
                if 'without NETCONF' in text:
                    print('inca-switch built without NETCONF')
                    sys.exit(SKIP)
                raise AssertionError('switch exited: %s' % text)
            if time.time() > deadline:
                raise AssertionError('switch not ready')
            time.sleep(0.05)

    def connect(self, timeout=15):
        return connect(self.port, os.path.join(self.d, 'client'), timeout)

    def stop(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError('switch did not stop on SIGTERM')
        self.proc = None
        assert rc == 0, 'switch exit status %d' % rc

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def xp(tree, path, ns=None):
    return tree.xpath(path, namespaces=ns or {'s': NS})


def tree_xml(tid, extra='', member='127.0.4.61:4791'):
    """A tree with one member, unauthenticated by explicit opt-out (no data plane runs)."""
    return ('<config xmlns="%s"><inca-switch xmlns="%s"><trees><tree><id>%d</id>'
            '<key>%d</key><slots>16</slots><auth>disabled</auth>%s'
            '<member><bfr-id>1</bfr-id><address>%s</address></member>'
            '</tree></trees></inca-switch></config>' % (NC, NS, tid, tid, extra, member))


def refused(fn, what):
    try:
        fn()
    except RPCError as e:
        print('%s refused: %s: %s (path %s)' % (what, e.tag, e.message, e.path))
        return e
    raise AssertionError('%s accepted' % what)


def running(m):
    return etree.tostring(m.get_config(source='running').data_ele)


def sel_in_edit(path, config):
    """The text of what a YANG instance path (module prefix on the first step only) selects
    in an edit's <config>."""
    p = path.strip().replace('/inca-switch:', '/s:', 1)
    p = re.sub(r'/([a-z][\w-]*)(?=[/\[]|$)', r'/s:\1', p)
    p = re.sub(r'\[([a-z][\w-]*)=', r'[s:\1=', p)
    return [x.text if x.text and x.text.strip() else
            (x.findtext('{%s}bfr-id' % NS) or x.findtext('{%s}id' % NS))
            for x in to_ele(config).xpath('/nc:config' + p, namespaces={'s': NS, 'nc': NC})]


def rx_pkts(m):
    st = m.get(filter=('subtree', '<inca-switch xmlns="%s"><statistics><rx-pkts/>'
                       '</statistics></inca-switch>' % NS)).data_ele
    return int(xp(st, '//s:statistics/s:rx-pkts/text()')[0])


# ---------------------------------------------------------------- cases

# The server gives an unauthenticated connection several seconds; a session that has to wait
# for even one of them to time out blows this.
IDLE_BOUND_S = 3.0


def case_idle(sw):
    idle = []
    # 8 from 127.0.0.1 (the client's own source) and 3 from each of 4 other loopback sources
    for i in range(8):
        idle.append(socket.create_connection(('127.0.0.1', sw.port)))
    for src in range(4):
        for i in range(3):
            s = socket.socket()
            s.bind(('127.0.5.%d' % (src + 1), 0))
            s.connect(('127.0.0.1', sw.port))
            idle.append(s)
    time.sleep(0.3)  # the server has seen them all
    t0 = time.time()
    m = sw.connect(timeout=30)
    cfg = m.get_config(source='running').data_ele
    t = time.time() - t0
    print('session + get-config with %d idle connections: %.2f s (bound %.1f s)'
          % (len(idle), t, IDLE_BOUND_S))
    assert xp(cfg, '/*') is not None
    assert t < IDLE_BOUND_S, 'session waited %.2f s behind idle connections' % t
    # Several sessions at once, still behind the idle connections.
    t0 = time.time()
    more = [sw.connect(timeout=30) for _ in range(3)]
    for s in more:
        s.get_config(source='running')
        s.close_session()
    t = time.time() - t0
    print('3 more sessions: %.2f s' % t)
    assert t < 2 * IDLE_BOUND_S, '3 sessions took %.2f s' % t
    # Edits work and the data plane keeps receiving: datagrams to the data port are counted.
    m.edit_config(target='running', config=tree_xml(3))
    before = rx_pkts(m)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(5):
        u.sendto(b'\x00' * 64, DATA_ADDR)
    deadline = time.time() + 5
    while rx_pkts(m) < before + 5:
        assert time.time() < deadline, 'data plane did not count the datagrams'
        time.sleep(0.05)
    print('data plane counted the datagrams')
    # Connections that never authenticate are eventually closed by the server.
    deadline = time.time() + 30
    s = idle[-1]
    s.settimeout(30)
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass
    assert time.time() < deadline, 'unauthenticated connection kept open'
    print('an idle unauthenticated connection was closed after %.1f s' % (time.time() - t0))
    m.close_session()
    for s in idle:
        s.close()


def case_validate(sw):
    m = sw.connect()
    caps = list(m.server_capabilities)
    assert 'urn:ietf:params:netconf:capability:validate:1.1' in caps, caps
    m.validate(source='running')
    before = running(m)
    # test-only: a valid edit is answered <ok/> and not applied
    m.edit_config(target='running', config=tree_xml(4), test_option='test-only')
    assert running(m) == before, 'test-only edit was applied'
    # test-only: refused with the same checks as a real edit (YANG and the switch's own)
    refused(lambda: m.edit_config(target='running', test_option='test-only',
                                  config=tree_xml(4, '<bsl>100</bsl>')), 'test-only bsl 100')
    refused(lambda: m.edit_config(target='running', test_option='test-only',
                                  config=tree_xml(4).replace('<bfr-id>1</bfr-id>',
                                                             '<bfr-id>65</bfr-id>')),
            'test-only BFR-id outside the BSL')
    refused(lambda: m.edit_config(target='running', test_option='test-only',
                                  config=tree_xml(4).replace('<slots>16</slots>',
                                                             '<slots>4097</slots>')),
            'test-only slot budget')
    # test-then-set and set apply
    m.edit_config(target='running', config=tree_xml(4), test_option='test-then-set')
    assert xp(m.get_config(source='running').data_ele, '//s:tree/s:id/text()') == ['4']
    # <validate> of an inline config: a whole configuration, checked like an edit
    good = to_ele(tree_xml(6))
    m.validate(source=good)
    bad = to_ele(tree_xml(6).replace('<bfr-id>1</bfr-id>', '<bfr-id>65</bfr-id>'))
    refused(lambda: m.validate(source=bad), 'validate BFR-id outside the BSL')
    bad = to_ele(tree_xml(6).replace('<key>6</key>', ''))
    e = refused(lambda: m.validate(source=bad), 'validate without the mandatory key')
    assert e.path and e.path.strip().startswith("/inca-switch:inca-switch/trees/tree[id='6']"), \
        e.path
    refused(lambda: m.validate(source='candidate'), 'validate candidate')
    assert xp(m.get_config(source='running').data_ele, '//s:tree/s:id/text()') == ['4'], \
        'validate changed running'
    m.close_session()


def case_monitoring(sw):
    m = sw.connect()
    m2 = sw.connect()
    m.get_config(source='running')
    refused(lambda: m.edit_config(target='running', config=tree_xml(4, '<bsl>100</bsl>')),
            'bad edit')
    r = m.get(filter=('subtree', '<netconf-state xmlns="%s"/>' % NCM)).data_ele
    ns = {'m': NCM}
    print(etree.tostring(r, pretty_print=True).decode()[:1500])
    caps = xp(r, '//m:netconf-state/m:capabilities/m:capability/text()', ns)
    assert 'urn:ietf:params:netconf:base:1.1' in caps, caps
    assert any('module=inca-switch' in c for c in caps), caps
    assert sorted(caps) == sorted(m.server_capabilities), 'capabilities differ from <hello>'
    assert xp(r, '//m:datastores/m:datastore/m:name/text()', ns) == ['running']
    ids = xp(r, '//m:schemas/m:schema/m:identifier/text()', ns)
    assert 'inca-switch' in ids and 'ietf-netconf' in ids, ids
    fmts = set(xp(r, '//m:schemas/m:schema/m:format/text()', ns))
    assert all(f.endswith('yang') for f in fmts), fmts
    assert set(xp(r, '//m:schemas/m:schema/m:location/text()', ns)) == {'NETCONF'}
    sids = xp(r, '//m:sessions/m:session/m:session-id/text()', ns)
    assert str(m.session_id) in sids and str(m2.session_id) in sids, (sids, m.session_id)
    me = '//m:sessions/m:session[m:session-id="%s"]' % m.session_id
    assert xp(r, me + '/m:username/text()', ns) == ['inca']
    assert xp(r, me + '/m:transport/text()', ns)[0].endswith('netconf-ssh')
    assert xp(r, me + '/m:source-host/text()', ns) == ['127.0.0.1']
    assert int(xp(r, me + '/m:in-rpcs/text()', ns)[0]) >= 2
    assert int(xp(r, me + '/m:out-rpc-errors/text()', ns)[0]) >= 1
    assert xp(r, me + '/m:login-time/text()', ns)
    st = '//m:netconf-state/m:statistics/'
    assert xp(r, st + 'm:netconf-start-time/text()', ns)
    assert int(xp(r, st + 'm:in-sessions/text()', ns)[0]) >= 2
    assert int(xp(r, st + 'm:in-rpcs/text()', ns)[0]) >= 2
    assert int(xp(r, st + 'm:out-rpc-errors/text()', ns)[0]) >= 1
    # filters work on it like on the switch's own data
    r = m.get(filter=('xpath', ({'m': NCM}, '/m:netconf-state/m:datastores'))).data_ele
    assert xp(r, '//m:datastore/m:name/text()', ns) == ['running']
    assert not xp(r, '//m:sessions', ns)
    # it is state data: not in get-config
    assert not xp(m.get_config(source='running').data_ele, '//m:netconf-state', ns)
    m2.close_session()
    r = m.get(filter=('subtree', '<netconf-state xmlns="%s"><sessions/></netconf-state>'
                      % NCM)).data_ele
    sids = xp(r, '//m:sessions/m:session/m:session-id/text()', ns)
    assert str(m2.session_id) not in sids, 'closed session still listed'
    m.close_session()


def case_nacm(sw):
    m = sw.connect()
    before = running(m)
    e = refused(lambda: m.edit_config(target='running', config=(
        '<config xmlns="%s"><nacm xmlns="%s"><enable-nacm>false</enable-nacm>'
        '<rule-list><name>all</name><group>*</group><rule><name>r</name>'
        '<module-name>*</module-name><action>permit</action></rule></rule-list>'
        '</nacm></config>' % (NC, NACM))), 'NACM edit')
    assert e.tag in ('operation-not-supported', 'access-denied', 'unknown-namespace'), e.tag
    assert running(m) == before
    # nor mixed into an edit of the switch's own data
    e = refused(lambda: m.edit_config(target='running', config=tree_xml(4).replace(
        '</config>', '<nacm xmlns="%s"><enable-nacm>false</enable-nacm></nacm></config>'
        % NACM)), 'NACM edit with a tree')
    assert running(m) == before
    # and what the server does not hold is not reported as configuration either
    cfg = m.get_config(source='running').data_ele
    assert not xp(cfg, '//n:nacm', {'n': NACM})
    m.close_session()


def case_errors(sw):
    m = sw.connect()
    m.edit_config(target='running', config=tree_xml(4))
    # a YANG-level refusal: the path of the bad leaf
    e = refused(lambda: m.edit_config(target='running', config=tree_xml(4, '<bsl>100</bsl>')),
                'bsl 100')
    assert e.tag == 'invalid-value', e.tag
    assert e.path and e.path.strip().startswith('/'), 'error-path not an XPath: %r' % e.path
    assert sel_in_edit(e.path, tree_xml(4, '<bsl>100</bsl>')) == ['100'], e.path
    assert e.message and ' ' in e.message, 'error-message: %r' % e.message
    # the switch's own checks: the member that is outside the BSL range
    e = refused(lambda: m.edit_config(target='running', config=tree_xml(4).replace(
        '<bfr-id>1</bfr-id>', '<bfr-id>65</bfr-id>')), 'BFR-id 65')
    assert e.path and e.path.strip().startswith('/'), 'error-path not an XPath: %r' % e.path
    assert ' ' not in e.path.strip(), e.path
    # The path must select the node in the edited data.
    assert sel_in_edit(e.path, tree_xml(4).replace('<bfr-id>1</bfr-id>', '<bfr-id>65</bfr-id>')
                       ) == ['65'], e.path
    # create of an existing tree: data-exists at the tree
    e = refused(lambda: m.edit_config(target='running', config=tree_xml(4).replace(
        '<tree>', '<tree xmlns:nc="%s" nc:operation="create">' % NC)), 'create twice')
    assert e.tag == 'data-exists', e.tag
    assert e.path.strip().startswith('/inca-switch:inca-switch/trees/tree'), e.path
    # a known but unsupported one, too
    e = refused(lambda: m.dispatch(to_ele('<kill-session xmlns="%s"><session-id>99'
                                          '</session-id></kill-session>' % NC)), 'kill-session')
    assert e.tag == 'operation-not-supported', e.tag
    e = refused(lambda: m.dispatch(to_ele('<copy-config xmlns="%s"><target><running/></target>'
                                          '<source><running/></source></copy-config>' % NC)),
                'copy-config')
    assert e.tag == 'operation-not-supported', e.tag
    # the session still works
    assert xp(m.get_config(source='running').data_ele, '//s:tree/s:id/text()') == ['4']
    m.close_session()


class Raw:
    """A NETCONF session on the switch's UNIX socket, framed by hand: base:1.0 (end marker)
    or, with v11, base:1.1 (chunks)."""

    def __init__(self, path, v11):
        self.v11 = v11
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(5)
        self.s.connect(path)
        self.buf = b''
        self.read_eom()  # the server's <hello>
        caps = '<capability>urn:ietf:params:netconf:base:1.0</capability>'
        if v11:
            caps += '<capability>urn:ietf:params:netconf:base:1.1</capability>'
        self.s.sendall(('<?xml version="1.0" encoding="UTF-8"?><hello xmlns="%s">'
                        '<capabilities>%s</capabilities></hello>]]>]]>' % (NC, caps)).encode())

    def read_eom(self):
        while b']]>]]>' not in self.buf:
            d = self.s.recv(65536)
            assert d, 'session closed'
            self.buf += d
        msg, _, self.buf = self.buf.partition(b']]>]]>')
        return msg.decode()

    def read_chunked(self):
        out = b''
        while True:
            while not re.match(rb'\n#(#\n|\d+\n)', self.buf):
                d = self.s.recv(65536)
                assert d, 'session closed'
                self.buf += d
            m = re.match(rb'\n#(#\n|\d+\n)', self.buf)
            self.buf = self.buf[m.end():]
            if m.group(1) == b'#\n':
                return out.decode()
            n = int(m.group(1))
            while len(self.buf) < n:
                self.buf += self.s.recv(65536)
            out, self.buf = out + self.buf[:n], self.buf[n:]

    def read(self):
        return self.read_chunked() if self.v11 else self.read_eom()

    def frame(self, xml, pieces=1):
        """The message's bytes; with v11 cut into `pieces` chunks."""
        b = xml.encode()
        if not self.v11:
            return b + b']]>]]>'
        step = -(-len(b) // pieces)
        return b''.join(b'\n#%d\n' % len(b[i:i + step]) + b[i:i + step]
                        for i in range(0, len(b), step)) + b'\n##\n'

    def close(self):
        self.s.close()


def unknown_reply_ok(text, mid, what):
    r = to_ele(text)
    assert etree.QName(r).localname == 'rpc-reply', '%s: %s' % (what, text)
    assert r.get('message-id') == mid, '%s: message-id %s' % (what, r.get('message-id'))
    tag = r.xpath('//nc:rpc-error/nc:error-tag/text()', namespaces={'nc': NC})
    typ = r.xpath('//nc:rpc-error/nc:error-type/text()', namespaces={'nc': NC})
    assert tag == ['operation-not-supported'] and typ == ['protocol'], '%s: %s' % (what, text)
    print('%s: operation-not-supported' % what)
    return r


def case_unknown_rpc(sw):
    m = sw.connect()
    # an unknown RPC: operation-not-supported
    e = refused(lambda: m.dispatch(to_ele('<frobnicate xmlns="urn:example:nothing"/>')),
                'unknown RPC')
    assert e.tag == 'operation-not-supported', e.tag
    assert e.type in ('rpc', 'protocol'), e.type
    e = refused(lambda: m.dispatch(to_ele('<frobnicate xmlns="%s"/>' % NC)),
                'unknown RPC in the base namespace')
    assert e.tag == 'operation-not-supported', e.tag
    # the session goes on
    assert xp(m.get_config(source='running').data_ele, '//s:tree') == []
    m.close_session()

    unknown = ('<rpc message-id="%s" xmlns="%s" xmlns:ex="urn:example:x" ex:trace="t-%s">'
               '<ex:frobnicate><ex:arg>1</ex:arg></ex:frobnicate></rpc>')
    get_cfg = ('<rpc message-id="%s" xmlns="%s"><get-config><source><running/></source>'
               '</get-config></rpc>')
    for v11 in (False, True):
        name = 'base:1.1' if v11 else 'base:1.0'
        r = Raw(sw.unix, v11)
        # in pieces: the first one ends inside the operation's name
        msg = r.frame(unknown % ('7', NC, '7'), pieces=3)
        cut = msg.index(b'frob') + 3
        r.s.sendall(msg[:cut])
        time.sleep(0.3)
        r.s.sendall(msg[cut:])
        rep = unknown_reply_ok(r.read(), '7', '%s, sent in pieces' % name)
        assert rep.get('{urn:example:x}trace') == 't-7', 'attributes not returned: %s' % \
            etree.tostring(rep)
        # pipelined: known, unknown, known; answered in order
        r.s.sendall(r.frame(get_cfg % ('8', NC)) + r.frame(unknown % ('9', NC, '9')) +
                    r.frame(get_cfg % ('10', NC)))
        for mid in ('8', '9', '10'):
            rep = to_ele(r.read())
            assert rep.get('message-id') == mid, 'reply %s out of order' % rep.get('message-id')
            if mid == '9':
                unknown_reply_ok(etree.tostring(rep).decode(), '9', '%s, pipelined' % name)
            else:
                assert rep.xpath('//nc:data', namespaces={'nc': NC}), etree.tostring(rep)
        r.close()


def case_collectives(sw):
    m = sw.connect()
    r = m.get(filter=('subtree', '<inca-switch xmlns="%s"><capabilities><collective/>'
                      '</capabilities></inca-switch>' % NS)).data_ele
    colls = sorted(xp(r, '//s:capabilities/s:collective/text()'))
    print('collectives: %s' % colls)
    assert colls == sorted(['allreduce', 'reduce', 'bcast', 'allgather', 'reduce-scatter',
                            'barrier']), colls
    m.close_session()


CASES = {
    'idle': case_idle,
    'validate': case_validate,
    'monitoring': case_monitoring,
    'nacm': case_nacm,
    'errors': case_errors,
    'unknown-rpc': case_unknown_rpc,
    'collectives': case_collectives,
}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        print('usage: netconf_conformance_test.py INCA-SWITCH %s' % '|'.join(CASES))
        return 2
    global DATA_ADDR
    DATA_ADDR = ('127.0.4.%d' % (70 + list(CASES).index(sys.argv[2])), 4791)
    d = tempfile.mkdtemp(prefix='inca-ncconf.')
    sw = None
    try:
        sw = Switch(sys.argv[1], d)
        CASES[sys.argv[2]](sw)
        sw.stop()
        print('ok')
        return 0
    except Exception:
        if sw is not None and sw.proc is not None:
            sw.log.flush()
            sys.stderr.write('--- switch log (tail) ---\n')
            sys.stderr.write(open(sw.logpath).read()[-4000:])
        raise
    finally:
        if sw is not None:
            sw.kill()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
