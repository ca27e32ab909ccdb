#!/usr/bin/python3
"""inca-am's safe defaults, checked with python3-grpcio (a client nobody here wrote) over TLS
(openssl makes the CA and the certificate at test time):
  tls       the AM refuses to start without a certificate unless told 'tls = off' /
            --insecure, and then warns loudly;
  admin     Dismantle is refused without admin_token configured (the message says how to set
            it), and with a wrong token; the admin token works in the metadata or the request;
  views     queries need a credential in the metadata: anonymous -> UNAUTHENTICATED, a wrong
            credential -> PERMISSION_DENIED; a job's credential shows that job's groups and
            trees only (no member address or QPN of another job), the admin token everything;
  learned   first-joiner credentials expire once their job has had no group for
            first_joiner_ttl_s: a squatted job id is free again, a table full of bogus jobs
            gives RESOURCE_EXHAUSTED naming the limit and empties; the journal forgets them;
  health    grpc.health.v1 Check (SERVING, NOT_FOUND for an unknown service) and Watch;
  reflect   server reflection (v1alpha and v1): list_services, file_containing_symbol and
            file_by_filename return inca_am.proto's FileDescriptorProto (parsed with
            protobuf's own descriptor_pb2, compared with protoc's), unknown symbol NOT_FOUND.
The health and reflection messages are written here from the public gRPC definitions.
Usage: am_secure_test.py PATH-TO-inca-am PATH-TO-inca_am.proto"""
import os
import shutil
import subprocess
import sys
import time

import amtest
from amtest import free_port, wait_file

AM, PROTO = sys.argv[1], sys.argv[2]

HEALTH = """syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
"""
REFLECTION = """syntax = "proto3";
package testreflection;
message ServerReflectionRequest {
  string host = 1;
  oneof message_request {
    string file_by_filename = 3;
    string file_containing_symbol = 4;
    string list_services = 7;
  }
}
message ServerReflectionResponse {
  string valid_host = 1;
  ServerReflectionRequest original_request = 2;
  oneof message_response {
    FileDescriptorResponse file_descriptor_response = 4;
    ListServiceResponse list_services_response = 6;
    ErrorResponse error_response = 7;
  }
}
message FileDescriptorResponse { repeated bytes file_descriptor_proto = 1; }
message ListServiceResponse { repeated ServiceResponse service = 1; }
message ServiceResponse { string name = 1; }
message ErrorResponse { int32 error_code = 1; string error_message = 2; }
"""
grpc, pb, pbg, tmp = amtest.grpc_stubs(PROTO, "inca-am-secure-", need_openssl=True,
                                       extra_protos={"t_health.proto": HEALTH,
                                                     "t_reflection.proto": REFLECTION})
from google.protobuf import descriptor_pb2  # noqa: E402
from grpc_tools import protoc  # noqa: E402
import t_health_pb2 as hpb  # noqa: E402
import t_reflection_pb2 as rpb  # noqa: E402

check = amtest.Checker()
ADMIN_TOKEN = "adm-7f3e"
ADMIN = (("inca-admin-token", ADMIN_TOKEN),)
amtest.make_certs(tmp, "IP:127.0.0.1")
with open(os.path.join(tmp, "ca.pem"), "rb") as f:
    CA = f.read()
TLS = ["--tls-cert", os.path.join(tmp, "am.crt"), "--tls-key", os.path.join(tmp, "am.key")]


class Am:
    """inca-am with a config; stderr into a log file."""

    def __init__(self, conf_text, args=(), journal=None, wait=True):
        self.port = free_port()
        self.conf = os.path.join(tmp, "am%d.conf" % self.port)
        self.log = os.path.join(tmp, "am%d.log" % self.port)
        ready = os.path.join(tmp, "am%d.ready" % self.port)
        with open(self.conf, "w") as f:
            f.write("listen = 127.0.0.1:%d\n%s" % (self.port, conf_text))
        cmd = [AM, "-c", self.conf, "--ready-file", ready, "-v"] + list(args)
        if journal:
            cmd += ["-j", journal]
        self.p = subprocess.Popen(cmd, stderr=open(self.log, "w"))
        self.ch = None
        self.up = wait_file(ready, self.p) if wait else os.path.exists(ready)

    def channel(self, tls=True):
        t = "127.0.0.1:%d" % self.port
        self.ch = grpc.secure_channel(t, grpc.ssl_channel_credentials(root_certificates=CA)) \
            if tls else grpc.insecure_channel(t)
        return self.ch

    def stop(self):
        if self.ch:
            self.ch.close()
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        with open(self.log) as f:
            return f.read()


