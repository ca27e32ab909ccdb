#!/usr/bin/python3
# NETCONF over SSH with python3-ncclient (a client nobody here wrote) against the real
# inca-switch: key-only authentication with keys made here by ssh-keygen, <get> of
# capabilities / links / statistics, <edit-config> create + refused invalid edits (running
# config unchanged) + delete, <get-schema>, and an unauthorised key refused.
# Usage: netconf_ncclient_test.py INCA-SWITCH. Exits 77 when ncclient, ssh-keygen or NETCONF
# support in the binary is missing. Data plane on 127.0.4.40, SSH on 127.0.0.1.
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from nctest import NC, NS, SKIP, connect, free_port, ssh_keys
from ncclient.operations.rpc import RPCError
from lxml import etree


def xp(tree, path):
    return tree.xpath(path, namespaces={'s': NS})


def main():
    if len(sys.argv) != 2:
        print('usage: netconf_ncclient_test.py INCA-SWITCH')
        return 2
    exe = sys.argv[1]
    d = tempfile.mkdtemp(prefix='inca-ncclient.')
    proc = None
    try:
        ssh_keys(d, ('hostkey', 'client', 'stranger'))
        conf = os.path.join(d, 'sw.conf')
        with open(conf, 'w') as f:
            f.write('listen = 127.0.4.40:4791\nname = spine9\nrole = spine\n'
                    'max_trees = 8\nmax_slots = 4096\n'
                    'link = swp1 peer leaf1 peer_addr 127.0.4.41:4791 speed 1G\n')
        port = free_port()
        ready = os.path.join(d, 'ready')
        log = open(os.path.join(d, 'sw.log'), 'w')
        proc = subprocess.Popen([exe, '-c', conf, '--netconf-ssh', '127.0.0.1:%d' % port,
                                 '--netconf-hostkey', os.path.join(d, 'hostkey'),
                                 '--netconf-authorized-keys', os.path.join(d, 'client.pub'),
                                 '--ready-file', ready, '-vvv'], stderr=log)
        deadline = time.time() + 10
        while not os.path.exists(ready):
            if proc.poll() is not None:
                log.flush()
                text = open(os.path.join(d, 'sw.log')).read()
                if 'without NETCONF' in text:
                    print('inca-switch built without NETCONF')
                    return SKIP
                print('switch exited: %s' % text)
                return 1
            if time.time() > deadline:
                print('switch not ready')
                return 1
            time.sleep(0.05)

        m = connect(port, os.path.join(d, 'client'))
        caps = list(m.server_capabilities)
        assert any('module=inca-switch' in c for c in caps), caps
        assert 'urn:ietf:params:netconf:capability:writable-running:1.0' in caps

        # <get>: capabilities, links and statistics (state data).
        r = m.get(filter=('subtree', '<inca-switch xmlns="%s"><capabilities/><links/>'
                          '<statistics><rx-pkts/></statistics></inca-switch>' % NS))
        t = r.data_ele
        assert xp(t, '//s:capabilities/s:name/text()') == ['spine9']
        assert xp(t, '//s:capabilities/s:max-trees/text()') == ['8']
        assert xp(t, '//s:capabilities/s:used-trees/text()') == ['0']
        assert 'fp32' in xp(t, '//s:capabilities/s:data-type/text()')
        assert xp(t, '//s:links/s:link/s:peer/text()') == ['leaf1']
        assert xp(t, '//s:links/s:link/s:speed/text()') == ['1000000000']
        assert xp(t, '//s:statistics/s:rx-pkts/text()') == ['0']
        assert not xp(t, '//s:statistics/s:tx-pkts'), 'filter did not select'
        print('get: capabilities, links, statistics ok')

        # <edit-config>: a tree with a member and a child switch.
        tree = ('<config xmlns="%s"><inca-switch xmlns="%s"><trees><tree><id>5</id>'
                '<key>305419896</key><slots>128</slots><auth>disabled</auth>'
                '<member><bfr-id>1</bfr-id><address>127.0.4.42:4791</address></member>'
                '<child><address>127.0.4.41:4791</address><bfr-id>2</bfr-id>'
                '<bfr-id>3</bfr-id></child>'
                '</tree></trees></inca-switch></config>' % (NC, NS))
        m.edit_config(target='running', config=tree)
        cfg = m.get_config(source='running').data_ele
        assert xp(cfg, '//s:tree/s:id/text()') == ['5']
        assert xp(cfg, '//s:tree/s:child/s:bfr-id/text()') == ['2', '3']
        assert not xp(cfg, '//s:statistics'), 'state in get-config'
        before = etree.tostring(cfg)

        # State of the tree: A-BM and BIFT derived by the switch, per-QP statistics.
        st = m.get(filter=('xpath', ({'s': NS}, '/s:inca-switch/s:trees'))).data_ele
        assert xp(st, '//s:forwarding/s:a-bm/text()') == ['0000000000000007'], \
            etree.tostring(st)
        assert len(xp(st, '//s:forwarding/s:bift-entry')) == 3
        qs = m.get(filter=('subtree', '<inca-switch xmlns="%s"><statistics><tree><id>5</id>'
                           '<qp/></tree></statistics></inca-switch>' % NS)).data_ele
        assert sorted(xp(qs, '//s:qp/s:kind/text()')) == ['child', 'member']
        print('edit-config create, get-config, forwarding state, per-QP stats ok')

        # Invalid edits are refused with an rpc-error and change nothing.
        bad = [
            tree.replace('<bfr-id>3</bfr-id>', '<bfr-id>99</bfr-id>'),   # outside BSL 64
            tree.replace('<slots>128</slots>', '<slots>0</slots>'),      # YANG range
            tree.replace('<key>305419896</key>', '').replace(          # mandatory key
                '<tree>', '<tree xmlns:nc="%s" nc:operation="replace">' % NC),
            tree.replace('127.0.4.41:4791', '127.0.4.42:4791'),          # address twice
            tree.replace('<id>5</id>', '<id>6</id>').replace('128', '4000'),  # slot budget
            tree.replace('<id>5</id>', '<id>6</id>').replace(               # neither a key
                '<auth>disabled</auth>', ''),                                 # nor the opt-out
            '<config xmlns="%s"><inca-switch xmlns="%s"><bogus/></inca-switch></config>'
            % (NC, NS),
        ]
        for i, b in enumerate(bad):
            try:
                m.edit_config(target='running', config=b)
            except RPCError as e:
                print('refused %d: %s: %s' % (i, e.tag, e.message))
                if i == 5:
                    assert 'no data-plane key' in e.message and 'auth = off' in e.message, \
                        e.message
            else:
                raise AssertionError('edit %d accepted' % i)
            now = etree.tostring(m.get_config(source='running').data_ele)
            assert now == before, 'running config changed by refused edit %d' % i

        # Data-plane authentication: auth-key is write-only (never in get / get-config,
        # not even when a filter asks for it), auth-key-id and auth are readable.
        key = '00112233445566778899aabbccddeeff0123456789abcdeffedcba9876543210'
        atree = ('<config xmlns="%s"><inca-switch xmlns="%s"><trees><tree><id>7</id>'
                 '<key>7</key><slots>64</slots><auth-key>%s</auth-key>'
                 '<auth-key-id>4242</auth-key-id>'
                 '<member><bfr-id>1</bfr-id><address>127.0.4.43:4791</address></member>'
                 '</tree></trees></inca-switch></config>' % (NC, NS, key))
        m.edit_config(target='running', config=atree)
        replies = [
            m.get_config(source='running').data_ele,
            m.get().data_ele,
            m.get_config(source='running', filter=(
                'subtree', '<inca-switch xmlns="%s"><trees><tree><id>7</id><auth-key/>'
                '</tree></trees></inca-switch>' % NS)).data_ele,
            m.get(filter=('xpath', ({'s': NS}, '/s:inca-switch/s:trees/s:tree/s:auth-key'))
                  ).data_ele,
        ]
        for r in replies:
            text = etree.tostring(r).decode()
            assert key not in text.lower() and 'auth-key>' not in text, text
        cfg = replies[0]
        assert xp(cfg, '//s:tree[s:id="7"]/s:auth-key-id/text()') == ['4242']
        assert xp(cfg, '//s:tree[s:id="7"]/s:auth/text()') == ['enabled']
        assert xp(cfg, '//s:tree[s:id="5"]/s:auth/text()') == ['disabled']
        # A merge that leaves the key out keeps it (the tree stays authenticated).
        m.edit_config(target='running', config=(
            '<config xmlns="%s"><inca-switch xmlns="%s"><trees><tree><id>7</id>'
            '<slots>32</slots></tree></trees></inca-switch></config>' % (NC, NS)))
        cfg = m.get_config(source='running').data_ele
        assert xp(cfg, '//s:tree[s:id="7"]/s:slots/text()') == ['32']
        assert xp(cfg, '//s:tree[s:id="7"]/s:auth/text()') == ['enabled']
        assert xp(cfg, '//s:tree[s:id="7"]/s:auth-key-id/text()') == ['4242']
        before = etree.tostring(cfg)
        bad_auth = [
            atree.replace(key, key[:-1]),                                    # 63 digits
            atree.replace(key, key[:-1] + 'g'),                              # not hex
            atree.replace('<auth-key-id>4242</auth-key-id>', '<auth-key-id>0</auth-key-id>'),
            atree.replace('<id>7</id>', '<id>8</id>').replace(              # key without id
                '<auth-key-id>4242</auth-key-id>', ''),
            atree.replace('<id>7</id>', '<id>8</id>').replace(              # key + opt-out
                '<slots>64</slots>', '<slots>64</slots><auth>disabled</auth>'),
        ]
        for i, b in enumerate(bad_auth):
            try:
                m.edit_config(target='running', config=b)
            except RPCError as e:
                print('refused auth edit %d: %s: %s' % (i, e.tag, e.message))
                assert key[:40] not in (e.message or '').lower(), e.message
            else:
                raise AssertionError('auth edit %d accepted' % i)
            now = etree.tostring(m.get_config(source='running').data_ele)
            assert now == before, 'running config changed by refused auth edit %d' % i
        # auth disabled: the explicit opt-out
        m.edit_config(target='running', config=(
            '<config xmlns="%s"><inca-switch xmlns="%s"><trees><tree><id>8</id>'
            '<key>8</key><slots>16</slots><auth>disabled</auth>'
            '<member><bfr-id>1</bfr-id><address>127.0.4.44:4791</address></member>'
            '</tree></trees></inca-switch></config>' % (NC, NS)))
        cfg = m.get_config(source='running').data_ele
        assert xp(cfg, '//s:tree[s:id="8"]/s:auth/text()') == ['disabled']
        assert not xp(cfg, '//s:tree[s:id="8"]/s:auth-key-id')
        for tid in (7, 8):
            m.edit_config(target='running', config=(
                '<config xmlns="%s"><inca-switch xmlns="%s"><trees><tree '
                'xmlns:nc="%s" nc:operation="delete"><id>%d</id></tree></trees>'
                '</inca-switch></config>' % (NC, NS, NC, tid)))
        log.flush()
        assert key not in open(os.path.join(d, 'sw.log')).read().lower(), 'key in the log'
        print('auth-key write-only (get, get-config, filters, errors, log); auth-key-id, '
              'auth readable; merge keeps the key; opt-out ok')

        # <get-schema> serves the module text.
        sch = m.get_schema('inca-switch')
        assert 'module inca-switch' in sch.data

        # Lock, delete, unlock.
        with m.locked(target='running'):
            m.edit_config(target='running', config=(
                '<config xmlns="%s"><inca-switch xmlns="%s"><trees><tree '
                'xmlns:nc="%s" nc:operation="delete"><id>5</id></tree></trees>'
                '</inca-switch></config>' % (NC, NS, NC)))
        cfg = m.get_config(source='running').data_ele
        assert not xp(cfg, '//s:tree'), etree.tostring(cfg)
        print('refused edits left running unchanged; get-schema, lock, delete ok')
        m.close_session()

        # A key that is not in authorized_keys is refused.
        try:
            m2 = connect(port, os.path.join(d, 'stranger'))
            m2.close_session()
            raise AssertionError('unauthorised key accepted')
        except AssertionError:
            raise
        except Exception as e:
            print('unauthorised key refused: %s' % type(e).__name__)

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        proc = None
        print('ok')
        return 0
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