# The members these cases join never open a session, so nothing pings for them: with the
# default heartbeat (4 x 500 ms) a slow run would see their groups removed before it lists or
# dismantles them. These cases are about credentials, not heartbeats.
NO_HB_TIMEOUT = "heartbeat_ms = 60000\n"


def code_of(fn):
    try:
        fn()
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details() or ""


def join(stub, job, cred, rank=0, size=2, host="h"):
    return stub.Join(pb.JoinRequest(job_id=job, job_credential=cred, rank=rank, size=size,
                                    data_addr="127.0.0.%d:5000" % (20 + rank), host_name=host,
                                    caps=pb.Capabilities(inc=True)), timeout=5)


def case_tls():
    am = Am("job j credential c\n")
    rc = am.p.wait(timeout=10)
    log = am.stop()
    check(rc == 2 and not am.up and "tls = off" in log and "--insecure" in log,
          "no certificate: the AM refuses to start and names the opt-out (rc %s)" % rc)
    am = Am("job j credential c\ntls = off\n", args=["--tls-cert", TLS[1], "--tls-key", TLS[3]])
    rc = am.p.wait(timeout=10)
    am.stop()
    check(rc == 2, "tls = off together with a certificate is refused")
    for how, conf, args in (("tls = off", "tls = off\n", []), ("--insecure", "", ["--insecure"])):
        am = Am("job j credential c\nadmin_token = %s\n%s" % (ADMIN_TOKEN, conf), args=args)
        ok = am.up and code_of(lambda: pbg.AmStub(am.channel(tls=False)).GetStats(
            pb.Empty(), timeout=5, metadata=ADMIN))[0] == grpc.StatusCode.OK
        log = am.stop()
        check(ok and "WARNING: gRPC without TLS" in log,
              "%s: plaintext served, with a loud warning" % how)


def case_admin():
    am = Am("job j credential c\n", TLS)
    stub = pbg.AmStub(am.channel())
    g = join(stub, "j", "c", size=1).group_id
    for what, md, tok in (("anonymous", (), ""), ("request token", (), "guess"),
                          ("metadata token", (("inca-admin-token", "guess"),), "")):
        c, d = code_of(lambda: stub.Dismantle(pb.DismantleRequest(group_id=g, admin_token=tok),
                                              timeout=5, metadata=md))
        check(c == grpc.StatusCode.PERMISSION_DENIED and "admin_token" in d,
              "no admin_token configured: Dismantle (%s) refused, says how (%s: %s)" %
              (what, c, d))
    log = am.stop()
    check("DENIED dismantle" in log, "the refusal is logged")

    am = Am("job j credential c\nadmin_token = %s\n%s" % (ADMIN_TOKEN, NO_HB_TIMEOUT), TLS)
    stub = pbg.AmStub(am.channel())
    g = join(stub, "j", "c", size=1).group_id
    c, _ = code_of(lambda: stub.Dismantle(pb.DismantleRequest(group_id=g, admin_token="guess"),
                                          timeout=5))
    check(c == grpc.StatusCode.PERMISSION_DENIED, "wrong admin token refused")
    c, _ = code_of(lambda: stub.Dismantle(pb.DismantleRequest(group_id=g), timeout=5,
                                          metadata=(("inca-job-id", "j"),
                                                    ("inca-job-credential", "c"))))
    check(c == grpc.StatusCode.PERMISSION_DENIED, "a job's credential cannot Dismantle")
    c, _ = code_of(lambda: stub.Dismantle(pb.DismantleRequest(group_id=g), timeout=5,
                                          metadata=ADMIN))
    check(c == grpc.StatusCode.OK, "admin token in the metadata: Dismantle works")
    g2 = join(stub, "j", "c", size=1).group_id
    c, _ = code_of(lambda: stub.Dismantle(pb.DismantleRequest(group_id=g2,
                                                              admin_token=ADMIN_TOKEN),
                                          timeout=5))
    check(c == grpc.StatusCode.OK, "admin token in the request: Dismantle works")
    st = stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)
    check(st.operator_denied == 2 and st.dismantles >= 2,
          "denials counted (operator_denied %d)" % st.operator_denied)
    am.stop()


def case_views():
    am = Am("job ja credential ca\njob jb credential cb\nadmin_token = %s\n%s" %
            (ADMIN_TOKEN, NO_HB_TIMEOUT), TLS)
    stub = pbg.AmStub(am.channel())
    ga = join(stub, "ja", "ca", rank=0, size=2, host="hosta").group_id
    gb = join(stub, "jb", "cb", rank=1, size=2, host="hostb").group_id
    A = (("inca-job-id", "ja"), ("inca-job-credential", "ca"))
    for m in ("ListGroups", "ListTrees", "ListSwitches", "ListLinks", "GetStats"):
        fn = getattr(stub, m)
        c, d = code_of(lambda: fn(pb.Empty(), timeout=5))
        check(c == grpc.StatusCode.UNAUTHENTICATED and "inca-admin-token" in d,
              "anonymous %s refused, the message names the credentials (%s)" % (m, c))
        c, _ = code_of(lambda: fn(pb.Empty(), timeout=5,
                                  metadata=(("inca-job-id", "ja"), ("inca-job-credential", "cb"))))
        check(c == grpc.StatusCode.PERMISSION_DENIED, "%s with a wrong job credential" % m)
        c, _ = code_of(lambda: fn(pb.Empty(), timeout=5, metadata=(("inca-admin-token", "x"),)))
        check(c == grpc.StatusCode.PERMISSION_DENIED, "%s with a wrong admin token" % m)
    r = stub.ListGroups(pb.Empty(), timeout=5, metadata=A)
    raw = r.SerializeToString()
    check([g.group_id for g in r.groups] == [ga] and b"jb" not in raw and b"hostb" not in raw
          and b"127.0.0.21" not in raw, "job ja sees its own group only, nothing of job jb")
    check(stub.GetStats(pb.Empty(), timeout=5, metadata=A).active_groups == 1,
          "GetStats.active_groups counts the caller's groups")
    r = stub.ListGroups(pb.Empty(), timeout=5, metadata=ADMIN)
    check(sorted(g.group_id for g in r.groups) == sorted([ga, gb]), "the admin sees every group")
    check(stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN).queries_denied == 15,
          "queries_denied counts the refusals")
    # `inca` with a job's credential (environment) and with the admin token (option)
    cli = os.path.join(os.path.dirname(AM), "inca")
    if os.access(cli, os.X_OK):
        env = dict(os.environ, INCA_AM_CA=os.path.join(tmp, "ca.pem"), INCA_JOB_ID="ja",
                   INCA_JOB_CREDENTIAL="ca")
        base = [cli, "--am", "127.0.0.1:%d" % am.port]
        r1 = subprocess.run(base + ["clients"], env=env, capture_output=True, text=True,
                            timeout=20)
        r2 = subprocess.run(base + ["--admin-token", ADMIN_TOKEN, "clients"], env=env,
                            capture_output=True, text=True, timeout=20)
        r3 = subprocess.run(base + ["--ca", os.path.join(tmp, "ca.pem"), "groups"],
                            capture_output=True, text=True, timeout=20)
        check(r1.returncode == 0 and "hosta" in r1.stdout and "hostb" not in r1.stdout,
              "inca clients with INCA_JOB_ID/INCA_JOB_CREDENTIAL: that job only\n" + r1.stdout +
              r1.stderr)
        check(r2.returncode == 0 and "hosta" in r2.stdout and "hostb" in r2.stdout,
              "inca --admin-token clients: every group\n" + r2.stdout + r2.stderr)
        check(r3.returncode != 0 and "credential" in r3.stderr and
              r3.stderr.count("\n") == 1, "inca without a credential: one line saying why")
    am.stop()


def case_learned():
    journal = os.path.join(tmp, "learned.journal")
    conf = ("allow_first_joiner = yes\nfirst_joiner_ttl_s = 2\nheartbeat_ms = 200\n"
            "heartbeat_misses = 2\nadmin_token = %s\n" % ADMIN_TOKEN)
    am = Am(conf, TLS, journal=journal)
    stub = pbg.AmStub(am.channel())
    join(stub, "squat", "mine", size=2)
    c, _ = code_of(lambda: join(stub, "squat", "theirs", rank=1, size=2))
    check(c == grpc.StatusCode.PERMISSION_DENIED, "a learned job refuses another credential")
    t0 = time.time()
    for i in range(63):
        join(stub, "bogus%d" % i, "x", size=2)
    print("# 64 first joins in %.2f s" % (time.time() - t0))
    c, d = code_of(lambda: join(stub, "late", "y", size=2))
    check(c == grpc.StatusCode.RESOURCE_EXHAUSTED and "64" in d and "first_joiner_ttl_s" in d,
          "table full: RESOURCE_EXHAUSTED naming the limit (%s: %s)" % (c, d))
    # the forming groups lose their silent rank, then the jobs expire
    t0 = time.time()
    while time.time() - t0 < 15:
        st = stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)
        if st.learned_jobs == 0:
            break
        time.sleep(0.2)
    check(st.learned_jobs == 0 and st.learned_expired == 64,
          "every learned job expired (%d left, %d expired)" % (st.learned_jobs,
                                                               st.learned_expired))
    check(code_of(lambda: join(stub, "late", "y", size=1))[0] == grpc.StatusCode.OK,
          "the table has room again")
    check(code_of(lambda: join(stub, "squat", "theirs", size=1))[0] == grpc.StatusCode.OK,
          "the squatted job id is free again")
    am.stop()
    with open(journal) as f:
        text = f.read()
    check("E bogus5" in text, "the journal records the expiry")
    am = Am(conf, TLS, journal=journal)
    st = pbg.AmStub(am.channel()).GetStats(pb.Empty(), timeout=5, metadata=ADMIN)
    check(st.learned_jobs == 2, "after a restart only the live jobs are known (%d)" %
          st.learned_jobs)
    am.stop()


def unary(ch, path, req, resp_cls, **kw):
    return ch.unary_unary(path, request_serializer=lambda m: m.SerializeToString(),
                          response_deserializer=resp_cls.FromString)(req, timeout=5, **kw)


def case_health_reflection():
    am = Am("job j credential c\n", TLS)
    ch = am.channel()
    chk = "/grpc.health.v1.Health/Check"
    for svc in ("", "inca.am.v1.Am"):
        r = unary(ch, chk, hpb.HealthCheckRequest(service=svc), hpb.HealthCheckResponse)
        check(r.status == hpb.HealthCheckResponse.SERVING, "Health/Check %r: SERVING" % svc)
    c, _ = code_of(lambda: unary(ch, chk, hpb.HealthCheckRequest(service="nope"),
                                 hpb.HealthCheckResponse))
    check(c == grpc.StatusCode.NOT_FOUND, "Health/Check of an unknown service: NOT_FOUND")
    watch = ch.unary_stream("/grpc.health.v1.Health/Watch",
                            request_serializer=lambda m: m.SerializeToString(),
                            response_deserializer=hpb.HealthCheckResponse.FromString)
    it = watch(hpb.HealthCheckRequest(service=""), timeout=5)
    check(next(it).status == hpb.HealthCheckResponse.SERVING, "Health/Watch sends SERVING")
    it.cancel()

    protoc.main(["protoc", "-I" + os.path.dirname(PROTO), "--descriptor_set_out=" +
                 os.path.join(tmp, "inca_am.desc"), PROTO])
    ref_set = descriptor_pb2.FileDescriptorSet.FromString(
        open(os.path.join(tmp, "inca_am.desc"), "rb").read())
    want = ref_set.file[0]
    for ver in ("v1alpha", "v1"):
        info = ch.stream_stream("/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % ver,
                                request_serializer=lambda m: m.SerializeToString(),
                                response_deserializer=rpb.ServerReflectionResponse.FromString)
        reqs = [rpb.ServerReflectionRequest(list_services="*"),
                rpb.ServerReflectionRequest(file_containing_symbol="inca.am.v1.Am"),
                rpb.ServerReflectionRequest(file_containing_symbol="inca.am.v1.GroupEvent.Kind"),
                rpb.ServerReflectionRequest(file_by_filename="inca_am.proto"),
                rpb.ServerReflectionRequest(file_containing_symbol="inca.am.v1.Nope")]
        out = list(info(iter(reqs), timeout=5))
        check(len(out) == 5, "%s: one response per request" % ver)
        if len(out) != 5:
            continue
        names = [s.name for s in out[0].list_services_response.service]
        check("inca.am.v1.Am" in names and "grpc.health.v1.Health" in names,
              "%s list_services: %s" % (ver, names))
        for i, what in ((1, "symbol inca.am.v1.Am"), (2, "nested symbol"), (3, "file name")):
            fds = out[i].file_descriptor_response.file_descriptor_proto
            got = descriptor_pb2.FileDescriptorProto.FromString(fds[0]) if fds else None
            svc = got.service[0] if got and got.service else None
            check(got == want and svc.name == "Am" and
                  [m.name for m in svc.method][:3] == ["Join", "Leave", "Session"],
                  "%s %s: inca_am.proto's descriptor, as protoc writes it" % (ver, what))
        check(out[4].error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0],
              "%s unknown symbol: NOT_FOUND" % ver)
    log = am.stop()
    check("unimplemented method" not in log, "no reflection or health call was unimplemented")


CASES = {"tls": case_tls, "admin": case_admin, "views": case_views, "learned": case_learned,
         "health": case_health_reflection}
for name in (sys.argv[3:] or CASES):
    print("# case", name)
    CASES[name]()
print("%d failure(s)" % check.failures)
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if check.failures else 0)
